#include "util/torch_file.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/torch_format.h"

namespace trainbench {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tensors are copied as little-endian bytes");

namespace {

constexpr int kMaxDimensions = 64;
constexpr uint64_t kMaxZipEntries = 100000;

struct DtypeInfo {
  TorchDtype dtype;
  const char* name;
  const char* storage;  // the typed storage class torch.save names in persistent ids
  int size;
  uint64_t exponent;  // a floating type's exponent bits, all set in NaN and infinity; 0 for the others
};

constexpr DtypeInfo kDtypes[] = {
    {TorchDtype::kFloat64, "float64", "DoubleStorage", 8, 0x7ff0000000000000},
    {TorchDtype::kFloat32, "float32", "FloatStorage", 4, 0x7f800000},
    {TorchDtype::kFloat16, "float16", "HalfStorage", 2, 0x7c00},
    {TorchDtype::kBFloat16, "bfloat16", "BFloat16Storage", 2, 0x7f80},
    {TorchDtype::kInt64, "int64", "LongStorage", 8, 0},
    {TorchDtype::kInt32, "int32", "IntStorage", 4, 0},
    {TorchDtype::kInt16, "int16", "ShortStorage", 2, 0},
    {TorchDtype::kInt8, "int8", "CharStorage", 1, 0},
    {TorchDtype::kUInt8, "uint8", "ByteStorage", 1, 0},
    {TorchDtype::kBool, "bool", "BoolStorage", 1, 0},
};

const DtypeInfo& info_of(TorchDtype dtype) {
  for (const DtypeInfo& info : kDtypes)
    if (info.dtype == dtype) return info;
  throw Error("unknown TorchDtype");
}

// The functions a state dict's pickle calls, besides the storages. LibTorch's pickle_save (save_state_dict)
// wraps its dict in restore_type_tag(dict, "Dict[str, Tensor]"), which gives the dict back.
const std::set<std::string> kCallables = {
    "collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state", "torch.jit._pickle.restore_type_tag"};

struct Storage {
  std::string key;
  TorchDtype dtype;
  int64_t count;  // elements
};

struct TensorRecord {
  int64_t storage;
  int64_t offset;
  std::vector<int64_t> shape, stride;
};

// What a state dict's pickle may build: storages (persistent ids), tensors on them, OrderedDicts. Objects are
// numbered in `objects_`; each is a storage or a tensor, by index.
class StateDictObjects : public PickleObjects {
 public:
  PickleNode* global(PickleMachine& machine, const std::string& module, const std::string& name) override {
    const std::string global = module + "." + name;
    if (kCallables.count(global) || (module == "torch" && storage_dtype(global) != nullptr))
      return machine.make_global(global);
    machine.error("global " + global +
                  " is not one a state dict names (read: collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
                  "_rebuild_parameter, _rebuild_parameter_with_state, torch.jit._pickle.restore_type_tag and "
                  "torch's typed storages)");
  }

