#include "util/numpy_pickle.h"

#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <numeric>
#include <unordered_map>

#include "util/error.h"

namespace trainbench {

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "numpy pickle reading assumes a little-endian machine");

// Far more values than a ResNet weights pickle holds (R-50.pkl: some 320 arrays of about 20 values each), so no
// run of one-byte opcodes can make the machine hold more than a few hundred megabytes of values, stack or memo.
constexpr size_t kMaxValues = size_t{1} << 20;

enum class Kind { kNone, kBool, kInt, kBytes, kText, kTuple, kList, kDict, kGlobal, kDtype, kArray };

// The globals a numpy array pickle calls; every other one is refused.
enum class Callable { kReconstruct, kNdarray, kDtype, kEncode, kBytes, kOrderedDict };

const std::pair<const char*, Callable> kAllowedGlobals[] = {
    {"numpy.core.multiarray._reconstruct", Callable::kReconstruct},
    {"numpy._core.multiarray._reconstruct", Callable::kReconstruct},  // numpy 2's module name
    {"numpy.ndarray", Callable::kNdarray},
    {"numpy.dtype", Callable::kDtype},
    {"_codecs.encode", Callable::kEncode},
    {"__builtin__.bytes", Callable::kBytes},  // Python 3 writes builtins as __builtin__ for protocols below 3
    {"builtins.bytes", Callable::kBytes},
    {"collections.OrderedDict", Callable::kOrderedDict},
};

// Values live in the machine's arena and refer to each other by plain pointers: a memo can make a list hold itself,
// which shared ownership would leak and recursive destruction would follow forever.
struct Value {
  Kind kind = Kind::kNone;
  int64_t integer = 0;        // kInt, kBool; kGlobal: its Callable
  std::string text;           // kBytes; kText as UTF-8; kGlobal "module.name"; kDtype its name ("f4")
  std::vector<Value*> items;  // kTuple, kList; kDict: key, value, key, value, ...
  char byte_order = 0;        // kDtype, from its BUILD state
  bool built = false;         // kArray: its BUILD state was applied
  PickledArray array;         // kArray
};

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kBytes: return "bytes";
    case Kind::kText: return "str";
    case Kind::kTuple: return "tuple";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kGlobal: return "global";
    case Kind::kDtype: return "numpy dtype";
    case Kind::kArray: return "numpy array";
  }
  return "value";
}

bool is_string(const Value* value) { return value->kind == Kind::kText || value->kind == Kind::kBytes; }

class PickleMachine {
 public:
  PickleMachine(std::string path, std::string bytes) : path_(std::move(path)), data_(std::move(bytes)) {}

