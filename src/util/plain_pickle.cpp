#include "util/plain_pickle.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/torch_format.h"

namespace trainbench {

// ---- PlainValue ----

PlainValue PlainValue::boolean(bool value) {
  PlainValue result;
  result.kind_ = Kind::kBool;
  result.bool_ = value;
  return result;
}

PlainValue PlainValue::integer(int64_t value) {
  PlainValue result;
  result.kind_ = Kind::kInt;
  result.int_ = value;
  return result;
}

PlainValue PlainValue::real(double value) {
  PlainValue result;
  result.kind_ = Kind::kFloat;
  result.float_ = value;
  return result;
}

PlainValue PlainValue::string(std::string value) {
  PlainValue result;
  result.kind_ = Kind::kString;
  result.string_ = std::move(value);
  return result;
}

PlainValue PlainValue::list(std::vector<PlainValue> items) {
  PlainValue result;
  result.kind_ = Kind::kList;
  result.items_ = std::move(items);
  return result;
}

PlainValue PlainValue::tuple(std::vector<PlainValue> items) {
  PlainValue result = list(std::move(items));
  result.kind_ = Kind::kTuple;
  return result;
}

PlainValue PlainValue::dict(std::vector<std::pair<PlainValue, PlainValue>> entries) {
  PlainValue result;
  result.kind_ = Kind::kDict;
  result.entries_ = std::move(entries);
  return result;
}

const char* PlainValue::kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
  }
  return "?";
}

namespace {

[[noreturn]] void wrong_kind(PlainValue::Kind expected, PlainValue::Kind found) {
  throw Error(std::string("expected a ") + PlainValue::kind_name(expected) + ", found a " +
              PlainValue::kind_name(found));
}

}  // namespace

bool PlainValue::as_bool() const {
  if (kind_ != Kind::kBool) wrong_kind(Kind::kBool, kind_);
  return bool_;
}

int64_t PlainValue::as_int() const {
  if (kind_ != Kind::kInt) wrong_kind(Kind::kInt, kind_);
  return int_;
}

double PlainValue::as_float() const {
  if (kind_ == Kind::kInt) return static_cast<double>(int_);
  if (kind_ != Kind::kFloat) wrong_kind(Kind::kFloat, kind_);
  return float_;
}

const std::string& PlainValue::as_string() const {
  if (kind_ != Kind::kString) wrong_kind(Kind::kString, kind_);
  return string_;
}

const std::vector<PlainValue>& PlainValue::items() const {
  if (kind_ != Kind::kList && kind_ != Kind::kTuple) wrong_kind(Kind::kList, kind_);
  return items_;
}

std::vector<PlainValue>& PlainValue::items() {
  if (kind_ != Kind::kList && kind_ != Kind::kTuple) wrong_kind(Kind::kList, kind_);
  return items_;
}

const std::vector<std::pair<PlainValue, PlainValue>>& PlainValue::entries() const {
  if (kind_ != Kind::kDict) wrong_kind(Kind::kDict, kind_);
  return entries_;
}

std::vector<std::pair<PlainValue, PlainValue>>& PlainValue::entries() {
  if (kind_ != Kind::kDict) wrong_kind(Kind::kDict, kind_);
  return entries_;
}

const PlainValue* PlainValue::find(const std::string& key) const {
  for (const auto& [name, value] : entries())
    if (name.kind_ == Kind::kString && name.string_ == key) return &value;
  return nullptr;
}

const PlainValue& PlainValue::at(const std::string& key) const {
  const PlainValue* value = find(key);
  if (!value) throw Error("dict has no key \"" + key + "\"");
  return *value;
}

void PlainValue::set(const std::string& key, PlainValue value) {
  for (auto& [name, existing] : entries()) {
    if (name.kind_ == Kind::kString && name.string_ == key) {
      existing = std::move(value);
      return;
    }
  }
  entries_.emplace_back(string(key), std::move(value));
}

// NaN equals NaN here: equality means "the same value was read", which is what tests and checks ask.
bool PlainValue::operator==(const PlainValue& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return bool_ == other.bool_;
    case Kind::kInt:
      return int_ == other.int_;
    case Kind::kFloat:
      return float_ == other.float_ || (std::isnan(float_) && std::isnan(other.float_));
    case Kind::kString:
      return string_ == other.string_;
    case Kind::kList:
    case Kind::kTuple:
      return items_ == other.items_;
    case Kind::kDict:
      return entries_ == other.entries_;
  }
  return false;
}

// ---- pickler (protocol 2) ----

