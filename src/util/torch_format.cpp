#include "util/torch_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include <zlib.h>

#include "util/error.h"

namespace trainbench {

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as Python decodes pickled str.
bool is_utf8(std::string_view text) {
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

void append_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t crc_of(const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < size;) {  // crc32 takes a uInt length: feed it at most 1 GiB at a time
    const size_t piece = std::min<size_t>(size - done, size_t{1} << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data + done), static_cast<uInt>(piece));
    done += piece;
  }
  return static_cast<uint32_t>(crc);
}

namespace {

constexpr int kMaxNesting = 64;

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

}  // namespace

std::string PickleNode::description() const {
  if (!global.empty()) return "global " + global;
  if (object >= 0) return "torch object";
  return PlainValue::kind_name(kind);
}

PickleMachine::PickleMachine(std::string_view bytes, size_t start, std::string source, PickleObjects* objects)
    : data_(bytes), source_(std::move(source)), objects_(objects), position_(start), opcode_at_(start) {}

PickleNode* PickleMachine::run() {
  while (true) {
    opcode_at_ = position_;
    const auto opcode = static_cast<unsigned char>(*take(1));
    if (opcode == '.') break;
    if (!run_structure(opcode) && !run_fill(opcode) && !run_scalar(opcode) && !run_memo(opcode) && !run_objects(opcode))
      refuse(opcode);
  }
  if (stack_.size() != 1 || !marks_.empty())
    error("STOP with " + std::to_string(stack_.size()) + " values on the stack");
  return stack_.back();
}

PlainValue PickleMachine::plain(const PickleNode& node) const {
  Budget budget;
  return convert(node, 0, budget);
}

void PickleMachine::error(const std::string& what) const {
  fail(source_, "pickle offset " + std::to_string(opcode_at_) + ": " + what);
}

void PickleMachine::refuse(unsigned char opcode) const {
  const auto name = kOpcodeNames.find(opcode);
  char hex[8];
  std::snprintf(hex, sizeof(hex), "0x%02x", opcode);
  if (name == kOpcodeNames.end()) error(std::string("unknown pickle opcode ") + hex);
  error(std::string("opcode ") + name->second + " (" + hex + ") is not read here: only None, bool, int, float, str, " +
        "list, tuple and dict are" + (objects_ ? ", with the globals this reader allows" : ""));
}

const char* PickleMachine::take(size_t count) {
  if (count > data_.size() - position_) error("the pickle ends early (truncated)");
  const char* bytes = data_.data() + position_;
  position_ += count;
  return bytes;
}

uint64_t PickleMachine::take_little_endian(int bytes) {
  const auto* raw = reinterpret_cast<const unsigned char*>(take(static_cast<size_t>(bytes)));
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | raw[i];
  return value;
}

PickleNode* PickleMachine::make(PlainValue::Kind kind, PlainValue scalar) {
  if (static_cast<int64_t>(arena_.size()) >= kMaxPickleValues) error("more than a million values");
  arena_.push_back(std::make_unique<PickleNode>());
  arena_.back()->kind = kind;
  arena_.back()->scalar = std::move(scalar);
  return arena_.back().get();
}

PickleNode* PickleMachine::make_global(std::string name) {
  PickleNode* node = make(PlainValue::Kind::kNone);
  node->global = std::move(name);
  return node;
}

PickleNode* PickleMachine::make_object(int64_t object) {
  PickleNode* node = make(PlainValue::Kind::kNone);
  node->object = object;
  return node;
}

void PickleMachine::push(PickleNode* node) {
  if (static_cast<int64_t>(stack_.size()) >= kMaxPickleValues) error("more than a million values on the stack");
  stack_.push_back(node);
}

PickleNode* PickleMachine::pop() {
  if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) error("the stack is empty");
  PickleNode* node = stack_.back();
  stack_.pop_back();
  return node;
}

// The values pushed since the last MARK, which is removed.
std::vector<PickleNode*> PickleMachine::pop_to_mark() {
  if (marks_.empty()) error("no MARK to pop to");
  std::vector<PickleNode*> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
  stack_.resize(marks_.back());
  marks_.pop_back();
  return items;
}