  // Runs the opcodes up to STOP and returns the value it returns.
  const Value* run() {
    while (true) {
      opcode_at_ = position_;
      const auto opcode = static_cast<unsigned char>(*take(1));
      switch (opcode) {
        case 0x80: {  // PROTO
          const int protocol = static_cast<unsigned char>(*take(1));
          if (protocol < 2 || protocol > 4)
            refuse("pickle protocol " + std::to_string(protocol) + " (expected 2 to 4: Python 2's protocol 2 or "
                   "Python 3's pickle.dump(..., protocol=2..4))");
          break;
        }
        case 0x95: take(8); break;  // FRAME: a length hint; the framed opcodes follow inline
        case '.': return pop();     // STOP
        case '(': marks_.push_back(stack_.size()); break;
        case 'N': push(make(Kind::kNone)); break;
        case 0x88: push(boolean(true)); break;   // NEWTRUE
        case 0x89: push(boolean(false)); break;  // NEWFALSE
        case 'K': push(integer(static_cast<int64_t>(little_endian(1)))); break;  // BININT1
        case 'M': push(integer(static_cast<int64_t>(little_endian(2)))); break;  // BININT2
        case 'J': push(integer(static_cast<int32_t>(little_endian(4)))); break;  // BININT
        case 0x8a: push(integer(long1())); break;                                  // LONG1
        case 'U': push(string(Kind::kBytes, little_endian(1))); break;           // SHORT_BINSTRING
        case 'T': push(string(Kind::kBytes, binstring_length())); break;         // BINSTRING
        case 'C': push(string(Kind::kBytes, little_endian(1))); break;           // SHORT_BINBYTES
        case 'B': push(string(Kind::kBytes, little_endian(4))); break;           // BINBYTES
        case 0x8e: push(string(Kind::kBytes, little_endian(8))); break;          // BINBYTES8
        case 0x8c: push(string(Kind::kText, little_endian(1))); break;           // SHORT_BINUNICODE
        case 'X': push(string(Kind::kText, little_endian(4))); break;            // BINUNICODE
        case 0x8d: push(string(Kind::kText, little_endian(8))); break;           // BINUNICODE8
        case ')': push(make(Kind::kTuple)); break;                               // EMPTY_TUPLE
        case 0x85: push(tuple(1)); break;                                        // TUPLE1
        case 0x86: push(tuple(2)); break;                                        // TUPLE2
        case 0x87: push(tuple(3)); break;                                        // TUPLE3
        case 't': push(container(Kind::kTuple, pop_to_mark())); break;           // TUPLE
        case ']': push(make(Kind::kList)); break;                                // EMPTY_LIST
        case 'l': push(container(Kind::kList, pop_to_mark())); break;            // LIST
        case 'a': append({pop()}); break;                                        // APPEND
        case 'e': append(pop_to_mark()); break;                                  // APPENDS
        case '}': push(make(Kind::kDict)); break;                                // EMPTY_DICT
        case 'd': push(dict(pop_to_mark())); break;                              // DICT
        case 's': {                                                              // SETITEM
          Value* value = pop();
          Value* key = pop();
          set_items({key, value});
          break;
        }
        case 'u': set_items(pop_to_mark()); break;  // SETITEMS
        case 'q': memoize(static_cast<uint32_t>(little_endian(1))); break;  // BINPUT
        case 'r': memoize(static_cast<uint32_t>(little_endian(4))); break;  // LONG_BINPUT
        case 0x94: memoize(static_cast<uint32_t>(memo_.size())); break;     // MEMOIZE
        case 'h': recall(static_cast<uint32_t>(little_endian(1))); break;   // BINGET
        case 'j': recall(static_cast<uint32_t>(little_endian(4))); break;   // LONG_BINGET
        case 'c': {                                                          // GLOBAL
          const std::string module = line();
          push(global(module, line()));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const Value* name = pop();
          const Value* module = pop();
          if (module->kind != Kind::kText || name->kind != Kind::kText)
            refuse("STACK_GLOBAL of a " + std::string(kind_name(module->kind)) + " and a " + kind_name(name->kind) +
                   " (expected two str)");
          push(global(module->text, name->text));
          break;
        }
        case 'R': {  // REDUCE
          const Value* arguments = pop();
          const Value* callable = pop();
          push(reduce(callable, arguments));
          break;
        }
        case 'b': {  // BUILD
          const Value* state = pop();
          build(top(), state);
          break;
        }
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", opcode);
          refuse("opcode " + std::string(hex) + " is not one this reader runs (the binary opcodes of protocols 2 to 4 "
                 "that pickles of numpy arrays use)");
        }
      }
    }
  }

 private:
  [[noreturn]] void refuse(const std::string& what) const {
    fail(path_, "not a pickle of numpy arrays: at byte " + std::to_string(opcode_at_) + ", " + what);
  }

  // The next `count` bytes, checked against the file before anything is allocated for them.
  const char* take(uint64_t count) {
    if (count > data_.size() - position_)
      fail(path_, "truncated pickle: the opcode at byte " + std::to_string(opcode_at_) + " needs " +
                      std::to_string(count) + " more bytes, the file has " + std::to_string(data_.size() - position_));
    const char* bytes = data_.data() + position_;
    position_ += static_cast<size_t>(count);
    return bytes;
  }

  uint64_t little_endian(int bytes) {
    const auto* raw = reinterpret_cast<const unsigned char*>(take(static_cast<uint64_t>(bytes)));
    uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | raw[i];
    return value;
  }

  int64_t long1() {
    const auto bytes = static_cast<int>(little_endian(1));
    if (bytes > 8) refuse("an integer of " + std::to_string(bytes) + " bytes (an array pickle's fit in 8)");
    if (bytes == 0) return 0;
    uint64_t value = little_endian(bytes);
    if (bytes < 8 && (value >> (8 * bytes - 1)) != 0) value |= ~uint64_t{0} << (8 * bytes);  // two's complement
    return static_cast<int64_t>(value);
  }

  uint64_t binstring_length() {
    const auto length = static_cast<int32_t>(little_endian(4));
    if (length < 0) refuse("BINSTRING of negative length " + std::to_string(length));
    return static_cast<uint64_t>(length);
  }

  // GLOBAL's module or name: text up to a newline.
  std::string line() {
    const size_t end = data_.find('\n', position_);
    if (end == std::string::npos)
      fail(path_, "truncated pickle: the GLOBAL at byte " + std::to_string(opcode_at_) + " has no newline");
    std::string text = data_.substr(position_, end - position_);
    position_ = end + 1;
    return text;
  }

  Value* make(Kind kind) {
    if (values_.size() >= kMaxValues)
      refuse("more than " + std::to_string(kMaxValues) + " values, far more than a weights pickle holds");
    values_.push_back(std::make_unique<Value>());
    values_.back()->kind = kind;
    return values_.back().get();
  }

  Value* boolean(bool value) {
    Value* made = make(Kind::kBool);
    made->integer = value;
    return made;
  }

  Value* integer(int64_t value) {
    Value* made = make(Kind::kInt);
    made->integer = value;
    return made;
  }

  Value* string(Kind kind, uint64_t length) {
    const char* bytes = take(length);
    Value* made = make(kind);
    made->text.assign(bytes, static_cast<size_t>(length));
    return made;
  }

  Value* container(Kind kind, std::vector<Value*> items) {
    Value* made = make(kind);
    made->items = std::move(items);
    return made;
  }

  Value* tuple(size_t size) {
    std::vector<Value*> items(size);
    for (size_t i = size; i > 0; --i) items[i - 1] = pop();
    return container(Kind::kTuple, std::move(items));
  }

  Value* dict(std::vector<Value*> items) {
    if (items.size() % 2 != 0) refuse("DICT of an odd number of keys and values");
    return container(Kind::kDict, std::move(items));
  }

  void push(Value* value) {
    if (stack_.size() >= kMaxValues) refuse("a stack deeper than " + std::to_string(kMaxValues) + " values");
    stack_.push_back(value);
  }

  // The stack's bottom for the opcodes after the innermost MARK: they may not reach below it.
  size_t stack_base() const { return marks_.empty() ? 0 : marks_.back(); }

  Value* pop() {
    if (stack_.size() <= stack_base()) refuse("an opcode takes a value from an empty stack");
    Value* value = stack_.back();
    stack_.pop_back();
    return value;
  }

  Value* top() {
    if (stack_.size() <= stack_base()) refuse("an opcode needs a value on an empty stack");
    return stack_.back();
  }

  std::vector<Value*> pop_to_mark() {
    if (marks_.empty()) refuse("an opcode needs a MARK that is not there");
    std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  void append(const std::vector<Value*>& items) {
    Value* list = top();
    if (list->kind != Kind::kList) refuse("APPEND to a " + std::string(kind_name(list->kind)) + " (expected a list)");
    list->items.insert(list->items.end(), items.begin(), items.end());
  }

  void set_items(const std::vector<Value*>& items) {
    Value* target = top();
    if (target->kind != Kind::kDict) refuse("SETITEM on a " + std::string(kind_name(target->kind)) + " (expected a dict)");
    if (items.size() % 2 != 0) refuse("SETITEMS of an odd number of keys and values");
    target->items.insert(target->items.end(), items.begin(), items.end());
  }

  void memoize(uint32_t index) {
    if (memo_.size() >= kMaxValues && !memo_.count(index))
      refuse("a memo of more than " + std::to_string(kMaxValues) + " values");
    memo_[index] = top();
  }

  void recall(uint32_t index) {
    const auto found = memo_.find(index);
    if (found == memo_.end()) refuse("memo entry " + std::to_string(index) + " is read before it is written");
    push(found->second);
  }

  Value* global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    for (const auto& [allowed, callable] : kAllowedGlobals)
      if (full == allowed) {
        Value* made = make(Kind::kGlobal);
        made->integer = static_cast<int64_t>(callable);
        made->text = full;
        return made;
      }
    std::string expected;
    for (const auto& [allowed, callable] : kAllowedGlobals) expected += (expected.empty() ? "" : ", ") + std::string(allowed);
    refuse("the global " + full.substr(0, 200) + " is not one that rebuilds a numpy array (" + expected + ")");
  }

  const Value& argument(const Value* arguments, size_t index, const std::string& callable) const {
    if (index >= arguments->items.size())
      refuse(callable + " called with " + std::to_string(arguments->items.size()) + " arguments");
    return *arguments->items[index];
  }

  Value* reduce(const Value* callable, const Value* arguments) {
    if (callable->kind != Kind::kGlobal) refuse("REDUCE calls a " + std::string(kind_name(callable->kind)));
    if (arguments->kind != Kind::kTuple) refuse("REDUCE's arguments are a " + std::string(kind_name(arguments->kind)));
    const std::string& name = callable->text;
    switch (static_cast<Callable>(callable->integer)) {
      case Callable::kReconstruct: {
        const Value& type = argument(arguments, 0, name);
        if (type.kind != Kind::kGlobal || static_cast<Callable>(type.integer) != Callable::kNdarray)
          refuse(name + " of a " + kind_name(type.kind) + " (expected numpy.ndarray)");
        return make(Kind::kArray);  // filled in by its BUILD
      }
      case Callable::kDtype: {
        const Value& dtype_name = argument(arguments, 0, name);
        if (!is_string(&dtype_name)) refuse("numpy.dtype of a " + std::string(kind_name(dtype_name.kind)));
        Value* dtype = make(Kind::kDtype);
        dtype->text = dtype_name.text.substr(0, 64);
        return dtype;
      }
      case Callable::kEncode: {
        const Value& text = argument(arguments, 0, name);
        const Value& encoding = argument(arguments, 1, name);
        if (text.kind != Kind::kText || encoding.kind != Kind::kText || (encoding.text != "latin1" && encoding.text != "latin-1"))
          refuse("_codecs.encode other than of a str to 'latin1' (how Python 3's protocol 2 writes bytes)");
        Value* bytes = make(Kind::kBytes);
        bytes->text = latin1(text.text);
        return bytes;
      }
      case Callable::kBytes:
        if (!arguments->items.empty()) refuse("bytes called with arguments (protocol 2 writes only bytes() so)");
        return make(Kind::kBytes);
      case Callable::kOrderedDict:
        if (!arguments->items.empty()) refuse("collections.OrderedDict called with arguments");
        return make(Kind::kDict);
      case Callable::kNdarray: break;
    }
    refuse(name + " is called (it is only _reconstruct's argument)");
  }

  // encode(text, 'latin1'): each character, U+0000 to U+00FF, as one byte (text is UTF-8).
  std::string latin1(const std::string& utf8) const {
    std::string bytes;
    bytes.reserve(utf8.size());
    for (size_t i = 0; i < utf8.size(); ++i) {
      const auto lead = static_cast<unsigned char>(utf8[i]);
      if (lead < 0x80) {
        bytes.push_back(static_cast<char>(lead));
        continue;
      }
      const bool two_bytes = (lead == 0xc2 || lead == 0xc3) && i + 1 < utf8.size() &&
                             (static_cast<unsigned char>(utf8[i + 1]) & 0xc0) == 0x80;
      if (!two_bytes) refuse("_codecs.encode(..., 'latin1') of a character above U+00FF or of text that is not UTF-8");
      bytes.push_back(static_cast<char>(((lead & 0x03) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3f)));
    }
    return bytes;
  }

  void build(Value* target, const Value* state) {
    if (state->kind != Kind::kTuple)
      refuse("BUILD of a " + std::string(kind_name(target->kind)) + " with a " + kind_name(state->kind) + " state");
    if (target->kind == Kind::kDtype) {
      // numpy's dtype state: (version, byte order, subarray, names, fields, element size, alignment, flags).
      if (state->items.size() < 2 || !is_string(state->items[1]) || state->items[1]->text.size() != 1)
        refuse("numpy dtype state without a byte order");
      target->byte_order = state->items[1]->text[0];
      return;
    }
    if (target->kind != Kind::kArray || target->built)
      refuse("BUILD of a " + std::string(kind_name(target->kind)) + (target->built ? " built already" : ""));
    build_array(*target, *state);
  }

  // numpy's ndarray state: (version, shape, dtype, Fortran order, raw data).
  void build_array(Value& target, const Value& state) {
    if (state.items.size() != 5) refuse("numpy array state of " + std::to_string(state.items.size()) + " items (expected 5)");
    const Value& shape = *state.items[1];
    const Value& dtype = *state.items[2];
    const Value& fortran = *state.items[3];
    Value& data = *state.items[4];
    if (shape.kind != Kind::kTuple || dtype.kind != Kind::kDtype || fortran.kind != Kind::kBool)
      refuse("numpy array state of a " + std::string(kind_name(shape.kind)) + ", " + kind_name(dtype.kind) + " and " +
             kind_name(fortran.kind) + " (expected a shape tuple, a dtype and a bool)");
    if (data.kind != Kind::kBytes)
      refuse("numpy array data as a " + std::string(kind_name(data.kind)) + " (expected bytes: object arrays are not read)");
    size_t item_size = 0;
    if (dtype.text == "f4")
      item_size = 4;
    else if (dtype.text == "f8")
      item_size = 8;
    else
      refuse("numpy dtype '" + dtype.text + "' (expected float32 'f4' or float64 'f8')");
    if (dtype.byte_order != '<' && dtype.byte_order != '=')
      refuse("numpy dtype '" + dtype.text + "' of byte order '" + std::string(1, dtype.byte_order ? dtype.byte_order : '?') +
             "' (expected little-endian '<')");
    if (fortran.integer) refuse("a numpy array in Fortran order (expected C order)");
    // The product is checked as it grows, so no shape overflows it; zero dimensions make an empty array.
    uint64_t nonzero_product = 1;
    bool empty = false;
    for (const Value* dim : shape.items) {
      if (dim->kind != Kind::kInt || dim->integer < 0)
        refuse("a numpy array shape with a dimension that is not a whole number >= 0");
      const auto size = static_cast<uint64_t>(dim->integer);
      target.array.shape.push_back(dim->integer);
      if (size == 0) {
        empty = true;
      } else if (nonzero_product > static_cast<uint64_t>(INT64_MAX) / size) {
        refuse("a numpy array shape of more than 2^63 elements");
      } else {
        nonzero_product *= size;
      }
    }
    const uint64_t count = empty ? 0 : nonzero_product;
    if (data.text.size() % item_size != 0 || count != data.text.size() / item_size)
      refuse("a numpy array of " + std::to_string(data.text.size()) + " data bytes, which its shape and dtype '" +
             dtype.text + "' do not fill exactly");
    auto& values = target.array.values;
    values.resize(static_cast<size_t>(count));
    if (item_size == 4) {
      if (!values.empty()) std::memcpy(values.data(), data.text.data(), data.text.size());  // an empty vector's data() may be null
    } else {
      for (size_t i = 0; i < values.size(); ++i) {
        double value = 0;
        std::memcpy(&value, data.text.data() + i * 8, 8);
        values[i] = static_cast<float>(value);
      }
    }
    target.built = true;
  }

  const std::string path_;
  const std::string data_;
  size_t position_ = 0, opcode_at_ = 0;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint32_t, Value*> memo_;
};

