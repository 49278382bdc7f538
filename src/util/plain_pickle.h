#pragma once
// Plain Python values (None, bool, int, float, str, list, tuple, dict) pickled, and torch.save's zip archive of
// such a pickle: the `common.pt` of Megatron's distributed checkpoint (its optimizer param_groups: lr, betas,
// eps, weight_decay, step, ...), which holds no tensors.
//
// Why not LibTorch's unpickler: it trusts its input (it rebuilds whatever classes a file names), and these
// readers must work in the torch-free layers. This reader runs only the opcodes that build the eight plain types
// (protocols 2 to 5, as torch.save and pickle.dump write them) on the pickle machine of util/torch_format.h; a
// global (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, ...), bytes, sets, persistent ids and any unknown opcode are
// refused by name. Nesting is at most 64 levels and a file builds at most a million values, however it shares
// them through the memo. Tensors: util/torch_file.h.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trainbench {

class PlainValue {
 public:
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };

  PlainValue() = default;  // None
  static PlainValue boolean(bool value);
  static PlainValue integer(int64_t value);
  static PlainValue real(double value);
  static PlainValue string(std::string value);
  static PlainValue list(std::vector<PlainValue> items = {});
  static PlainValue tuple(std::vector<PlainValue> items = {});
  static PlainValue dict(std::vector<std::pair<PlainValue, PlainValue>> entries = {});

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  // The accessors throw Error naming the expected and actual kinds.
  bool as_bool() const;
  int64_t as_int() const;
  double as_float() const;  // a float, or an int converted (Python's int is a number wherever a float is)
  const std::string& as_string() const;
  const std::vector<PlainValue>& items() const;  // a list's or a tuple's
  std::vector<PlainValue>& items();
  const std::vector<std::pair<PlainValue, PlainValue>>& entries() const;  // a dict's, in insertion order
  std::vector<std::pair<PlainValue, PlainValue>>& entries();

  // The dict entry whose key is the string `key`; null when there is none. Throws when this is not a dict.
  const PlainValue* find(const std::string& key) const;
  // find(key), or an Error naming the key.
  const PlainValue& at(const std::string& key) const;
  // Sets (or replaces) the string-keyed entry of a dict.
  void set(const std::string& key, PlainValue value);

  bool operator==(const PlainValue& other) const;
  bool operator!=(const PlainValue& other) const { return !(*this == other); }

  // Python's name of the kind: "NoneType", "bool", "int", "float", "str", "list", "tuple", "dict".
  static const char* kind_name(Kind kind);

 private:
  Kind kind_ = Kind::kNone;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_;
  std::vector<PlainValue> items_;
  std::vector<std::pair<PlainValue, PlainValue>> entries_;
};

// Pickle protocol 2 of `value`, as torch.save writes data.pkl. Strings must be UTF-8, dict keys must not be
// lists or dicts (Python could not load them): both refused naming `source`.
std::string pickle_plain(const PlainValue& value, const std::string& source = "value");
// The value of a pickle of plain values; throws Error naming `source`, the offset and the opcode otherwise.
PlainValue unpickle_plain(const std::string& bytes, const std::string& source);

// torch.save's format for `value`: an uncompressed zip of `<archive>/data.pkl` and `<archive>/version` ("3"),
// where archive is the file name's stem, as torch 1.13 writes it and as the reference's common.pt is (newer
// torch also writes `<archive>/byteorder`, and reads files without it as little-endian). Committed atomically.
void save_torch_plain(const std::string& path, const PlainValue& value);
// The value torch.load would return for a torch.save file of plain values; refuses compressed or damaged
// archives (CRC checked), archives without one `<archive>/data.pkl`, and files over 16 MiB, naming the file.
PlainValue load_torch_plain(const std::string& path);

}  // namespace trainbench