  PickleNode* call(PickleMachine& machine, const PickleNode& callable, const PickleNode& args) override {
    const std::vector<PickleNode*>& items = args.items;
    if (callable.global == "collections.OrderedDict") {
      if (!items.empty()) machine.error("OrderedDict called with arguments; torch.save passes none");
      return machine.make(PlainValue::Kind::kDict);
    }
    if (callable.global == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(machine, items);
    if (callable.global == "torch._utils._rebuild_parameter" ||
        callable.global == "torch._utils._rebuild_parameter_with_state") {
      const size_t arity = callable.global == "torch._utils._rebuild_parameter" ? 3 : 4;
      if (items.size() != arity || !is_tensor(*items[0]))
        machine.error(callable.global + " without a tensor and its " + std::to_string(arity - 1) + " arguments");
      return items[0];  // a Parameter's values are its tensor's
    }
    if (callable.global == "torch.jit._pickle.restore_type_tag") {
      if (items.size() != 2 || !is_string(*items[1])) machine.error("restore_type_tag without a value and a type");
      return items[0];
    }
    machine.error(callable.global + " is called; a state dict names it only in a persistent id");
  }

  // ('storage', torch.<Type>Storage, key, location, element count) in the zip format, with a sixth item (None,
  // or an old storage view, refused) in the legacy one.
  PickleNode* persistent_load(PickleMachine& machine, const PickleNode& id) override {
    const std::vector<PickleNode*>& items = id.items;
    if (!id.is_plain() || id.kind != PlainValue::Kind::kTuple || (items.size() != 5 && items.size() != 6) ||
        !is_string(*items[0], "storage") || items[1]->global.empty() || !is_string(*items[2]) ||
        !is_string(*items[3]) || !is_int(*items[4]))
      machine.error("a persistent id that is not ('storage', type, key, location, size)");
    if (items.size() == 6 && !(items[5]->is_plain() && items[5]->kind == PlainValue::Kind::kNone))
      machine.error("a storage view (torch before 0.4); save the file again with a newer torch");
    const DtypeInfo* dtype = storage_dtype(items[1]->global);
    if (!dtype) machine.error("a persistent id of " + items[1]->global + ", not a typed storage");
    const std::string& key = items[2]->scalar.as_string();
    const int64_t count = items[4]->scalar.as_int();
    if (count < 0 || count > (int64_t{1} << 62) / dtype->size)
      machine.error("storage " + key + " of " + std::to_string(count) + " elements");
    const auto [found, added] = storage_of_key_.emplace(key, storages_.size());
    if (added) {
      storages_.push_back({key, dtype->dtype, count});
    } else if (storages_[found->second].dtype != dtype->dtype || storages_[found->second].count != count) {
      machine.error("storage " + key + " named again with another type or size");
    }
    return machine.make_object(add_object(false, found->second));
  }

  // OrderedDict's attributes (a state dict's `_metadata`: module versions), which a reader of tensors ignores.
  void build(PickleMachine& machine, PickleNode& object, const PickleNode& state) override {
    if (!object.is_plain() || object.kind != PlainValue::Kind::kDict || !state.is_plain())
      machine.error("BUILD on a " + object.description() + " with a " + state.description() +
                    "; a state dict sets attributes only on its OrderedDict");
  }

  bool is_tensor(const PickleNode& node) const { return node.object >= 0 && objects_[node.object].tensor; }
  const TensorRecord& tensor(const PickleNode& node) const { return tensors_[objects_[node.object].index]; }
  const std::vector<Storage>& storages() const { return storages_; }

 private:
  struct ObjectRef {
    bool tensor;
    size_t index;
  };

  static const DtypeInfo* storage_dtype(const std::string& global) {
    for (const DtypeInfo& info : kDtypes)
      if (global == std::string("torch.") + info.storage) return &info;
    return nullptr;
  }

  static bool is_string(const PickleNode& node, const char* value = nullptr) {
    return node.is_plain() && node.kind == PlainValue::Kind::kString && (!value || node.scalar.as_string() == value);
  }
  static bool is_int(const PickleNode& node) { return node.is_plain() && node.kind == PlainValue::Kind::kInt; }

  int64_t add_object(bool tensor, size_t index) {
    objects_.push_back({tensor, index});
    return static_cast<int64_t>(objects_.size() - 1);
  }

  std::vector<int64_t> ints(PickleMachine& machine, const PickleNode& node, const char* what) const {
    if (!node.is_plain() || node.kind != PlainValue::Kind::kTuple) machine.error(std::string(what) + " is not a tuple");
    if (node.items.size() > kMaxDimensions)
      machine.error(std::string(what) + " of " + std::to_string(node.items.size()) + " dimensions (at most 64)");
    std::vector<int64_t> values;
    for (const PickleNode* item : node.items) {
      if (!is_int(*item)) machine.error(std::string(what) + " holds a " + item->description() + ", not an int");
      values.push_back(item->scalar.as_int());
    }
    return values;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]).
  PickleNode* rebuild_tensor(PickleMachine& machine, const std::vector<PickleNode*>& args) {
    if ((args.size() != 6 && args.size() != 7) || args[0]->object < 0 || objects_[args[0]->object].tensor ||
        !is_int(*args[1]))
      machine.error("_rebuild_tensor_v2 without a storage, an offset, a size, a stride and its flags");
    TensorRecord record{static_cast<int64_t>(objects_[args[0]->object].index), args[1]->scalar.as_int(),
                        ints(machine, *args[2], "a tensor's size"), ints(machine, *args[3], "a tensor's stride")};
    if (record.shape.size() != record.stride.size())
      machine.error("a tensor of " + std::to_string(record.shape.size()) + " sizes and " +
                    std::to_string(record.stride.size()) + " strides");
    tensors_.push_back(std::move(record));
    return machine.make_object(add_object(true, tensors_.size() - 1));
  }