PickleNode* PickleMachine::top(PlainValue::Kind kind, const char* opcode) {
  if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) error(std::string(opcode) + " on an empty stack");
  PickleNode* node = stack_.back();
  if (!node->is_plain() || node->kind != kind)
    error(std::string(opcode) + " on a " + node->description() + ", not a " + PlainValue::kind_name(kind));
  return node;
}

void PickleMachine::add_items(PickleNode* container, const std::vector<PickleNode*>& items, const char* opcode) {
  const bool dict = container->kind == PlainValue::Kind::kDict;
  if (dict && items.size() % 2 != 0) error(std::string(opcode) + " with a key and no value");
  for (size_t i = 0; dict && i < items.size(); i += 2) {
    if (!items[i]->is_plain() || items[i]->kind == PlainValue::Kind::kList || items[i]->kind == PlainValue::Kind::kDict)
      error("a dict key that is a " + items[i]->description() + " (unhashable, or not a plain value)");
  }
  container->items.insert(container->items.end(), items.begin(), items.end());
}

PickleNode* PickleMachine::make_container(PlainValue::Kind kind, std::vector<PickleNode*> items, const char* opcode) {
  PickleNode* node = make(kind);
  add_items(node, items, opcode);
  return node;
}

bool PickleMachine::run_structure(unsigned char opcode) {
  using Kind = PlainValue::Kind;
  switch (opcode) {
    case '(':
      if (marks_.size() >= static_cast<size_t>(kMaxPickleValues)) error("too many MARKs");
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
      std::vector<PickleNode*> items(opcode - 0x84);
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
      PickleNode* node = pop();
      push(node);
      push(node);
      return true;
    }
  }
  return false;
}

// APPEND, APPENDS, SETITEM and SETITEMS: fill the list or dict below the new items.
bool PickleMachine::run_fill(unsigned char opcode) {
  using Kind = PlainValue::Kind;
  switch (opcode) {
    case 'a': {
      PickleNode* item = pop();
      add_items(top(Kind::kList, "APPEND"), {item}, "APPEND");
      return true;
    }
    case 'e': {
      std::vector<PickleNode*> items = pop_to_mark();
      add_items(top(Kind::kList, "APPENDS"), items, "APPENDS");
      return true;
    }
    case 's': {
      PickleNode* value = pop();
      PickleNode* key = pop();
      add_items(top(Kind::kDict, "SETITEM"), {key, value}, "SETITEM");
      return true;
    }
    case 'u': {
      std::vector<PickleNode*> items = pop_to_mark();
      add_items(top(Kind::kDict, "SETITEMS"), items, "SETITEMS");
      return true;
    }
  }
  return false;
}

void PickleMachine::push_string(size_t length) {
  std::string text(take(length), length);
  if (!is_utf8(text)) error("a string that is not UTF-8");
  push(make(PlainValue::Kind::kString, PlainValue::string(std::move(text))));
}

// LONG1 and LONG4: a little-endian two's complement integer of `length` bytes, read when it fits 64 bits.
void PickleMachine::push_long(size_t length) {
  const auto* raw = reinterpret_cast<const unsigned char*>(take(length));
  if (length > 8) error("an integer of " + std::to_string(length) + " bytes, wider than 64 bits");
  uint64_t value = 0;
  for (size_t i = length; i-- > 0;) value = (value << 8) | raw[i];
  if (length > 0 && length < 8 && (raw[length - 1] & 0x80)) value |= ~uint64_t{0} << (8 * length);  // sign-extend
  push(make(PlainValue::Kind::kInt, PlainValue::integer(static_cast<int64_t>(value))));
}