// The dict's string keys and their array values; other entries are skipped.
std::map<std::string, PickledArray> arrays_of(const Value& dict, const std::string& path) {
  std::map<std::string, PickledArray> arrays;
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const Value* key = dict.items[i];
    const Value* value = dict.items[i + 1];
    if (value->kind != Kind::kArray) continue;
    if (!is_string(key)) fail(path, "holds an array under a " + std::string(kind_name(key->kind)) + " key (expected a name)");
    if (!value->built) fail(path + ": " + key->text, "is a numpy array without its data (no BUILD)");
    arrays[key->text] = value->array;
  }
  return arrays;
}

}  // namespace

int64_t PickledArray::element_count() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

std::map<std::string, PickledArray> read_pickled_arrays(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the pickle");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  PickleMachine machine(path, std::move(bytes));
  const Value* root = machine.run();
  if (root->kind != Kind::kDict) fail(path, "holds a pickled " + std::string(kind_name(root->kind)) + ", not a dict of arrays");
  for (size_t i = 0; i + 1 < root->items.size(); i += 2)
    if (is_string(root->items[i]) && root->items[i]->text == "blobs" && root->items[i + 1]->kind == Kind::kDict)
      return arrays_of(*root->items[i + 1], path);
  return arrays_of(*root, path);
}

}  // namespace trainbench