  std::vector<ObjectRef> objects_;
  std::vector<Storage> storages_;
  std::map<std::string, size_t> storage_of_key_;
  std::vector<TensorRecord> tensors_;
};

// The number of elements of `record`, after checking that every element lies inside its storage of `count`
// elements: sizes and strides not negative, no product or sum overflowing, the offset and the last element
// (offset + sum of (size - 1) * stride) inside the storage. Throws Error naming `where`.
int64_t checked_element_count(const TensorRecord& record, int64_t count, const std::string& where) {
  if (record.offset < 0) fail(where, "storage offset " + std::to_string(record.offset) + " is negative");
  int64_t elements = 1, last = record.offset;
  for (size_t i = 0; i < record.shape.size(); ++i) {
    if (record.shape[i] < 0 || record.stride[i] < 0)
      fail(where, "dimension " + std::to_string(i) + " has size " + std::to_string(record.shape[i]) + " and stride " +
                      std::to_string(record.stride[i]) + "; neither may be negative");
    int64_t reach = 0;
    if (__builtin_mul_overflow(elements, record.shape[i], &elements) || elements > (int64_t{1} << 59) ||
        (record.shape[i] > 0 && (__builtin_mul_overflow(record.shape[i] - 1, record.stride[i], &reach) ||
                                 __builtin_add_overflow(last, reach, &last))))
      fail(where, "its size and stride overflow 64-bit arithmetic");
  }
  if (elements > 0 && last >= count)
    fail(where, "reaches element " + std::to_string(last) + " of a storage of " + std::to_string(count) +
                    " (storage offset " + std::to_string(record.offset) + ", a stride past its storage)");
  if (elements == 0 && record.offset > count)
    fail(where, "storage offset " + std::to_string(record.offset) + " past its storage of " + std::to_string(count));
  return elements;
}

// The elements of `record` in C order, copied from `storage` (whose bounds checked_element_count checked).
std::string gather(const TensorRecord& record, int64_t elements, std::string_view storage, int size) {
  std::string bytes(static_cast<size_t>(elements) * size, '\0');
  if (elements == 0) return bytes;
  bool contiguous = true;
  for (int64_t i = static_cast<int64_t>(record.shape.size()) - 1, expected = 1; i >= 0; --i) {
    if (record.shape[i] != 1 && record.stride[i] != expected) contiguous = false;
    expected *= record.shape[i];
  }
  if (contiguous) {
    std::memcpy(bytes.data(), storage.data() + record.offset * size, bytes.size());
    return bytes;
  }
  std::vector<int64_t> index(record.shape.size(), 0);
  for (int64_t out = 0, at = record.offset; out < elements; ++out) {
    std::memcpy(bytes.data() + out * size, storage.data() + at * size, size);
    // The next index in C order and its element; every step stays within the reach checked_element_count
    // checked, so no sum overflows (a size-1 dimension's stride, which may be anything, is never added).
    for (size_t d = index.size(); d-- > 0;) {
      if (index[d] + 1 < record.shape[d]) {
        ++index[d];
        at += record.stride[d];
        break;
      }
      at -= (record.shape[d] - 1) * record.stride[d];
      index[d] = 0;
    }
  }
  return bytes;
}

// The name -> tensor entries of the pickle's value: a dict (an OrderedDict reads as one), or one under "model".
std::vector<std::pair<std::string, const PickleNode*>> state_dict_entries(const PickleNode& value,
                                                                          const StateDictObjects& objects,
                                                                          const std::string& path) {
  const auto is_dict = [](const PickleNode& node) { return node.is_plain() && node.kind == PlainValue::Kind::kDict; };
  if (!is_dict(value)) fail(path, "holds a " + value.description() + ", not a dict of tensors (a state dict)");
  const PickleNode* dict = &value;
  if (value.items.size() == 2 && value.items[0]->kind == PlainValue::Kind::kString &&
      value.items[0]->scalar.as_string() == "model" && is_dict(*value.items[1]))
    dict = value.items[1];  // {"model": state_dict}
  std::vector<std::pair<std::string, const PickleNode*>> entries;
  std::set<std::string> names;
  for (size_t i = 0; i + 1 < dict->items.size(); i += 2) {
    const PickleNode& key = *dict->items[i];
    if (key.kind != PlainValue::Kind::kString)
      fail(path, "holds a key that is a " + key.description() + ", not a name");
    const std::string& name = key.scalar.as_string();
    if (!objects.is_tensor(*dict->items[i + 1]))
      fail(path + ": " + name, "is a " + dict->items[i + 1]->description() + ", not a tensor");
    if (!names.insert(name).second) fail(path + ": " + name, "is set twice");
    entries.emplace_back(name, dict->items[i + 1]);
  }
  return entries;
}

// Every tensor of the state dict, checked against its storage and copied out. Tensors may share a storage (tied
// weights: BERT's decoder is its word embeddings); each is copied on its own, so a view can read only its own
// storage's bytes, never another's or the heap's. A state dict never needs views of each other to stay views
// (loading copies values into the model's own tensors), and the copies are bounded to twice the storages' bytes
// (plus 1 MiB) so that many views of one storage cannot make a small file fill memory.
std::vector<StoredTensor> copy_tensors(const std::vector<std::pair<std::string, const PickleNode*>>& entries,
                                       const StateDictObjects& objects,
                                       const std::vector<std::string_view>& storage_bytes, const std::string& path) {
  int64_t budget = int64_t{1} << 20;
  for (const std::string_view bytes : storage_bytes) budget += 2 * static_cast<int64_t>(bytes.size());
  std::vector<StoredTensor> tensors;
  for (const auto& [name, node] : entries) {
    const TensorRecord& record = objects.tensor(*node);
    const Storage& storage = objects.storages()[record.storage];
    const std::string where = path + ": " + name;
    const int64_t elements = checked_element_count(record, storage.count, where);
    const int size = element_size(storage.dtype);
    if ((budget -= elements * size) < 0)
      fail(where, "its views of shared storages add up to more than twice the file's tensor bytes");
    tensors.push_back(
        {name, storage.dtype, record.shape, gather(record, elements, storage_bytes[record.storage], size)});
  }
  return tensors;
}

// A storage's bytes must be exactly its element count times its element size: shorter would read past it.
void check_storage_size(const Storage& storage, size_t bytes, const std::string& path) {
  const uint64_t expected = static_cast<uint64_t>(storage.count) * element_size(storage.dtype);
  if (bytes != expected)
    fail(path + ": storage " + storage.key, "holds " + std::to_string(bytes) + " bytes, its " +
                                                std::to_string(storage.count) + " " + dtype_name(storage.dtype) +
                                                " elements need " + std::to_string(expected));
}

std::vector<StoredTensor> read_zip_state_dict(std::string_view file, const std::string& path) {
  const TorchArchive archive = read_torch_archive(file, path, kMaxZipEntries);
  const auto byteorder = archive.entries.find(archive.prefix + "byteorder");
  if (byteorder != archive.entries.end() && byteorder->second != "little")
    fail(path, "byte order \"" + std::string(byteorder->second.substr(0, 16)) + "\"; only little-endian is read");
  StateDictObjects objects;
  PickleMachine machine(archive.pickle, 0, path + ": data.pkl", &objects);
  const PickleNode* value = machine.run();
  if (machine.end() != archive.pickle.size()) machine.error("bytes after STOP");
  const auto entries = state_dict_entries(*value, objects, path);
  std::vector<std::string_view> storage_bytes;
  for (const Storage& storage : objects.storages()) {
    const auto record = archive.entries.find(archive.prefix + "data/" + storage.key);
    if (record == archive.entries.end()) fail(path, "has no record " + archive.prefix + "data/" + storage.key);
    check_storage_size(storage, record->second.size(), path);
    storage_bytes.push_back(record->second);
  }
  return copy_tensors(entries, objects, storage_bytes, path);
}

// torch's legacy magic number 0x1950a86a20f9469cfc6c, pickled as LONG1 of 10 bytes, and the offset after its
// pickle's STOP; 0 when `file` does not begin with it (protocol 4 and 5 frame it).
size_t after_legacy_magic(std::string_view file) {
  static const std::string_view kMagic("\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 13);
  if (file.size() < 2 || static_cast<unsigned char>(file[0]) != 0x80) return 0;
  size_t at = 2;
  if (file.size() > at && static_cast<unsigned char>(file[at]) == 0x95) at += 9;  // FRAME and its length
  return file.size() >= at + kMagic.size() && file.substr(at, kMagic.size()) == kMagic ? at + kMagic.size() : 0;
}

// One plain pickle of the legacy header, from `at`; `at` moves past it.
PlainValue legacy_plain(std::string_view file, size_t& at, const std::string& source) {
  PickleMachine machine(file, at, source);
  const PickleNode* value = machine.run();
  at = machine.end();
  return machine.plain(*value);
}

std::vector<StoredTensor> read_legacy_state_dict(std::string_view file, size_t at, const std::string& path) {
  const PlainValue protocol = legacy_plain(file, at, path + ": protocol version");
  if (protocol.kind() != PlainValue::Kind::kInt || protocol.as_int() != 1001)
    fail(path, "legacy torch.save protocol version is not 1001");
  const PlainValue system = legacy_plain(file, at, path + ": system info");
  const PlainValue* little_endian = system.kind() == PlainValue::Kind::kDict ? system.find("little_endian") : nullptr;
  if (!little_endian || little_endian->kind() != PlainValue::Kind::kBool || !little_endian->as_bool())
    fail(path, "its system info does not say little_endian: True; only little-endian files are read");
  StateDictObjects objects;
  PickleMachine machine(file, at, path + ": pickle", &objects);
  const auto entries = state_dict_entries(*machine.run(), objects, path);
  at = machine.end();
  const PlainValue keys = legacy_plain(file, at, path + ": storage keys");
  if (keys.kind() != PlainValue::Kind::kList || keys.items().size() != objects.storages().size())
    fail(path, "its storage key list does not name the " + std::to_string(objects.storages().size()) +
                   " storages its pickle uses");
  std::map<std::string, std::string_view> bytes_of_key;
  for (const PlainValue& key : keys.items()) {
    const std::string& name = key.kind() == PlainValue::Kind::kString ? key.as_string() : "";
    const Storage* storage = nullptr;
    for (const Storage& candidate : objects.storages())
      if (candidate.key == name) storage = &candidate;
    if (!storage || bytes_of_key.count(name)) fail(path, "its storage key list names \"" + name + "\" wrongly");
    if (file.size() - at < 8) fail(path + ": storage " + name, "is missing (the file ends; truncated?)");
    uint64_t count = 0;
    for (int i = 7; i >= 0; --i) count = (count << 8) | static_cast<unsigned char>(file[at + i]);
    at += 8;
    if (count != static_cast<uint64_t>(storage->count))
      fail(path + ": storage " + name,
           "holds " + std::to_string(count) + " elements, its tensors' storage has " + std::to_string(storage->count));
    const uint64_t size = count * element_size(storage->dtype);
    if (file.size() - at < size) fail(path + ": storage " + name, "runs past the end of the file (truncated?)");
    bytes_of_key[name] = file.substr(at, size);
    at += size;
  }
  if (at != file.size()) fail(path, std::to_string(file.size() - at) + " bytes after the last storage");
  std::vector<std::string_view> storage_bytes;
  for (const Storage& storage : objects.storages()) storage_bytes.push_back(bytes_of_key.at(storage.key));
  return copy_tensors(entries, objects, storage_bytes, path);
}

}  // namespace

int element_size(TorchDtype dtype) { return info_of(dtype).size; }

const char* dtype_name(TorchDtype dtype) { return info_of(dtype).name; }

int64_t StoredTensor::element_count() const { return static_cast<int64_t>(bytes.size()) / element_size(dtype); }

std::vector<StoredTensor> read_torch_state_dict(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) fail(path, "is a directory, not a file torch.save wrote");
  const std::string file = read_file(path);
  if (const size_t after_magic = after_legacy_magic(file)) return read_legacy_state_dict(file, after_magic, path);
  if (file.compare(0, 2, "PK") != 0) fail(path, "is not a file torch.save wrote (neither a zip archive nor legacy)");
  return read_zip_state_dict(file, path);
}

int64_t first_non_finite(const StoredTensor& tensor) {
  const DtypeInfo& info = info_of(tensor.dtype);
  if (info.exponent == 0) return -1;
  for (int64_t i = 0, count = tensor.element_count(); i < count; ++i) {
    uint64_t bits = 0;
    std::memcpy(&bits, tensor.bytes.data() + i * info.size, info.size);  // little-endian host and file
    if ((bits & info.exponent) == info.exponent) return i;
  }
  return -1;
}

}  // namespace trainbench
