#include "util/plain_pickle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <unordered_map>

#include <zlib.h>

#include "util/atomic_file.h"
#include "util/error.h"

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

// ---- shared checks ----

namespace {

constexpr int kMaxNesting = 64;
constexpr int64_t kMaxValues = 1000000;
constexpr size_t kMaxTorchFileBytes = 16 << 20;

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as Python decodes pickled str.
bool is_utf8(const std::string& text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  for (size_t i = 0; i < size;) {
    const unsigned char lead = bytes[i];
    const int length = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
    if (length == 0 || i + length > size) return false;
    uint32_t code = length == 1 ? lead : lead & (0x7f >> length);
    for (int k = 1; k < length; ++k) {
      if ((bytes[i + k] & 0xc0) != 0x80) return false;
      code = (code << 6) | (bytes[i + k] & 0x3f);
    }
    const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < smallest[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += length;
  }
  return true;
}

// ---- pickler (protocol 2) ----

void append_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

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

// ---- unpickler ----

namespace {

// Every opcode of pickle protocols 0 to 5 by its name, so that a refusal names what the file asked for.
const std::map<unsigned char, const char*> kOpcodeNames = {
    {'(', "MARK"},
    {'.', "STOP"},
    {'0', "POP"},
    {'1', "POP_MARK"},
    {'2', "DUP"},
    {'F', "FLOAT"},
    {'I', "INT"},
    {'J', "BININT"},
    {'K', "BININT1"},
    {'L', "LONG"},
    {'M', "BININT2"},
    {'N', "NONE"},
    {'P', "PERSID"},
    {'Q', "BINPERSID"},
    {'R', "REDUCE"},
    {'S', "STRING"},
    {'T', "BINSTRING"},
    {'U', "SHORT_BINSTRING"},
    {'V', "UNICODE"},
    {'X', "BINUNICODE"},
    {'a', "APPEND"},
    {'b', "BUILD"},
    {'c', "GLOBAL"},
    {'d', "DICT"},
    {'}', "EMPTY_DICT"},
    {'e', "APPENDS"},
    {'g', "GET"},
    {'h', "BINGET"},
    {'i', "INST"},
    {'j', "LONG_BINGET"},
    {'l', "LIST"},
    {']', "EMPTY_LIST"},
    {'o', "OBJ"},
    {'p', "PUT"},
    {'q', "BINPUT"},
    {'r', "LONG_BINPUT"},
    {'s', "SETITEM"},
    {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"},
    {'u', "SETITEMS"},
    {'G', "BINFLOAT"},
    {0x80, "PROTO"},
    {0x81, "NEWOBJ"},
    {0x82, "EXT1"},
    {0x83, "EXT2"},
    {0x84, "EXT4"},
    {0x85, "TUPLE1"},
    {0x86, "TUPLE2"},
    {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"},
    {0x89, "NEWFALSE"},
    {0x8a, "LONG1"},
    {0x8b, "LONG4"},
    {'B', "BINBYTES"},
    {'C', "SHORT_BINBYTES"},
    {0x8c, "SHORT_BINUNICODE"},
    {0x8d, "BINUNICODE8"},
    {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"},
    {0x90, "ADDITEMS"},
    {0x91, "FROZENSET"},
    {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"},
    {0x94, "MEMOIZE"},
    {0x95, "FRAME"},
    {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"},
};

// A value under construction. Nodes live in the machine's arena and point at each other: the memo can make a
// list hold itself, which the depth limit of the final conversion then refuses.
struct Node {
  PlainValue::Kind kind = PlainValue::Kind::kNone;
  PlainValue scalar;         // None, bool, int, float, str
  std::vector<Node*> items;  // list, tuple; dict: key, value, key, value, ...
};

class PlainUnpickler {
 public:
  PlainUnpickler(const std::string& bytes, std::string source) : data_(bytes), source_(std::move(source)) {}

  PlainValue run() {
    while (true) {
      opcode_at_ = position_;
      const auto opcode = static_cast<unsigned char>(*take(1));
      if (opcode == '.') break;
      if (!run_structure(opcode) && !run_fill(opcode) && !run_scalar(opcode) && !run_memo(opcode)) refuse(opcode);
    }
    if (stack_.size() != 1 || !marks_.empty())
      error("STOP with " + std::to_string(stack_.size()) + " values on the stack");
    if (position_ != data_.size()) error("bytes after STOP");
    Budget budget;
    return convert(stack_.back(), 0, budget);
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(source_, "pickle offset " + std::to_string(opcode_at_) + ": " + what);
  }

  [[noreturn]] void refuse(unsigned char opcode) const {
    const auto name = kOpcodeNames.find(opcode);
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", opcode);
    if (name == kOpcodeNames.end()) error(std::string("unknown pickle opcode ") + hex);
    error(std::string("opcode ") + name->second + " (" + hex +
          ") is not read here: only None, bool, int, float, str, list, tuple and dict are");
  }

  const char* take(size_t count) {
    if (count > data_.size() - position_) error("the pickle ends early (truncated)");
    const char* bytes = data_.data() + position_;
    position_ += count;
    return bytes;
  }

  uint64_t take_little_endian(int bytes) {
    const auto* raw = reinterpret_cast<const unsigned char*>(take(static_cast<size_t>(bytes)));
    uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | raw[i];
    return value;
  }

  Node* make(PlainValue::Kind kind, PlainValue scalar = {}) {
    if (static_cast<int64_t>(arena_.size()) >= kMaxValues) error("more than a million values");
    arena_.push_back(std::make_unique<Node>());
    arena_.back()->kind = kind;
    arena_.back()->scalar = std::move(scalar);
    return arena_.back().get();
  }

  void push(Node* node) {
    if (static_cast<int64_t>(stack_.size()) >= kMaxValues) error("more than a million values on the stack");
    stack_.push_back(node);
  }

  Node* pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) error("the stack is empty");
    Node* node = stack_.back();
    stack_.pop_back();
    return node;
  }

  // The values pushed since the last MARK, which is removed.
  std::vector<Node*> pop_to_mark() {
    if (marks_.empty()) error("no MARK to pop to");
    std::vector<Node*> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  Node* top(PlainValue::Kind kind, const char* opcode) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) error(std::string(opcode) + " on an empty stack");
    Node* node = stack_.back();
    if (node->kind != kind)
      error(std::string(opcode) + " on a " + PlainValue::kind_name(node->kind) + ", not a " +
            PlainValue::kind_name(kind));
    return node;
  }

  void add_items(Node* container, const std::vector<Node*>& items, const char* opcode) {
    if (container->kind == PlainValue::Kind::kDict && items.size() % 2 != 0)
      error(std::string(opcode) + " with a key and no value");
    for (size_t i = 0; i < items.size(); i += container->kind == PlainValue::Kind::kDict ? 2 : 1) {
      if (container->kind == PlainValue::Kind::kDict &&
          (items[i]->kind == PlainValue::Kind::kList || items[i]->kind == PlainValue::Kind::kDict))
        error(std::string("a dict key that is a ") + PlainValue::kind_name(items[i]->kind) + " (unhashable)");
    }
    container->items.insert(container->items.end(), items.begin(), items.end());
  }

  Node* make_container(PlainValue::Kind kind, std::vector<Node*> items, const char* opcode) {
    Node* node = make(kind);
    add_items(node, items, opcode);
    return node;
  }

  bool run_structure(unsigned char opcode);
  bool run_fill(unsigned char opcode);
  bool run_scalar(unsigned char opcode);
  bool run_memo(unsigned char opcode);
  void push_string(size_t length);
  void push_long(size_t length);
  struct Budget {
    int64_t values = kMaxValues;
    int64_t string_bytes = int64_t{64} << 20;
  };
  PlainValue convert(const Node* node, int depth, Budget& budget) const;

  const std::string& data_;
  const std::string source_;
  size_t position_ = 0, opcode_at_ = 0;
  std::vector<std::unique_ptr<Node>> arena_;
  std::vector<Node*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Node*> memo_;
};

bool PlainUnpickler::run_structure(unsigned char opcode) {
  using Kind = PlainValue::Kind;
  switch (opcode) {
    case '(':
      if (marks_.size() >= static_cast<size_t>(kMaxValues)) error("too many MARKs");
      marks_.push_back(stack_.size());
      return true;
    case '}':
      push(make(Kind::kDict));
      return true;
    case ']':
      push(make(Kind::kList));
      return true;
    case ')':
      push(make(Kind::kTuple));
      return true;
    case 'd':
      push(make_container(Kind::kDict, pop_to_mark(), "DICT"));
      return true;
    case 'l':
      push(make_container(Kind::kList, pop_to_mark(), "LIST"));
      return true;
    case 't':
      push(make_container(Kind::kTuple, pop_to_mark(), "TUPLE"));
      return true;
    case 0x85:
    case 0x86:
    case 0x87: {
      std::vector<Node*> items(opcode - 0x84);
      for (size_t i = items.size(); i-- > 0;) items[i] = pop();
      push(make_container(Kind::kTuple, items, "TUPLE1/2/3"));
      return true;
    }
    case '0':
      pop();
      return true;
    case '1':
      pop_to_mark();
      return true;
    case '2': {
      Node* node = pop();
      push(node);
      push(node);
      return true;
    }
  }
  return false;
}

// APPEND, APPENDS, SETITEM and SETITEMS: fill the list or dict below the new items.
bool PlainUnpickler::run_fill(unsigned char opcode) {
  using Kind = PlainValue::Kind;
  switch (opcode) {
    case 'a': {
      Node* item = pop();
      add_items(top(Kind::kList, "APPEND"), {item}, "APPEND");
      return true;
    }
    case 'e': {
      std::vector<Node*> items = pop_to_mark();
      add_items(top(Kind::kList, "APPENDS"), items, "APPENDS");
      return true;
    }
    case 's': {
      Node* value = pop();
      Node* key = pop();
      add_items(top(Kind::kDict, "SETITEM"), {key, value}, "SETITEM");
      return true;
    }
    case 'u': {
      std::vector<Node*> items = pop_to_mark();
      add_items(top(Kind::kDict, "SETITEMS"), items, "SETITEMS");
      return true;
    }
  }
  return false;
}

void PlainUnpickler::push_string(size_t length) {
  std::string text(take(length), length);
  if (!is_utf8(text)) error("a string that is not UTF-8");
  push(make(PlainValue::Kind::kString, PlainValue::string(std::move(text))));
}

// LONG1 and LONG4: a little-endian two's complement integer of `length` bytes, read when it fits 64 bits.
void PlainUnpickler::push_long(size_t length) {
  const auto* raw = reinterpret_cast<const unsigned char*>(take(length));
  if (length > 8) error("an integer of " + std::to_string(length) + " bytes, wider than 64 bits");
  uint64_t value = 0;
  for (size_t i = length; i-- > 0;) value = (value << 8) | raw[i];
  if (length > 0 && length < 8 && (raw[length - 1] & 0x80)) value |= ~uint64_t{0} << (8 * length);  // sign-extend
  push(make(PlainValue::Kind::kInt, PlainValue::integer(static_cast<int64_t>(value))));
}

bool PlainUnpickler::run_scalar(unsigned char opcode) {
  using Kind = PlainValue::Kind;
  switch (opcode) {
    case 'N':
      push(make(Kind::kNone));
      return true;
    case 0x88:
    case 0x89:
      push(make(Kind::kBool, PlainValue::boolean(opcode == 0x88)));
      return true;
    case 'K':
      push(make(Kind::kInt, PlainValue::integer(static_cast<int64_t>(take_little_endian(1)))));
      return true;
    case 'M':
      push(make(Kind::kInt, PlainValue::integer(static_cast<int64_t>(take_little_endian(2)))));
      return true;
    case 'J': {
      const auto value = static_cast<int32_t>(static_cast<uint32_t>(take_little_endian(4)));
      push(make(Kind::kInt, PlainValue::integer(value)));
      return true;
    }
    case 0x8a:
      push_long(take_little_endian(1));
      return true;
    case 0x8b:
      push_long(take_little_endian(4));
      return true;
    case 'G': {
      uint64_t bits = 0;
      for (const char *byte = take(8), *end = byte + 8; byte != end; ++byte)
        bits = (bits << 8) | static_cast<unsigned char>(*byte);
      double value;
      std::memcpy(&value, &bits, 8);
      push(make(Kind::kFloat, PlainValue::real(value)));
      return true;
    }
    case 0x8c:
      push_string(take_little_endian(1));
      return true;
    case 'X':
      push_string(take_little_endian(4));
      return true;
    case 0x8d:
      push_string(take_little_endian(8));
      return true;
  }
  return false;
}

bool PlainUnpickler::run_memo(unsigned char opcode) {
  switch (opcode) {
    case 0x80: {
      const uint64_t protocol = take_little_endian(1);
      if (protocol < 2 || protocol > 5) error("pickle protocol " + std::to_string(protocol) + " (read: 2 to 5)");
      return true;
    }
    case 0x95:
      take_little_endian(8);
      return true;  // FRAME: a length hint for buffered readers
    case 'q':
    case 'r':
    case 0x94: {
      if (stack_.empty()) error("memoizing with an empty stack");
      const uint64_t key = opcode == 'q' ? take_little_endian(1) : opcode == 'r' ? take_little_endian(4) : memo_.size();
      if (memo_.size() >= static_cast<size_t>(kMaxValues)) error("more than a million memo entries");
      memo_[key] = stack_.back();
      return true;
    }
    case 'h':
    case 'j': {
      const uint64_t key = take_little_endian(opcode == 'h' ? 1 : 4);
      const auto entry = memo_.find(key);
      if (entry == memo_.end()) error("memo entry " + std::to_string(key) + " was never stored");
      push(entry->second);
      return true;
    }
  }
  return false;
}

// The finished value, copied out of the arena: at most 64 levels deep (so a list that holds itself is refused),
// at most a million values and 64 MiB of strings in all, however often the memo repeats one. A key set twice
// keeps its last value, as in Python (keys are equal when their kind and value are).
PlainValue PlainUnpickler::convert(const Node* node, int depth, Budget& budget) const {
  if (depth > kMaxNesting) fail(source_, "values nested deeper than " + std::to_string(kMaxNesting) + " levels");
  if (--budget.values < 0) fail(source_, "more than a million values (counting each repetition through the memo)");
  if (node->kind == PlainValue::Kind::kString &&
      (budget.string_bytes -= static_cast<int64_t>(node->scalar.as_string().size())) < 0)
    fail(source_, "more than 64 MiB of strings (counting each repetition through the memo)");
  if (node->kind == PlainValue::Kind::kList || node->kind == PlainValue::Kind::kTuple) {
    std::vector<PlainValue> items;
    for (const Node* item : node->items) items.push_back(convert(item, depth + 1, budget));
    return node->kind == PlainValue::Kind::kList ? PlainValue::list(std::move(items))
                                                 : PlainValue::tuple(std::move(items));
  }
  if (node->kind != PlainValue::Kind::kDict) return node->scalar;
  std::vector<std::pair<PlainValue, PlainValue>> entries;
  std::unordered_map<std::string, size_t> index_of_key;  // keyed by the key's own pickle
  for (size_t i = 0; i + 1 < node->items.size(); i += 2) {
    PlainValue key = convert(node->items[i], depth + 1, budget);
    PlainValue value = convert(node->items[i + 1], depth + 1, budget);
    const auto [slot, added] = index_of_key.emplace(pickle_plain(key, source_), entries.size());
    if (added)
      entries.emplace_back(std::move(key), std::move(value));
    else
      entries[slot->second].second = std::move(value);
  }
  return PlainValue::dict(std::move(entries));
}

}  // namespace

PlainValue unpickle_plain(const std::string& bytes, const std::string& source) {
  return PlainUnpickler(bytes, source).run();
}

// ---- torch.save's zip archive ----

namespace {

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr uint16_t kDos1980 = (1 << 5) | 1;  // 1980-01-01, the earliest date a zip entry can carry

uint32_t crc_of(const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < size;) {  // crc32 takes a uInt length: feed it at most 1 GiB at a time
    const size_t piece = std::min<size_t>(size - done, size_t{1} << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data + done), static_cast<uInt>(piece));
    done += piece;
  }
  return static_cast<uint32_t>(crc);
}

struct ZipEntry {
  std::string name;
  std::string data;
};

// A stored (uncompressed) zip of `entries`: local headers, data, central directory, end record.
std::string stored_zip(const std::vector<ZipEntry>& entries) {
  std::string zip, directory;
  for (const ZipEntry& entry : entries) {
    const uint32_t crc = crc_of(entry.data.data(), entry.data.size());
    const uint64_t offset = zip.size();
    for (std::string* header : {&zip, &directory}) {
      const bool central = header == &directory;
      append_little_endian(*header, central ? kCentralHeader : kLocalHeader, 4);
      if (central) append_little_endian(*header, 20, 2);  // version made by: 2.0
      for (const uint64_t field : {20, 0, 0, 0, static_cast<int>(kDos1980)}) append_little_endian(*header, field, 2);
      for (const uint64_t field : {static_cast<uint64_t>(crc), entry.data.size(), entry.data.size()})
        append_little_endian(*header, field, 4);
      append_little_endian(*header, entry.name.size(), 2);
      append_little_endian(*header, 0, 2);  // no extra field
      if (central) {
        for (int field = 0; field < 3; ++field) append_little_endian(*header, 0, 2);  // comment, disk, attributes
        append_little_endian(*header, 0, 4);                                          // external attributes
        append_little_endian(*header, offset, 4);
      }
      *header += entry.name;
    }
    zip += entry.data;
  }
  const uint64_t directory_offset = zip.size();
  zip += directory;
  append_little_endian(zip, kEndOfDirectory, 4);
  for (const uint64_t field : {0, 0, static_cast<int>(entries.size()), static_cast<int>(entries.size())})
    append_little_endian(zip, field, 2);
  append_little_endian(zip, directory.size(), 4);
  append_little_endian(zip, directory_offset, 4);
  append_little_endian(zip, 0, 2);  // no comment
  return zip;
}

uint64_t little_endian_at(const std::string& bytes, size_t offset, int size, const std::string& path) {
  if (offset > bytes.size() || static_cast<size_t>(size) > bytes.size() - offset)
    fail(path, "truncated zip archive (a header runs past the end of the file)");
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[offset + i]);
  return value;
}

struct Directory {
  uint64_t entries = 0, size = 0, offset = 0;
};

// The central directory's place, from the end record (or the zip64 end record torch writes beside it).
Directory find_directory(const std::string& zip, const std::string& path) {
  if (zip.size() < 22) fail(path, "not a zip archive (" + std::to_string(zip.size()) + " bytes; truncated?)");
  size_t end = zip.size() - 22;
  const size_t lowest = zip.size() > 22 + 65535 ? zip.size() - 22 - 65535 : 0;
  while (little_endian_at(zip, end, 4, path) != kEndOfDirectory) {
    if (end == lowest) fail(path, "not a zip archive: no end-of-central-directory record (truncated?)");
    --end;
  }
  Directory directory{little_endian_at(zip, end + 10, 2, path), little_endian_at(zip, end + 12, 4, path),
                      little_endian_at(zip, end + 16, 4, path)};
  const bool zip64 = directory.entries == 0xffff || directory.size == 0xffffffff || directory.offset == 0xffffffff;
  if (zip64) {
    if (end < 20 || little_endian_at(zip, end - 20, 4, path) != kZip64Locator) fail(path, "zip64 locator missing");
    const uint64_t record = little_endian_at(zip, end - 20 + 8, 8, path);
    if (little_endian_at(zip, record, 4, path) != kZip64End) fail(path, "zip64 end record missing");
    directory = {little_endian_at(zip, record + 32, 8, path), little_endian_at(zip, record + 40, 8, path),
                 little_endian_at(zip, record + 48, 8, path)};
  }
  if (directory.offset > end || directory.size > end - directory.offset)
    fail(path, "its central directory lies outside the archive (truncated?)");
  if (directory.entries > 10000) fail(path, "more than 10,000 zip entries; not a torch.save file of plain values");
  return directory;
}

// Sizes and offset of a central entry, widened by its zip64 extra field where they are 0xffffffff.
void widen_zip64(const std::string& zip, size_t extra, size_t extra_end, uint64_t& stored, uint64_t& size,
                 uint64_t& offset, const std::string& path) {
  while (extra + 4 <= extra_end) {
    const uint64_t id = little_endian_at(zip, extra, 2, path), length = little_endian_at(zip, extra + 2, 2, path);
    size_t field = extra + 4;
    if (id == 1) {
      for (uint64_t* value : {&size, &stored, &offset}) {
        if (*value != 0xffffffff) continue;
        if (field + 8 > extra + 4 + length) fail(path, "a zip64 extra field too short for its sizes");
        *value = little_endian_at(zip, field, 8, path);
        field += 8;
      }
    }
    extra += 4 + length;
  }
}

ZipEntry read_entry(const std::string& zip, size_t& central, uint64_t limit, const std::string& path) {
  if (little_endian_at(zip, central, 4, path) != kCentralHeader) fail(path, "a damaged zip central directory");
  const uint64_t flags = little_endian_at(zip, central + 8, 2, path),
                 method = little_endian_at(zip, central + 10, 2, path);
  const uint32_t crc = static_cast<uint32_t>(little_endian_at(zip, central + 16, 4, path));
  uint64_t stored = little_endian_at(zip, central + 20, 4, path), size = little_endian_at(zip, central + 24, 4, path);
  const uint64_t name_length = little_endian_at(zip, central + 28, 2, path);
  const uint64_t extra_length = little_endian_at(zip, central + 30, 2, path);
  const uint64_t comment_length = little_endian_at(zip, central + 32, 2, path);
  uint64_t offset = little_endian_at(zip, central + 42, 4, path);
  ZipEntry entry{zip.substr(central + 46, name_length), {}};
  if (central + 46 + name_length + extra_length > zip.size()) fail(path, "a damaged zip central directory");
  widen_zip64(zip, central + 46 + name_length, central + 46 + name_length + extra_length, stored, size, offset, path);
  central += 46 + name_length + extra_length + comment_length;
  const std::string where = path + ": zip entry " + entry.name;
  if (flags & 1) fail(where, "is encrypted");
  if (method != 0) fail(where, "is compressed (method " + std::to_string(method) + "); torch.save stores entries");
  if (stored != size) fail(where, "stored size differs from its size");
  if (little_endian_at(zip, offset, 4, path) != kLocalHeader) fail(where, "has no local header");
  const uint64_t data =
      offset + 30 + little_endian_at(zip, offset + 26, 2, path) + little_endian_at(zip, offset + 28, 2, path);
  if (data > limit || size > limit - data) fail(where, "runs past the central directory (truncated?)");
  entry.data = zip.substr(data, size);
  if (crc_of(entry.data.data(), entry.data.size()) != crc) fail(where, "fails its CRC-32 check (damaged)");
  return entry;
}

std::vector<ZipEntry> read_zip(const std::string& zip, const std::string& path) {
  const Directory directory = find_directory(zip, path);
  std::vector<ZipEntry> entries;
  size_t central = directory.offset;
  for (uint64_t i = 0; i < directory.entries; ++i) entries.push_back(read_entry(zip, central, directory.offset, path));
  return entries;
}

// The data.pkl of a torch.save archive: every entry under one `<archive>/` folder, a version torch reads.
const std::string& torch_pickle_entry(const std::vector<ZipEntry>& entries, const std::string& path) {
  const ZipEntry* pickle = nullptr;
  for (const ZipEntry& entry : entries) {
    const size_t slash = entry.name.find('/');
    if (slash != std::string::npos && entry.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (pickle) fail(path, "two data.pkl entries: " + pickle->name + " and " + entry.name);
      pickle = &entry;
    }
  }
  if (!pickle) fail(path, "no <archive>/data.pkl entry: not a torch.save file");
  const std::string archive = pickle->name.substr(0, pickle->name.size() - std::strlen("data.pkl"));
  const ZipEntry* version = nullptr;
  for (const ZipEntry& entry : entries) {
    if (entry.name.compare(0, archive.size(), archive) != 0)
      fail(path, "entry " + entry.name + " is outside " + archive);
    if (entry.name == archive + "version" || entry.name == archive + ".data/version") version = &entry;
  }
  if (!version) fail(path, "no " + archive + "version entry: not a torch.save file");
  const std::string number = version->data.substr(0, version->data.find_first_of("\r\n"));
  if (number.empty() || number.size() > 2 || number.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(number) < 1 || std::stoi(number) > 10)
    fail(path, "torch file format version \"" + number.substr(0, 20) + "\" (read: 1 to 10)");
  return pickle->data;
}

}  // namespace

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
  const std::vector<ZipEntry> entries = read_zip(bytes, path);
  return unpickle_plain(torch_pickle_entry(entries, path), path + ": data.pkl");
}

}  // namespace trainbench
