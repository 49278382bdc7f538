#pragma once
// Python pickles of a dict of numpy arrays, read without Python: Detectron's Caffe2 weight files (the Mask R-CNN
// reference's ImageNet R-50.pkl, written by Python 2's pickle with protocol 2) and such a dict pickled by Python 3
// with protocols 2 to 4. A small pickle machine runs the opcodes these files use and calls only the globals that
// rebuild an array: numpy's _reconstruct, ndarray and dtype, Python 3's _codecs.encode and bytes (protocol 2
// holds bytes as encode(text, 'latin1')) and collections.OrderedDict. Any other global is refused by name, so a
// file cannot make the reader run code.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trainbench {

struct PickledArray {
  std::vector<int64_t> shape;
  std::vector<float> values;  // C order; float64 arrays are rounded to float32, the models' type

  int64_t element_count() const;
};

// The arrays of the dict pickled at `path` by name, or of its "blobs" dict where it has one (Detectron's model
// files keep their weights there beside a "cfg" text); entries whose value is not an array are left out. Arrays
// must be little-endian float32 or float64 ('f4', 'f8') in C order. Throws Error naming `path` for a file that is
// not such a pickle: a global outside those above, an opcode outside protocols 2-4's, another dtype, Fortran
// order, a truncated file, or an array whose data does not match its shape. No length or shape in the file makes
// the reader allocate more than the file's bytes, and it holds at most about a million values (stack and memo).
std::map<std::string, PickledArray> read_pickled_arrays(const std::string& path);

}  // namespace trainbench