namespace {

constexpr int kMaxNesting = 64;
constexpr size_t kMaxTorchFileBytes = 16 << 20;

void pickle_int(std::string& out, int64_t value) {
  if (value >= 0 && value < 256) {
    out.push_back('K');
    append_little_endian(out, static_cast<uint64_t>(value), 1);
  } else if (value >= 0 && value < 65536) {
    out.push_back('M');
    append_little_endian(out, static_cast<uint64_t>(value), 2);
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    out.push_back('J');
    append_little_endian(out, static_cast<uint64_t>(value), 4);
  } else {
    out += "\x8a\x08";  // LONG1 with 8 bytes of two's complement
    append_little_endian(out, static_cast<uint64_t>(value), 8);
  }
}

void pickle_float(std::string& out, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  out.push_back('G');  // BINFLOAT: big-endian IEEE double
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void pickle_value(std::string& out, const PlainValue& value, int depth, const std::string& source);

void pickle_container(std::string& out, const PlainValue& value, int depth, const std::string& source) {
  if (value.kind() == PlainValue::Kind::kDict) {
    out += "}(";  // EMPTY_DICT, MARK, key value ..., SETITEMS
    for (const auto& [key, item] : value.entries()) {
      if (key.kind() == PlainValue::Kind::kList || key.kind() == PlainValue::Kind::kDict)
        fail(source,
             std::string("a dict key is a ") + PlainValue::kind_name(key.kind()) + ", which Python cannot hash");
      pickle_value(out, key, depth + 1, source);
      pickle_value(out, item, depth + 1, source);
    }
    out.push_back('u');
    return;
  }
  const std::vector<PlainValue>& items = value.items();
  if (value.kind() == PlainValue::Kind::kTuple && items.size() <= 3) {
    for (const PlainValue& item : items) pickle_value(out, item, depth + 1, source);
    const char tuples[] = {')', '\x85', '\x86', '\x87'};  // EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3
    out.push_back(tuples[items.size()]);
    return;
  }
  out += value.kind() == PlainValue::Kind::kList ? "](" : "(";  // EMPTY_LIST MARK ... APPENDS; MARK ... TUPLE
  for (const PlainValue& item : items) pickle_value(out, item, depth + 1, source);
  out.push_back(value.kind() == PlainValue::Kind::kList ? 'e' : 't');
}

void pickle_value(std::string& out, const PlainValue& value, int depth, const std::string& source) {
  if (depth > kMaxNesting) fail(source, "nested deeper than " + std::to_string(kMaxNesting) + " levels");
  switch (value.kind()) {
    case PlainValue::Kind::kNone:
      out.push_back('N');
      return;
    case PlainValue::Kind::kBool:
      out.push_back(value.as_bool() ? '\x88' : '\x89');
      return;
    case PlainValue::Kind::kInt:
      pickle_int(out, value.as_int());
      return;
    case PlainValue::Kind::kFloat:
      pickle_float(out, value.as_float());
      return;
    case PlainValue::Kind::kString: {
      const std::string& text = value.as_string();
      if (!is_utf8(text)) fail(source, "a string is not UTF-8, which Python's str must be");
      if (text.size() > UINT32_MAX) fail(source, "a string longer than 4 GiB");
      out.push_back('X');  // BINUNICODE
      append_little_endian(out, text.size(), 4);
      out += text;
      return;
    }
    default:
      pickle_container(out, value, depth, source);
  }
}

}  // namespace

std::string pickle_plain(const PlainValue& value, const std::string& source) {
  std::string out = "\x80\x02";  // PROTO 2
  pickle_value(out, value, 0, source);
  out.push_back('.');  // STOP
  return out;
}

// ---- unpickler and torch.save's archive (util/torch_format.h) ----

// The pickle machine without objects: globals, persistent ids and bytes are refused.
PlainValue unpickle_plain(const std::string& bytes, const std::string& source) {
  PickleMachine machine(bytes, 0, source);
  const PickleNode* value = machine.run();
  if (machine.end() != bytes.size()) machine.error("bytes after STOP");
  return machine.plain(*value);
}

void save_torch_plain(const std::string& path, const PlainValue& value) {
  std::string archive = std::filesystem::path(path).stem().string();
  if (archive.empty() || archive.find_first_of("/\\") != std::string::npos) archive = "archive";
  const std::string pickle = pickle_plain(value, path);
  write_file_atomically(path, stored_zip({{archive + "/data.pkl", pickle}, {archive + "/version", "3\n"}}));
}

PlainValue load_torch_plain(const std::string& path) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) fail(path, "cannot read: " + error.message());
  if (size > kMaxTorchFileBytes) fail(path, "larger than 16 MiB; not a torch.save file of plain values");
  const std::string bytes = read_file(path);
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 && bytes.compare(0, 2, "PK") != 0)
    fail(path, "torch's legacy (pre-1.6, not zip) format is not read; save it again with a newer torch");
  return unpickle_plain(std::string(read_torch_archive(bytes, path, 10000).pickle), path + ": data.pkl");
}

}  // namespace trainbench