bool PickleMachine::run_scalar(unsigned char opcode) {
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

bool PickleMachine::run_memo(unsigned char opcode) {
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
      if (memo_.size() >= static_cast<size_t>(kMaxPickleValues)) error("more than a million memo entries");
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

// GLOBAL, STACK_GLOBAL, REDUCE, BUILD and BINPERSID, each handed to the reader's objects.
bool PickleMachine::run_objects(unsigned char opcode) {
  if (!objects_ || (opcode != 'c' && opcode != 0x93 && opcode != 'R' && opcode != 'b' && opcode != 'Q')) return false;
  switch (opcode) {
    case 'c': {  // GLOBAL: "module\nname\n"
      std::string lines[2];
      for (std::string& line : lines) {
        while (true) {
          const char next = *take(1);
          if (next == '\n') break;
          if (line.size() >= 256) error("a GLOBAL name longer than 256 bytes");
          line.push_back(next);
        }
      }
      push(objects_->global(*this, lines[0], lines[1]));
      return true;
    }
    case 0x93: {  // STACK_GLOBAL
      PickleNode* name = pop();
      PickleNode* module = pop();
      if (!module->is_plain() || module->kind != PlainValue::Kind::kString || !name->is_plain() ||
          name->kind != PlainValue::Kind::kString)
        error("STACK_GLOBAL of a " + module->description() + " and a " + name->description() + ", not two str");
      push(objects_->global(*this, module->scalar.as_string(), name->scalar.as_string()));
      return true;
    }
    case 'R': {
      PickleNode* args = pop();
      PickleNode* callable = pop();
      if (callable->global.empty()) error("REDUCE calls a " + callable->description() + ", not a global");
      if (!args->is_plain() || args->kind != PlainValue::Kind::kTuple)
        error("REDUCE with arguments in a " + args->description() + ", not a tuple");
      push(objects_->call(*this, *callable, *args));
      return true;
    }
    case 'b': {
      PickleNode* state = pop();
      if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) error("BUILD on an empty stack");
      objects_->build(*this, *stack_.back(), *state);
      return true;
    }
  }
  PickleNode* id = pop();  // BINPERSID
  push(objects_->persistent_load(*this, *id));
  return true;
}

// The finished value, copied out of the arena (see plain()). Keys are equal when their kind and value are.
PlainValue PickleMachine::convert(const PickleNode& node, int depth, Budget& budget) const {
  if (depth > kMaxNesting) fail(source_, "values nested deeper than " + std::to_string(kMaxNesting) + " levels");
  if (--budget.values < 0) fail(source_, "more than a million values (counting each repetition through the memo)");
  if (!node.is_plain()) fail(source_, "a " + node.description() + " where a plain value belongs");
  if (node.kind == PlainValue::Kind::kString &&
      (budget.string_bytes -= static_cast<int64_t>(node.scalar.as_string().size())) < 0)
    fail(source_, "more than 64 MiB of strings (counting each repetition through the memo)");
  if (node.kind == PlainValue::Kind::kList || node.kind == PlainValue::Kind::kTuple) {
    std::vector<PlainValue> items;
    for (const PickleNode* item : node.items) items.push_back(convert(*item, depth + 1, budget));
    return node.kind == PlainValue::Kind::kList ? PlainValue::list(std::move(items))
                                                : PlainValue::tuple(std::move(items));
  }
  if (node.kind != PlainValue::Kind::kDict) return node.scalar;
  std::vector<std::pair<PlainValue, PlainValue>> entries;
  std::unordered_map<std::string, size_t> index_of_key;  // keyed by the key's own pickle
  for (size_t i = 0; i + 1 < node.items.size(); i += 2) {
    PlainValue key = convert(*node.items[i], depth + 1, budget);
    PlainValue value = convert(*node.items[i + 1], depth + 1, budget);
    const auto [slot, added] = index_of_key.emplace(pickle_plain(key, source_), entries.size());
    if (added)
      entries.emplace_back(std::move(key), std::move(value));
    else
      entries[slot->second].second = std::move(value);
  }
  return PlainValue::dict(std::move(entries));
}

// ---- torch.save's zip archive ----

namespace {

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr uint16_t kDos1980 = (1 << 5) | 1;  // 1980-01-01, the earliest date a zip entry can carry
uint64_t little_endian_at(std::string_view bytes, size_t offset, int size, const std::string& path) {
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
Directory find_directory(std::string_view zip, const std::string& path) {
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
  return directory;
}

// Sizes and offset of a central entry, widened by its zip64 extra field where they are 0xffffffff.
void widen_zip64(std::string_view zip, size_t extra, size_t extra_end, uint64_t& stored, uint64_t& size,
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

struct ZipEntry {
  std::string name;
  std::string_view data;
};

ZipEntry read_entry(std::string_view zip, size_t& central, uint64_t limit, const std::string& path) {
  if (little_endian_at(zip, central, 4, path) != kCentralHeader) fail(path, "a damaged zip central directory");
  const uint64_t flags = little_endian_at(zip, central + 8, 2, path),
                 method = little_endian_at(zip, central + 10, 2, path);
  const uint32_t crc = static_cast<uint32_t>(little_endian_at(zip, central + 16, 4, path));
  uint64_t stored = little_endian_at(zip, central + 20, 4, path), size = little_endian_at(zip, central + 24, 4, path);
  const uint64_t name_length = little_endian_at(zip, central + 28, 2, path);
  const uint64_t extra_length = little_endian_at(zip, central + 30, 2, path);
  const uint64_t comment_length = little_endian_at(zip, central + 32, 2, path);
  uint64_t offset = little_endian_at(zip, central + 42, 4, path);
  if (central + 46 + name_length + extra_length > zip.size()) fail(path, "a damaged zip central directory");
  ZipEntry entry{std::string(zip.substr(central + 46, name_length)), {}};
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

std::vector<ZipEntry> read_zip(std::string_view zip, const std::string& path, uint64_t max_entries) {
  const Directory directory = find_directory(zip, path);
  if (directory.entries > max_entries)
    fail(path,
         "more than " + std::to_string(max_entries) + " zip entries, more than a torch.save file of this kind has");
  std::vector<ZipEntry> entries;
  size_t central = directory.offset;
  for (uint64_t i = 0; i < directory.entries; ++i) entries.push_back(read_entry(zip, central, directory.offset, path));
  return entries;
}

}  // namespace

// A stored (uncompressed) zip of `entries`: local headers, data, central directory, end record.
std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string zip, directory;
  for (const auto& [name, data] : entries) {
    const uint32_t crc = crc_of(data.data(), data.size());
    const uint64_t offset = zip.size();
    for (std::string* header : {&zip, &directory}) {
      const bool central = header == &directory;
      append_little_endian(*header, central ? kCentralHeader : kLocalHeader, 4);
      if (central) append_little_endian(*header, 20, 2);  // version made by: 2.0
      for (const uint64_t field : {20, 0, 0, 0, static_cast<int>(kDos1980)}) append_little_endian(*header, field, 2);
      for (const uint64_t field : {static_cast<uint64_t>(crc), data.size(), data.size()})
        append_little_endian(*header, field, 4);
      append_little_endian(*header, name.size(), 2);
      append_little_endian(*header, 0, 2);  // no extra field
      if (central) {
        for (int field = 0; field < 3; ++field) append_little_endian(*header, 0, 2);  // comment, disk, attributes
        append_little_endian(*header, 0, 4);                                          // external attributes
        append_little_endian(*header, offset, 4);
      }
      *header += name;
    }
    zip += data;
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

TorchArchive read_torch_archive(std::string_view zip, const std::string& path, uint64_t max_entries) {
  const std::vector<ZipEntry> entries = read_zip(zip, path, max_entries);
  const ZipEntry* pickle = nullptr;
  for (const ZipEntry& entry : entries) {
    const size_t slash = entry.name.find('/');
    if (slash != std::string::npos && entry.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (pickle) fail(path, "two data.pkl entries: " + pickle->name + " and " + entry.name);
      pickle = &entry;
    }
  }
  if (!pickle) fail(path, "no <archive>/data.pkl entry: not a torch.save file");
  TorchArchive archive{pickle->name.substr(0, pickle->name.size() - std::strlen("data.pkl")), pickle->data, {}};
  for (const ZipEntry& entry : entries) {
    if (entry.name.compare(0, archive.prefix.size(), archive.prefix) != 0)
      fail(path, "entry " + entry.name + " is outside " + archive.prefix);
    if (!archive.entries.emplace(entry.name, entry.data).second) fail(path, "two entries named " + entry.name);
  }
  auto version = archive.entries.find(archive.prefix + "version");
  if (version == archive.entries.end()) version = archive.entries.find(archive.prefix + ".data/version");
  if (version == archive.entries.end()) fail(path, "no " + archive.prefix + "version entry: not a torch.save file");
  const std::string number(version->second.substr(0, version->second.find_first_of("\r\n")));
  if (number.empty() || number.size() > 2 || number.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(number) < 1 || std::stoi(number) > 10)
    fail(path, "torch file format version \"" + number.substr(0, 20) + "\" (read: 1 to 10)");
  return archive;
}

}  // namespace trainbench
