#pragma once
// State dicts as torch.save writes them, read without LibTorch and without trusting the file: every weights file
// a benchmark starts from (`--weights`, BERT's `init_checkpoint`, the detectors' `backbone_weights`).
//
// Why not LibTorch's torch::pickle_load: it rebuilds what the file says and then trusts it. A stride reaching past
// its storage, a storage record shorter than its tensor, or an offset near the storage's end made it read heap
// memory into a model (or crash), a pickle nested 150,000 deep overflowed its stack, and it could not read the
// legacy format or an OrderedDict, the two forms Python's own files mostly take. This reader runs the pickle on
// util/torch_format.h's machine, calls only the globals a state dict needs (collections.OrderedDict,
// torch._utils._rebuild_tensor_v2, _rebuild_parameter, _rebuild_parameter_with_state, LibTorch's
// torch.jit._pickle.restore_type_tag, and the typed storages torch.FloatStorage, ... as persistent ids name them),
// and checks every size, stride and offset against the
// storage before it copies a byte.
//
// Formats: the zip archive torch.save writes since torch 1.6 (`<archive>/data.pkl`, `<archive>/data/<key>`
// storages, `version`, optionally `byteorder`) and the legacy one before it (`_use_new_zipfile_serialization=
// False`: magic number, protocol 1001, system info, the pickle, the sorted storage keys, then each storage as
// its element count and its bytes). Pickle protocols 2 to 5. Little-endian files only.
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench {

enum class TorchDtype { kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kInt32, kInt16, kInt8, kUInt8, kBool };

// Bytes per element, and torch's name ("float32", "bfloat16", "bool", ...).
int element_size(TorchDtype dtype);
const char* dtype_name(TorchDtype dtype);

struct StoredTensor {
  std::string name;  // the state dict's key
  TorchDtype dtype = TorchDtype::kFloat32;
  std::vector<int64_t> shape;
  std::string bytes;  // the elements in C order (contiguous), little-endian

  int64_t element_count() const;
};

// The tensors of the dict torch.save wrote at `path`, in the file's order: a dict or OrderedDict of str -> tensor
// (a Parameter reads as its tensor), or such a dict under a single "model" key (as NVIDIA's BERT converter and
// many training scripts save one). Each tensor is copied out of its storage on its own, so views (a transposed
// tensor, one with a storage offset, tensors sharing a storage as tied weights do) read as the values Python
// sees; together they may hold at most twice the storages' bytes (plus 1 MiB). Throws Error naming `path` and
// the cause for anything else: another value in the dict, a global outside those above, a size, stride or offset
// that reaches past its storage, a storage record shorter or longer than its storage, more than 64 dimensions, a
// damaged archive.
std::vector<StoredTensor> read_torch_state_dict(const std::string& path);

// The index of the first NaN or infinity of a floating-point tensor, or -1 (always for integer and bool tensors).
int64_t first_non_finite(const StoredTensor& tensor);

}  // namespace trainbench
