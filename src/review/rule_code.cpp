#include "review/rule_code.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace trainbench::review::rule_code {

// =========================================================================================================
// Errors

PythonError::PythonError(std::string type_, std::string message_, std::string where_)
    : std::runtime_error((where_.empty() ? "" : where_ + ": ") + type_ + ": " + message_),
      type(std::move(type_)),
      message(std::move(message_)),
      where(std::move(where_)) {}

Unsupported::Unsupported(std::string origin_, int line_, int column_, std::string construct_)
    : trainbench::Error(origin_ + ":" + std::to_string(line_) + ":" + std::to_string(column_) + ": rule code uses " +
                        construct_ + ", which is outside the Python subset trainbench evaluates"),
      origin(std::move(origin_)),
      line(line_),
      column(column_),
      construct(std::move(construct_)) {}

LimitExceeded::LimitExceeded(std::string limit_, const std::string& message)
    : trainbench::Error(message), limit(std::move(limit_)) {}

namespace {

[[noreturn]] void raise(const char* type, std::string message) { throw PythonError(type, std::move(message)); }

// Code outside the subset found where no source position is at hand; the interpreter reports it as
// Unsupported at the node it was evaluating.
struct NotInSubset {
  std::string construct;
};

// Python would use an arbitrary-precision int here; trainbench's ints are 64-bit, so this is the one
// PythonError that Python itself would not raise.
[[noreturn]] void int_overflow() { raise("OverflowError", "integer result does not fit in 64 bits"); }

constexpr int kMaxNesting = 200;        // parse nesting; CPython's parser also stops at 200 parentheses
constexpr int kMaxValueNesting = 1000;  // recursion into nested values (repr, ==, <, hash, from_json)

void check_value_nesting(int depth) {
  if (depth > kMaxValueNesting) {
    throw LimitExceeded("nesting", "rule code value nested deeper than " + std::to_string(kMaxValueNesting) +
                                       " levels (or containing itself)");
  }
}

}  // namespace

// =========================================================================================================
// Value payloads

namespace detail {

struct Heap {
  virtual ~Heap() = default;
};
struct StrData final : Heap {
  std::string text;
  bool ascii = true;
};
struct SeqData final : Heap {
  std::vector<Value> items;
  ~SeqData() override;
};
struct DictData final : Heap {
  std::vector<std::pair<Value, Value>> entries;
  std::unordered_multimap<size_t, size_t> index;  // hash of a key -> its position in entries
  ~DictData() override;
};
// Builtin objects modelled as attribute bags: a range holds `start`, `stop` and `step`, as Python names
// its attributes; a dict view holds its dict under a name rule code cannot reach (Python's `mapping` is a
// read-only proxy, which is not modelled).
enum class Special : uint8_t { kNone, kKeys, kValues, kItems, kRange };
struct ObjData final : Heap {
  std::string type_name;
  std::vector<std::pair<std::string, Value>> fields;
  size_t declared = 0;  // the first `declared` fields are the dataclass fields
  Special special = Special::kNone;
  ~ObjData() override;
};
struct FnData final : Heap {
  std::string name;
  NativeFunction native;
  int builtin = -1;  // index into the builtin table, or -1 for a native function
  Value self;        // the receiver of a bound method
  ~FnData() override;
};

}  // namespace detail

using detail::DictData;
using detail::FnData;
using detail::ObjData;
using detail::SeqData;
using detail::Special;
using detail::StrData;
using Kind = Value::Kind;

// Everything in this file that needs Value's, Expression's or Program's private parts.
struct Internals {
  static Value make(Kind kind, std::shared_ptr<detail::Heap> heap) {
    Value v;
    v.kind_ = kind;
    v.heap_ = std::move(heap);
    return v;
  }
  template <class T>
  static T& data(const Value& v) {
    return static_cast<T&>(*v.heap_);
  }
  static const detail::Heap* identity(const Value& v) { return v.heap_.get(); }
  static Value builtin_function(std::string name, int builtin, Value self) {
    auto fn = std::make_shared<FnData>();
    fn->name = std::move(name);
    fn->builtin = builtin;
    fn->self = std::move(self);
    return make(Kind::kFunction, std::move(fn));
  }
  static Value module(std::string name, std::vector<std::pair<std::string, Value>> attributes) {
    Value v = Value::object(std::move(name), std::move(attributes));
    v.kind_ = Kind::kModule;
    return v;
  }
  static const detail::Code& code(const std::shared_ptr<const detail::Code>& code) {
    if (!code) throw std::logic_error("rule_code: evaluating an empty Expression or Program");
    return *code;
  }
  static const detail::Code& code(const Expression& e) { return code(e.code_); }
  static const detail::Code& code(const Program& p) { return code(p.code_); }
  static Expression expression(std::shared_ptr<const detail::Code> code) {
    Expression e;
    e.code_ = std::move(code);
    return e;
  }
  static Program program(std::shared_ptr<const detail::Code> code) {
    Program p;
    p.code_ = std::move(code);
    return p;
  }
};

namespace {

bool has_children(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kDict:
    case Kind::kObject:
    case Kind::kModule:
    case Kind::kFunction:
      return true;
    default:
      return false;
  }
}

thread_local std::vector<Value>* graveyard = nullptr;

// Destroying a deeply nested value recursively would overflow the stack, so a payload hands its children
// to one loop per thread that destroys them one at a time.
template <class MoveChildren>
void bury(MoveChildren&& move_children) noexcept {
  if (graveyard != nullptr) {
    move_children(*graveyard);
    return;
  }
  std::vector<Value> pending;
  graveyard = &pending;
  move_children(pending);
  while (!pending.empty()) {
    Value last = std::move(pending.back());
    pending.pop_back();
  }  // `last` dies here; its payload's destructor pushes its own children onto `pending`
  graveyard = nullptr;
}

void bury_one(std::vector<Value>& out, Value& v) {
  if (has_children(v)) out.push_back(std::move(v));
}

bool all_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

detail::SeqData::~SeqData() {
  bury([this](std::vector<Value>& out) {
    for (Value& v : items) bury_one(out, v);
  });
}
detail::DictData::~DictData() {
  bury([this](std::vector<Value>& out) {
    for (auto& [k, v] : entries) {
      bury_one(out, k);
      bury_one(out, v);
    }
  });
}
detail::ObjData::~ObjData() {
  bury([this](std::vector<Value>& out) {
    for (auto& field : fields) bury_one(out, field.second);
  });
}
detail::FnData::~FnData() {
  bury([this](std::vector<Value>& out) { bury_one(out, self); });
}

// =========================================================================================================
// Value construction and accessors

namespace {

[[noreturn]] void wrong_kind(const char* accessor, const Value& v) {
  throw std::logic_error(std::string("rule_code::Value::") + accessor + " on a Python " + python_type_name(v));
}

size_t count_code_points(std::string_view s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace

Value::Value() = default;

Value Value::boolean(bool value) {
  Value v;
  v.kind_ = Kind::kBool;
  v.scalar_.int_ = value ? 1 : 0;
  return v;
}
Value Value::integer(int64_t value) {
  Value v;
  v.kind_ = Kind::kInt;
  v.scalar_.int_ = value;
  return v;
}
Value Value::real(double value) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.scalar_.real_ = value;
  return v;
}
Value Value::string(std::string text) {
  auto data = std::make_shared<StrData>();
  data->ascii = all_ascii(text);
  data->text = std::move(text);
  return Internals::make(Kind::kString, std::move(data));
}
Value Value::list(std::vector<Value> items) {
  auto data = std::make_shared<SeqData>();
  data->items = std::move(items);
  return Internals::make(Kind::kList, std::move(data));
}
Value Value::tuple(std::vector<Value> items) {
  auto data = std::make_shared<SeqData>();
  data->items = std::move(items);
  return Internals::make(Kind::kTuple, std::move(data));
}
Value Value::dict() { return Internals::make(Kind::kDict, std::make_shared<DictData>()); }
Value Value::object(std::string type_name, std::vector<std::pair<std::string, Value>> fields) {
  auto data = std::make_shared<ObjData>();
  data->type_name = std::move(type_name);
  data->declared = fields.size();
  data->fields = std::move(fields);
  return Internals::make(Kind::kObject, std::move(data));
}
Value Value::function(std::string name, NativeFunction function) {
  auto data = std::make_shared<FnData>();
  data->name = std::move(name);
  data->native = std::move(function);
  return Internals::make(Kind::kFunction, std::move(data));
}

bool Value::as_bool() const {
  if (kind_ != Kind::kBool) wrong_kind("as_bool", *this);
  return scalar_.int_ != 0;
}
int64_t Value::as_int() const {
  if (kind_ != Kind::kInt && kind_ != Kind::kBool) wrong_kind("as_int", *this);
  return scalar_.int_;
}
double Value::as_double() const {
  if (kind_ == Kind::kFloat) return scalar_.real_;
  if (kind_ != Kind::kInt && kind_ != Kind::kBool) wrong_kind("as_double", *this);
  return static_cast<double>(scalar_.int_);
}
const std::string& Value::as_string() const {
  if (kind_ != Kind::kString) wrong_kind("as_string", *this);
  return Internals::data<StrData>(*this).text;
}
std::vector<Value>& Value::items() const {
  if (kind_ != Kind::kList && kind_ != Kind::kTuple) wrong_kind("items", *this);
  return Internals::data<SeqData>(*this).items;
}
size_t Value::size() const {
  switch (kind_) {
    case Kind::kString: {
      const StrData& s = Internals::data<StrData>(*this);
      return s.ascii ? s.text.size() : count_code_points(s.text);
    }
    case Kind::kList:
    case Kind::kTuple:
      return items().size();
    case Kind::kDict:
      return entries().size();
    default:
      wrong_kind("size", *this);
  }
}
const std::string& Value::type_name() const {
  if (kind_ != Kind::kObject && kind_ != Kind::kModule) wrong_kind("type_name", *this);
  return Internals::data<ObjData>(*this).type_name;
}
const Value* Value::get_attr(std::string_view name) const {
  if (kind_ != Kind::kObject && kind_ != Kind::kModule) wrong_kind("get_attr", *this);
  for (const auto& [field, value] : Internals::data<ObjData>(*this).fields) {
    if (field == name) return &value;
  }
  return nullptr;
}
void Value::set_attr(std::string_view name, Value value) const {
  if (kind_ != Kind::kObject && kind_ != Kind::kModule) wrong_kind("set_attr", *this);
  for (auto& [field, old] : Internals::data<ObjData>(*this).fields) {
    if (field == name) {
      old = std::move(value);
      return;
    }
  }
  Internals::data<ObjData>(*this).fields.emplace_back(std::string(name), std::move(value));
}
const std::vector<std::pair<std::string, Value>>& Value::fields() const {
  if (kind_ != Kind::kObject && kind_ != Kind::kModule) wrong_kind("fields", *this);
  return Internals::data<ObjData>(*this).fields;
}
const std::string& Value::function_name() const {
  if (kind_ != Kind::kFunction) wrong_kind("function_name", *this);
  return Internals::data<FnData>(*this).name;
}
bool Value::is(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kNone:
      return true;
    case Kind::kBool:
    case Kind::kInt:
      return scalar_.int_ == other.scalar_.int_;
    case Kind::kFloat:
      return std::memcmp(&scalar_.real_, &other.scalar_.real_, sizeof(double)) == 0;
    default:
      return heap_ == other.heap_;
  }
}

// =========================================================================================================
// Python equality, ordering and hashing

namespace {

bool is_int_like(const Value& v) { return v.kind() == Kind::kInt || v.kind() == Kind::kBool; }

// -1, 0 or 1 comparing an int with a float exactly (as Python does, without rounding the int); 2 for NaN.
int compare_int_double(int64_t i, double d) {
  if (std::isnan(d)) return 2;
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  const double floor_d = std::floor(d);
  const auto f = static_cast<int64_t>(floor_d);
  if (i != f) return i < f ? -1 : 1;
  return floor_d == d ? 0 : -1;
}

int compare_numbers(const Value& a, const Value& b) {
  const bool a_int = a.kind() != Kind::kFloat;
  const bool b_int = b.kind() != Kind::kFloat;
  if (a_int && b_int) return (a.as_int() > b.as_int()) - (a.as_int() < b.as_int());
  if (!a_int && !b_int) {
    const double x = a.as_double();
    const double y = b.as_double();
    if (std::isnan(x) || std::isnan(y)) return 2;
    return (x > y) - (x < y);
  }
  if (a_int) return compare_int_double(a.as_int(), b.as_double());
  const int c = compare_int_double(b.as_int(), a.as_double());
  return c == 2 ? 2 : -c;
}

bool py_equal(const Value& a, const Value& b, int depth);
Special special_of(const Value& v);
bool special_equal(const Value& a, const Value& b);

// Containers compare elements with `x is y or x == y`, as CPython does.
bool element_equal(const Value& a, const Value& b, int depth) {
  const detail::Heap* id = Internals::identity(a);
  return (id != nullptr && id == Internals::identity(b)) || py_equal(a, b, depth + 1);
}

bool sequence_equal(const std::vector<Value>& a, const std::vector<Value>& b, int depth) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!element_equal(a[i], b[i], depth)) return false;
  }
  return true;
}

bool dict_equal(const Value& a, const Value& b, int depth) {
  if (a.entries().size() != b.entries().size()) return false;
  for (const auto& [key, value] : a.entries()) {
    const Value* other = b.find(key);
    if (other == nullptr || !element_equal(value, *other, depth)) return false;
  }
  return true;
}

// A dataclass's __eq__: same class and equal declared fields.
bool object_equal(const Value& a, const Value& b, int depth) {
  const ObjData& x = Internals::data<ObjData>(a);
  const ObjData& y = Internals::data<ObjData>(b);
  if (x.type_name != y.type_name || x.declared != y.declared) return false;
  for (size_t i = 0; i < x.declared; ++i) {
    if (!element_equal(x.fields[i].second, y.fields[i].second, depth)) return false;
  }
  return true;
}

bool py_equal(const Value& a, const Value& b, int depth) {
  check_value_nesting(depth);
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.as_string() == b.as_string();
    case Kind::kList:
    case Kind::kTuple:
      return Internals::identity(a) == Internals::identity(b) || sequence_equal(a.items(), b.items(), depth);
    case Kind::kDict:
      return Internals::identity(a) == Internals::identity(b) || dict_equal(a, b, depth);
    case Kind::kObject:
      if (Internals::identity(a) == Internals::identity(b)) return true;
      if (special_of(a) != Special::kNone || special_of(b) != Special::kNone) return special_equal(a, b);
      return object_equal(a, b, depth);
    default:
      return a.is(b);
  }
}

enum class Cmp : uint8_t { kLt, kLe, kGt, kGe, kEq, kNe, kIn, kNotIn, kIs, kIsNot };

const char* cmp_symbol(Cmp op) {
  static const char* const kSymbols[] = {"<", "<=", ">", ">=", "==", "!=", "in", "not in", "is", "is not"};
  return kSymbols[static_cast<int>(op)];
}

bool order_holds(Cmp op, int c) {
  switch (op) {
    case Cmp::kLt:
      return c < 0;
    case Cmp::kLe:
      return c <= 0;
    case Cmp::kGt:
      return c > 0;
    default:
      return c >= 0;
  }
}

// Python's <, <=, >, >= (op is one of those): numbers, strings, and lists or tuples lexicographically.
bool py_order(Cmp op, const Value& a, const Value& b, int depth) {
  check_value_nesting(depth);
  if (a.is_number() && b.is_number()) {
    const int c = compare_numbers(a, b);
    return c != 2 && order_holds(op, c);
  }
  if (a.kind() == b.kind() && a.kind() == Kind::kString) return order_holds(op, a.as_string().compare(b.as_string()));
  if (a.kind() == b.kind() && (a.kind() == Kind::kList || a.kind() == Kind::kTuple)) {
    const std::vector<Value>& x = a.items();
    const std::vector<Value>& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!element_equal(x[i], y[i], depth)) return py_order(op, x[i], y[i], depth + 1);
    }
    return order_holds(op, (x.size() > y.size()) - (x.size() < y.size()));
  }
  if (special_of(a) == Special::kKeys || special_of(a) == Special::kItems) {
    throw NotInSubset{"ordering dict views (a set comparison)"};
  }
  raise("TypeError", std::string("'") + cmp_symbol(op) + "' not supported between instances of '" +
                         python_type_name(a) + "' and '" + python_type_name(b) + "'");
}

size_t range_hash(const Value& v);

size_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<size_t>(x);
}

// Equal keys hash equally across int, float and bool (1 == 1.0 == True), as Python requires.
size_t hash_value(const Value& v, int depth) {
  check_value_nesting(depth);
  switch (v.kind()) {
    case Kind::kNone:
      return 0x6e6f6e65;
    case Kind::kBool:
    case Kind::kInt:
      return mix(static_cast<uint64_t>(v.as_int()));
    case Kind::kFloat: {
      const double d = v.as_double();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
        return mix(static_cast<uint64_t>(static_cast<int64_t>(d)));
      }
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      return mix(bits ^ 0x9e3779b97f4a7c15ULL);
    }
    case Kind::kString:
      return std::hash<std::string_view>{}(v.as_string());
    case Kind::kTuple: {
      size_t h = 0x7475706c;
      for (const Value& item : v.items()) h = mix(h * 31 + hash_value(item, depth + 1));
      return h;
    }
    case Kind::kFunction:
    case Kind::kModule:
      return mix(reinterpret_cast<uintptr_t>(Internals::identity(v)));
    default:
      if (special_of(v) == Special::kRange) return range_hash(v);
      raise("TypeError", "unhashable type: '" + python_type_name(v) + "'");
  }
}

bool key_equal(const Value& a, const Value& b) { return element_equal(a, b, 0); }

std::optional<size_t> dict_position(const DictData& d, const Value& key) {
  auto [begin, end] = d.index.equal_range(hash_value(key, 0));
  for (auto it = begin; it != end; ++it) {
    if (key_equal(d.entries[it->second].first, key)) return it->second;
  }
  return std::nullopt;
}

std::optional<size_t> dict_position(const DictData& d, std::string_view key) {
  auto [begin, end] = d.index.equal_range(std::hash<std::string_view>{}(key));
  for (auto it = begin; it != end; ++it) {
    const Value& k = d.entries[it->second].first;
    if (k.kind() == Kind::kString && k.as_string() == key) return it->second;
  }
  return std::nullopt;
}

void dict_store(DictData& d, Value key, Value value) {
  const size_t h = hash_value(key, 0);
  auto [begin, end] = d.index.equal_range(h);
  for (auto it = begin; it != end; ++it) {
    if (key_equal(d.entries[it->second].first, key)) {
      d.entries[it->second].second = std::move(value);  // Python keeps the first key object
      return;
    }
  }
  d.index.emplace(h, d.entries.size());
  d.entries.emplace_back(std::move(key), std::move(value));
}

DictData& dict_data(const Value& v, const char* accessor) {
  if (v.kind() != Kind::kDict) wrong_kind(accessor, v);
  return Internals::data<DictData>(v);
}

// ---- dict views and range objects

Special special_of(const Value& v) {
  return v.kind() == Kind::kObject ? Internals::data<ObjData>(v).special : Special::kNone;
}

Value make_special(std::string type_name, std::vector<std::pair<std::string, Value>> fields, Special special) {
  Value v = Value::object(std::move(type_name), std::move(fields));
  Internals::data<ObjData>(v).declared = 0;  // not dataclass fields: repr() shows these objects its own way
  Internals::data<ObjData>(v).special = special;
  return v;
}

Value make_view(const Value& dict, Special which) {
  static const char* const kNames[] = {"", "dict_keys", "dict_values", "dict_items"};
  return make_special(kNames[static_cast<int>(which)], {{"(mapping)", dict}}, which);
}

Value make_range(int64_t start, int64_t stop, int64_t step) {
  return make_special(
      "range", {{"start", Value::integer(start)}, {"stop", Value::integer(stop)}, {"step", Value::integer(step)}},
      Special::kRange);
}

const Value& view_mapping(const Value& view) { return Internals::data<ObjData>(view).fields[0].second; }

struct RangeBounds {
  int64_t start = 0;
  int64_t step = 1;
  size_t length = 0;
};

RangeBounds range_bounds(const Value& range) {
  const auto& fields = Internals::data<ObjData>(range).fields;
  RangeBounds r;
  r.start = fields[0].second.as_int();
  const int64_t stop = fields[1].second.as_int();
  r.step = fields[2].second.as_int();
  __int128 n = 0;
  if (r.step > 0 && r.start < stop) n = (static_cast<__int128>(stop) - r.start - 1) / r.step + 1;
  if (r.step < 0 && r.start > stop)
    n = (static_cast<__int128>(r.start) - stop - 1) / -static_cast<__int128>(r.step) + 1;
  r.length = static_cast<size_t>(n);
  return r;
}

size_t special_length(const Value& v) {
  return special_of(v) == Special::kRange ? range_bounds(v).length : view_mapping(v).entries().size();
}

// The i-th element (i < special_length(v)) of a view or range.
Value special_element(const Value& v, size_t i) {
  if (special_of(v) == Special::kRange) {
    const RangeBounds r = range_bounds(v);
    return Value::integer(static_cast<int64_t>(r.start + static_cast<__int128>(i) * r.step));
  }
  const auto& [key, value] = view_mapping(v).entries()[i];
  switch (special_of(v)) {
    case Special::kKeys:
      return key;
    case Special::kValues:
      return value;
    default:
      return Value::tuple({key, value});
  }
}

bool range_contains(const Value& range, const Value& item) {
  if (!item.is_number()) return false;
  const double d = item.as_double();
  if (item.kind() == Kind::kFloat && (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) >= 9.2e18)) return false;
  const __int128 x = item.kind() == Kind::kFloat ? static_cast<int64_t>(d) : item.as_int();
  const RangeBounds r = range_bounds(range);
  const __int128 offset = x - r.start;
  if (offset % r.step != 0) return false;
  const __int128 index = offset / r.step;
  return index >= 0 && index < static_cast<__int128>(r.length);
}

bool special_contains(const Value& container, const Value& item) {
  switch (special_of(container)) {
    case Special::kRange:
      return range_contains(container, item);
    case Special::kKeys:
      return view_mapping(container).find(item) != nullptr;
    case Special::kItems: {
      if (item.kind() != Kind::kTuple || item.items().size() != 2) return false;
      const Value* value = view_mapping(container).find(item.items()[0]);
      return value != nullptr && element_equal(*value, item.items()[1], 0);
    }
    default: {
      const size_t n = special_length(container);
      for (size_t i = 0; i < n; ++i) {
        if (element_equal(special_element(container, i), item, 0)) return true;
      }
      return false;
    }
  }
}

// Ranges are equal when they produce the same numbers; keys and items views compare as sets; a values
// view only equals itself.
bool special_equal(const Value& a, const Value& b) {
  const Special x = special_of(a);
  const Special y = special_of(b);
  if (x == Special::kRange || y == Special::kRange) {
    if (x != y) return false;
    const RangeBounds r = range_bounds(a);
    const RangeBounds q = range_bounds(b);
    return r.length == q.length && (r.length == 0 || (r.start == q.start && (r.length == 1 || r.step == q.step)));
  }
  if (x == Special::kNone || y == Special::kNone || x == Special::kValues || y == Special::kValues) return false;
  const size_t n = special_length(a);
  if (n != special_length(b)) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!special_contains(b, special_element(a, i))) return false;
  }
  return true;
}

size_t range_hash(const Value& v) {
  const RangeBounds r = range_bounds(v);
  if (r.length == 0) return 0x72616e67;
  if (r.length == 1) return mix(static_cast<uint64_t>(r.start));
  return mix(static_cast<uint64_t>(r.start) * 31 + static_cast<uint64_t>(r.step) * 17 + r.length);
}

}  // namespace

const Value* Value::find(const Value& key) const {
  const DictData& d = dict_data(*this, "find");
  const std::optional<size_t> at = dict_position(d, key);
  return at ? &d.entries[*at].second : nullptr;
}
const Value* Value::find(std::string_view key) const {
  const DictData& d = dict_data(*this, "find");
  const std::optional<size_t> at = dict_position(d, key);
  return at ? &d.entries[*at].second : nullptr;
}
Value Value::get(const Value& key) const {
  if (const Value* v = find(key)) return *v;
  raise("KeyError", repr(key));
}
Value Value::get(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  raise("KeyError", repr(Value::string(std::string(key))));
}
void Value::set(Value key, Value value) const { dict_store(dict_data(*this, "set"), std::move(key), std::move(value)); }
void Value::set(std::string_view key, Value value) const { set(Value::string(std::string(key)), std::move(value)); }
bool Value::erase(const Value& key) const {
  DictData& d = dict_data(*this, "erase");
  const std::optional<size_t> at = dict_position(d, key);
  if (!at) return false;
  d.entries.erase(d.entries.begin() + static_cast<std::ptrdiff_t>(*at));
  d.index.clear();  // positions after the erased one moved; erasing is rare in rule code
  for (size_t i = 0; i < d.entries.size(); ++i) d.index.emplace(hash_value(d.entries[i].first, 0), i);
  return true;
}
const std::vector<std::pair<Value, Value>>& Value::entries() const { return dict_data(*this, "entries").entries; }

bool equal(const Value& a, const Value& b) { return py_equal(a, b, 0); }

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return v.as_int() != 0;
    case Kind::kFloat:
      return v.as_double() != 0.0;
    case Kind::kString:
      return !v.as_string().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !v.items().empty();
    case Kind::kDict:
      return !v.entries().empty();
    case Kind::kObject:
      return special_of(v) == Special::kNone || special_length(v) > 0;
    default:
      return true;
  }
}

// =========================================================================================================
// repr() and str()

namespace {

// Decodes the UTF-8 code point at s[i] and moves i past it; a stray byte decodes as itself.
uint32_t decode_utf8(std::string_view s, size_t& i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  const size_t extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  bool valid = extra > 0 && i + extra < s.size();
  for (size_t k = 1; valid && k <= extra; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  if (!valid) {
    ++i;
    return lead;
  }
  uint32_t cp = lead & (0x3F >> extra);
  for (size_t k = 1; k <= extra; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += extra + 1;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Code points Python's repr() escapes: controls, separators and format characters (the common ones; the
// full Unicode table is not carried, and rule code does not print such text).
bool printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)) return false;
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB)) return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp > 0x10FFFF) return false;
  return true;
}

// Python's float repr: the shortest digits that round-trip, in fixed notation when the decimal exponent is
// in [-4, 16) and in scientific notation (two-digit exponent at least) otherwise.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  const bool negative = sci[0] == '-';
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(negative ? 1 : 0, e - (negative ? 1 : 0))) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int point = exponent + 1;  // digits before the decimal point
  std::string out = negative ? "-" : "";
  if (point <= -4 || point > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int magnitude = std::abs(exponent);
    out += exponent < 0 ? "e-" : "e+";
    if (magnitude < 10) out += '0';
    return out + std::to_string(magnitude);
  }
  if (point <= 0) return out + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  if (static_cast<size_t>(point) >= digits.size()) {
    return out + digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
}

// repr() output with a size bound, so printing a huge value fails instead of exhausting memory.
struct ReprOut {
  std::string text;
  size_t cap = std::numeric_limits<size_t>::max();
  std::vector<const detail::Heap*> open;  // containers being printed, to print a cycle as [...] like Python
  void add(std::string_view s) {
    if (text.size() + s.size() > cap) {
      throw LimitExceeded("max_string", "rule code built a string longer than max_string (" + std::to_string(cap) +
                                            " bytes) while printing a value");
    }
    text.append(s);
  }
};

void string_repr(std::string_view s, ReprOut& out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const char quote = has_single && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string r(1, quote);
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == quote || c == '\\') {
      r += '\\';
      r += c;
      ++i;
      continue;
    }
    const size_t start = i;
    const uint32_t cp = decode_utf8(s, i);
    if (printable(cp)) {
      r.append(s.substr(start, i - start));
    } else if (cp == '\n' || cp == '\r' || cp == '\t') {
      r += cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : "\\t";
    } else {
      char esc[16];
      std::snprintf(esc, sizeof esc, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      r += esc;
    }
    if (r.size() > 4096) {
      out.add(r);
      r.clear();
    }
  }
  r += quote;
  out.add(r);
}

bool is_type_object(const Value& v);

void repr_into(const Value& v, ReprOut& out, int depth);

void repr_items(const std::vector<Value>& items, ReprOut& out, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.add(", ");
    repr_into(items[i], out, depth + 1);
  }
}

void repr_function(const Value& v, ReprOut& out) {
  const FnData& fn = Internals::data<FnData>(v);
  if (is_type_object(v)) return out.add("<class '" + fn.name + "'>");
  if (fn.builtin < 0) return out.add("<function " + fn.name + ">");
  if (fn.self.is_none()) return out.add("<built-in function " + fn.name + ">");
  const std::string method = fn.name.substr(fn.name.find('.') + 1);
  out.add("<built-in method " + method + " of " + python_type_name(fn.self) + " object>");
}

// range(0, 3), range(1, 9, 2), dict_keys(['a']), dict_items([('a', 1)])
void repr_special(const Value& v, ReprOut& out, int depth) {
  if (special_of(v) == Special::kRange) {
    const auto& f = v.fields();
    out.add("range(" + std::to_string(f[0].second.as_int()) + ", " + std::to_string(f[1].second.as_int()));
    if (f[2].second.as_int() != 1) out.add(", " + std::to_string(f[2].second.as_int()));
    return out.add(")");
  }
  out.add(v.type_name() + "([");
  const size_t n = special_length(v);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out.add(", ");
    repr_into(special_element(v, i), out, depth + 1);
  }
  out.add("])");
}

void repr_container_body(const Value& v, ReprOut& out, int depth) {
  switch (v.kind()) {
    case Kind::kList:
      out.add("[");
      repr_items(v.items(), out, depth);
      return out.add("]");
    case Kind::kTuple:
      out.add("(");
      repr_items(v.items(), out, depth);
      return out.add(v.items().size() == 1 ? ",)" : ")");
    case Kind::kDict: {
      out.add("{");
      bool first = true;
      for (const auto& [key, value] : v.entries()) {
        if (!first) out.add(", ");
        first = false;
        repr_into(key, out, depth + 1);
        out.add(": ");
        repr_into(value, out, depth + 1);
      }
      return out.add("}");
    }
    default: {  // a dataclass instance
      const ObjData& obj = Internals::data<ObjData>(v);
      if (obj.special != Special::kNone) return repr_special(v, out, depth);
      out.add(obj.type_name + "(");
      for (size_t i = 0; i < obj.declared; ++i) {
        out.add((i > 0 ? ", " : "") + obj.fields[i].first + "=");
        repr_into(obj.fields[i].second, out, depth + 1);
      }
      return out.add(")");
    }
  }
}

void repr_container(const Value& v, ReprOut& out, int depth) {
  const detail::Heap* id = Internals::identity(v);
  if (std::find(out.open.begin(), out.open.end(), id) != out.open.end()) {
    return out.add(v.kind() == Kind::kList ? "[...]" : v.kind() == Kind::kDict ? "{...}" : "...");
  }
  out.open.push_back(id);
  repr_container_body(v, out, depth);
  out.open.pop_back();
}

void repr_into(const Value& v, ReprOut& out, int depth) {
  check_value_nesting(depth);
  switch (v.kind()) {
    case Kind::kNone:
      return out.add("None");
    case Kind::kBool:
      return out.add(v.as_bool() ? "True" : "False");
    case Kind::kInt:
      return out.add(std::to_string(v.as_int()));
    case Kind::kFloat:
      return out.add(float_repr(v.as_double()));
    case Kind::kString:
      return string_repr(v.as_string(), out);
    case Kind::kFunction:
      return repr_function(v, out);
    case Kind::kModule:
      return out.add("<module '" + v.type_name() + "' (built-in)>");
    default:
      return repr_container(v, out, depth);
  }
}

}  // namespace

std::string repr(const Value& value) {
  ReprOut out;
  repr_into(value, out, 0);
  return std::move(out.text);
}

std::string str(const Value& value) { return value.kind() == Kind::kString ? value.as_string() : repr(value); }

// =========================================================================================================
// JSON

namespace {

template <class Json>
Value json_value(const Json& json, int depth) {
  check_value_nesting(depth);
  switch (json.type()) {
    case Json::value_t::null:
      return Value();
    case Json::value_t::boolean:
      return Value::boolean(json.template get<bool>());
    case Json::value_t::number_integer:
      return Value::integer(json.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = json.template get<uint64_t>();
      return u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? Value::integer(static_cast<int64_t>(u))
                                                                             : Value::real(static_cast<double>(u));
    }
    case Json::value_t::number_float:
      return Value::real(json.template get<double>());
    case Json::value_t::string:
      return Value::string(json.template get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(json_value(item, depth + 1));
      return Value::list(std::move(items));
    }
    case Json::value_t::object: {
      Value dict = Value::dict();
      for (const auto& [key, item] : json.items()) dict.set(key, json_value(item, depth + 1));
      return dict;
    }
    default:
      throw trainbench::Error("a binary JSON value has no Python equivalent for rule code");
  }
}

}  // namespace

Value from_json(const nlohmann::json& json) { return json_value(json, 0); }
Value from_json(const nlohmann::ordered_json& json) { return json_value(json, 0); }

// =========================================================================================================
// Tokens

namespace {

enum class Tok : uint8_t { kName, kInt, kFloat, kString, kOp, kNewline, kIndent, kDedent, kEnd };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // a name, an operator, or a string literal's value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int col = 1;
};

std::string where_text(const std::string& origin, int line, int col) {
  return origin + ":" + std::to_string(line) + ":" + std::to_string(col);
}

[[noreturn]] void syntax_error(const std::string& origin, int line, int col, const std::string& what) {
  throw trainbench::Error(where_text(origin, line, col) + ": invalid Python in rule code: " + what);
}

[[noreturn]] void nesting_exceeded(const std::string& origin, int line, int col) {
  throw LimitExceeded("nesting", where_text(origin, line, col) + ": rule code nested deeper than " +
                                     std::to_string(kMaxNesting) + " levels");
}

bool is_digit_in(char c, int base) {
  if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  return c >= '0' && c < static_cast<char>('0' + std::min(base, 10));
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Python's tokenizer for the subset: names, numbers, strings, operators, and NEWLINE/INDENT/DEDENT for
// statements. Lines inside brackets or ending in a backslash continue the logical line.
class Lexer {
 public:
  Lexer(std::string_view code, const std::string& origin) : src_(code), origin_(origin) {}
  std::vector<Token> run();

 private:
  std::string_view src_;
  const std::string& origin_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  std::vector<int> indents_{0};
  std::vector<Token> brackets_;
  std::vector<Token> out_;

  int col() const { return static_cast<int>(pos_ - line_start_) + 1; }
  char at(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  bool done() const { return pos_ >= src_.size(); }
  Token start(Tok kind) const {
    Token t;
    t.kind = kind;
    t.line = line_;
    t.col = col();
    return t;
  }
  void newline() {  // after consuming '\n'
    ++line_;
    line_start_ = pos_;
  }
  [[noreturn]] void syntax(const std::string& what) const { syntax_error(origin_, line_, col(), what); }
  [[noreturn]] void unsupported(const std::string& what) const { throw Unsupported(origin_, line_, col(), what); }
  void emit_newline() {
    if (!out_.empty() && out_.back().kind != Tok::kNewline) out_.push_back(start(Tok::kNewline));
  }
  bool begin_line();
  void indent_to(int width);
  void token();
  void name();
  void number();
  void radix_number(Token t);
  void digits(int base);
  void string_literal(Token t, std::string_view prefix);
  void escape(std::string& value);
  void hex_escape(std::string& value, int count);
  void op();
};

std::vector<Token> Lexer::run() {
  while (!done() && std::isspace(static_cast<unsigned char>(at())) != 0) {  // the checker strips the code
    if (src_[pos_++] == '\n') newline();
  }
  bool line_begins = true;
  while (true) {
    if (line_begins && brackets_.empty()) {
      if (!begin_line()) break;
      line_begins = false;
    }
    while (at() == ' ' || at() == '\t' || at() == '\f') ++pos_;
    if (done()) break;
    const char c = src_[pos_];
    if (c == '#') {
      while (!done() && at() != '\n') ++pos_;
    } else if (c == '\n') {
      ++pos_;
      if (brackets_.empty()) {
        emit_newline();
        line_begins = true;
      }
      newline();
    } else if (c == '\\' && at(1) == '\n') {
      pos_ += 2;
      newline();
    } else if (c == '\\') {
      syntax("unexpected character after line continuation character");
    } else {
      token();
    }
  }
  if (!brackets_.empty()) {
    const Token& open = brackets_.back();
    syntax_error(origin_, open.line, open.col, "'" + open.text + "' was never closed");
  }
  emit_newline();
  for (; indents_.size() > 1; indents_.pop_back()) out_.push_back(start(Tok::kDedent));
  out_.push_back(start(Tok::kEnd));
  return std::move(out_);
}

// At the start of a logical line: skips blank and comment lines, then emits INDENT/DEDENT tokens. The
// first line's indentation was stripped, as the checker strips the code. False at the end of the code.
bool Lexer::begin_line() {
  while (true) {
    size_t p = pos_;
    int width = 0;
    for (; p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\f'); ++p) {
      if (src_[p] == '\t') {
        pos_ = p;
        unsupported("a tab in indentation");
      }
      width = src_[p] == '\f' ? 0 : width + 1;
    }
    pos_ = p;
    if (done()) return false;
    if (at() == '#') {
      while (!done() && at() != '\n') ++pos_;
    }
    if (at() == '\n') {
      ++pos_;
      newline();
      continue;
    }
    if (done()) return false;
    indent_to(width);
    return true;
  }
}

void Lexer::indent_to(int width) {
  if (width > indents_.back()) {
    if (static_cast<int>(indents_.size()) > kMaxNesting) nesting_exceeded(origin_, line_, col());
    indents_.push_back(width);
    out_.push_back(start(Tok::kIndent));
    return;
  }
  while (width < indents_.back()) {
    indents_.pop_back();
    out_.push_back(start(Tok::kDedent));
  }
  if (width != indents_.back()) syntax("unindent does not match any outer indentation level");
}

void Lexer::token() {
  const char c = at();
  if (std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_') return name();
  if (std::isdigit(static_cast<unsigned char>(c)) != 0 ||
      (c == '.' && std::isdigit(static_cast<unsigned char>(at(1))))) {
    return number();
  }
  if (c == '\'' || c == '"') return string_literal(start(Tok::kString), "");
  if (static_cast<unsigned char>(c) >= 0x80) unsupported("a non-ASCII character outside a string");
  op();
}

void Lexer::name() {
  Token t = start(Tok::kName);
  const size_t begin = pos_;
  while (is_name_char(at())) ++pos_;
  const std::string_view word = src_.substr(begin, pos_ - begin);
  if ((at() == '\'' || at() == '"') && word.size() <= 2) {
    std::string lower;
    for (char c : word) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "r" || lower == "u" || lower == "b" || lower == "f" || lower == "rb" || lower == "br" ||
        lower == "rf" || lower == "fr") {
      t.kind = Tok::kString;
      return string_literal(t, lower);
    }
  }
  if (static_cast<unsigned char>(at()) >= 0x80) unsupported("a non-ASCII name");
  t.text = std::string(word);
  out_.push_back(std::move(t));
}

void Lexer::digits(int base) {
  if (!is_digit_in(at(), base)) syntax("invalid number literal");
  while (is_digit_in(at(), base) || (at() == '_' && is_digit_in(at(1), base))) ++pos_;
}

void Lexer::radix_number(Token t) {
  const char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(at(1))));
  const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
  pos_ += 2;
  if (at() == '_') ++pos_;
  const size_t begin = pos_;
  digits(base);
  std::string text;
  for (char c : src_.substr(begin, pos_ - begin)) {
    if (c != '_') text += c;
  }
  const auto result = std::from_chars(text.data(), text.data() + text.size(), t.int_value, base);
  if (result.ec != std::errc()) unsupported("an integer literal beyond 64 bits");
  if (is_name_char(at())) syntax("invalid number literal");
  out_.push_back(std::move(t));
}

void Lexer::number() {
  Token t = start(Tok::kInt);
  if (at() == '0' && std::strchr("xXoObB", at(1)) != nullptr && at(1) != '\0') return radix_number(std::move(t));
  const size_t begin = pos_;
  if (at() != '.') digits(10);
  bool is_float = false;
  if (at() == '.') {
    is_float = true;
    ++pos_;
    if (std::isdigit(static_cast<unsigned char>(at())) != 0) digits(10);
  }
  if (at() == 'e' || at() == 'E') {
    is_float = true;
    ++pos_;
    if (at() == '+' || at() == '-') ++pos_;
    digits(10);
  }
  if (at() == 'j' || at() == 'J') unsupported("a complex number literal");
  if (is_name_char(at())) syntax("invalid decimal literal");
  std::string text;
  for (char c : src_.substr(begin, pos_ - begin)) {
    if (c != '_') text += c;
  }
  if (is_float) {
    t.kind = Tok::kFloat;
    const auto result = std::from_chars(text.data(), text.data() + text.size(), t.float_value);
    if (result.ec != std::errc()) t.float_value = std::strtod(text.c_str(), nullptr);  // overflow to inf, underflow
  } else {
    if (text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos) {
      syntax("leading zeros in decimal integer literals are not permitted");
    }
    const auto result = std::from_chars(text.data(), text.data() + text.size(), t.int_value);
    if (result.ec != std::errc()) unsupported("an integer literal beyond 64 bits");
  }
  out_.push_back(std::move(t));
}

void Lexer::string_literal(Token t, std::string_view prefix) {
  if (prefix.find('b') != std::string_view::npos) unsupported("a bytes literal");
  if (prefix.find('f') != std::string_view::npos) unsupported("an f-string");
  const bool raw = prefix.find('r') != std::string_view::npos;
  const char quote = at();
  const bool triple = at(1) == quote && at(2) == quote;
  pos_ += triple ? 3 : 1;
  std::string value;
  while (true) {
    if (done()) syntax_error(origin_, t.line, t.col, "unterminated string literal");
    const char c = src_[pos_];
    if (c == quote && (!triple || (at(1) == quote && at(2) == quote))) {
      pos_ += triple ? 3 : 1;
      break;
    }
    if (c == '\n' && !triple) syntax_error(origin_, t.line, t.col, "unterminated string literal");
    if (c == '\\' && !raw) {
      escape(value);
      continue;
    }
    value += c;
    ++pos_;
    if (c == '\n') newline();
    if (c == '\\' && !done()) {  // a raw string keeps the backslash and the character after it
      value += src_[pos_];
      if (src_[pos_++] == '\n') newline();
    }
  }
  t.text = std::move(value);
  out_.push_back(std::move(t));
}

void Lexer::hex_escape(std::string& value, int count) {
  uint32_t cp = 0;
  for (int k = 0; k < count; ++k) {
    if (std::isxdigit(static_cast<unsigned char>(at())) == 0) syntax("truncated \\x, \\u or \\U escape");
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[pos_++])));
    cp = cp * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  if (cp > 0x10FFFF) syntax("illegal Unicode character");
  append_utf8(value, cp);
}

void Lexer::escape(std::string& value) {
  ++pos_;  // the backslash
  if (done()) syntax("unterminated string literal");
  const char e = src_[pos_++];
  switch (e) {
    case '\n':
      return newline();
    case '\\':
    case '\'':
    case '"':
      value += e;
      return;
    case 'a':
      value += '\a';
      return;
    case 'b':
      value += '\b';
      return;
    case 'f':
      value += '\f';
      return;
    case 'n':
      value += '\n';
      return;
    case 'r':
      value += '\r';
      return;
    case 't':
      value += '\t';
      return;
    case 'v':
      value += '\v';
      return;
    case 'x':
      return hex_escape(value, 2);
    case 'u':
      return hex_escape(value, 4);
    case 'U':
      return hex_escape(value, 8);
    case 'N':
      unsupported("a \\N{...} escape");
    default:
      break;
  }
  if (e >= '0' && e <= '7') {
    uint32_t cp = static_cast<uint32_t>(e - '0');
    for (int k = 0; k < 2 && at() >= '0' && at() <= '7'; ++k) cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
    return append_utf8(value, cp);
  }
  value += '\\';  // Python keeps an unknown escape as written
  value += e;
}

void Lexer::op() {
  static const char* const kOps[] = {
      "**=", "//=", ">>=", "<<=", "...", "!=", "%=", "&=", "**", "*=", "+=", "-=", "->", "//", "/=", ":=",
      "<<",  "<=",  "==",  ">=",  ">>",  "@=", "^=", "|=", "(",  ")",  "[",  "]",  "{",  "}",  ",",  ":",
      ".",   ";",   "+",   "-",   "*",   "/",  "%",  "&",  "|",  "^",  "~",  "<",  ">",  "=",  "@"};
  Token t = start(Tok::kOp);
  for (const char* candidate : kOps) {
    if (src_.substr(pos_, std::strlen(candidate)) == candidate) {
      t.text = candidate;
      break;
    }
  }
  if (t.text.empty()) syntax(std::string("invalid character '") + at() + "'");
  pos_ += t.text.size();
  const char c = t.text[0];
  if (t.text.size() == 1 && (c == '(' || c == '[' || c == '{')) {
    if (static_cast<int>(brackets_.size()) >= kMaxNesting) nesting_exceeded(origin_, t.line, t.col);
    brackets_.push_back(t);
  } else if (t.text.size() == 1 && (c == ')' || c == ']' || c == '}')) {
    if (brackets_.empty()) syntax_error(origin_, t.line, t.col, "unmatched '" + t.text + "'");
    const char open = brackets_.back().text[0];
    if ((open == '(' && c != ')') || (open == '[' && c != ']') || (open == '{' && c != '}')) {
      syntax_error(origin_, t.line, t.col, "closing '" + t.text + "' does not match opening '" + open + "'");
    }
    brackets_.pop_back();
  }
  out_.push_back(std::move(t));
}

}  // namespace

// =========================================================================================================
// Syntax tree and parser

namespace detail {

enum class NodeKind : uint8_t {
  // expressions
  kConst,
  kName,
  kList,
  kTuple,
  kDict,  // kids: key, value, key, value, ...
  kAnd,
  kOr,
  kNot,
  kCompare,  // kids: operands; ops: one fewer comparison
  kBinary,
  kUnary,
  kIfExp,  // kids: body, test, orelse
  kAttribute,
  kSubscript,  // kids: object, index (a kSlice for a[b:c])
  kSlice,      // kids: lower, upper, step (None constants when absent)
  kCall,       // kids: function, positional..., keyword...; names: the keywords
  // statements
  kExprStmt,
  kAssign,     // kids: targets..., value
  kAugAssign,  // kids: target, value; op
  kIf,         // kids: test, block, test, block, ..., [else block]
  kFor,        // kids: target, iterable, block, [else block]
  kBreak,
  kContinue,
  kPass,
  kImport,  // names: the names bound to dataclasses.replace
  kBlock,
};

struct Node {
  NodeKind kind = NodeKind::kConst;
  uint8_t op = 0;
  int line = 0;
  int col = 0;
  int depth = 1;
  std::string name;
  Value constant;
  std::vector<Node> kids;
  std::vector<uint8_t> ops;
  std::vector<std::string> names;
};

struct Code {
  std::string origin;
  Node root;
};

}  // namespace detail

namespace {

using detail::Node;
using detail::NodeKind;

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kBitOr, kBitXor, kBitAnd };
enum class UnOp : uint8_t { kNeg, kPos, kInvert };

const char* binop_symbol(BinOp op) {
  static const char* const kSymbols[] = {"+", "-", "*", "/", "//", "%", "**", "|", "^", "&"};
  return kSymbols[static_cast<int>(op)];
}

// A set of names from one space-separated list (the tables below are long).
std::unordered_set<std::string_view> name_set(std::string_view names) {
  std::unordered_set<std::string_view> set;
  for (size_t start = 0; start < names.size();) {
    const size_t end = std::min(names.find(' ', start), names.size());
    set.insert(names.substr(start, end - start));
    start = end + 1;
  }
  return set;
}

const std::unordered_set<std::string_view>& python_keywords() {
  static const std::unordered_set<std::string_view> kKeywords = name_set(
      "False None True and as assert async await break class continue def del elif else except finally for from global "
      "if import in is lambda nonlocal not or pass raise return try while with yield");
  return kKeywords;
}

bool is_keyword(std::string_view word) { return python_keywords().count(word) != 0; }

// Keywords that start constructs the subset leaves out (rather than plain syntax errors).
bool is_unsupported_keyword(std::string_view word) {
  static const std::unordered_set<std::string_view> kWords =
      name_set("lambda await yield import def class while try with del global nonlocal assert raise return async");
  return kWords.count(word) != 0;
}

bool is_dunder(std::string_view name) {
  return name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
}

// Builtins that reach outside the expression (code execution, files, introspection, the process) are
// refused when parsed, whatever the scope holds.
bool is_forbidden_builtin(std::string_view name) {
  static const std::unordered_set<std::string_view> kNames =
      name_set("eval exec compile open globals locals vars getattr setattr delattr input breakpoint exit quit help");
  return kNames.count(name) != 0;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kName:
    case Tok::kOp:
      return "'" + t.text + "'";
    case Tok::kInt:
    case Tok::kFloat:
      return "a number";
    case Tok::kString:
      return "a string";
    case Tok::kNewline:
      return "the end of the line";
    case Tok::kIndent:
      return "an indented line";
    case Tok::kDedent:
      return "a dedented line";
    default:
      return "the end of the code";
  }
}

template <class... Nodes>
std::vector<Node> kids_of(Nodes&&... nodes) {
  std::vector<Node> kids;
  kids.reserve(sizeof...(nodes));
  (kids.push_back(std::forward<Nodes>(nodes)), ...);
  return kids;
}

// Recursive descent over Python's grammar, restricted to the subset. Constructs outside it are reported
// as Unsupported where they are recognised, everything else that is not Python as a syntax error.
class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& origin) : toks_(std::move(tokens)), origin_(origin) {}
  Node expression_root();
  Node program_root();

 private:
  std::vector<Token> toks_;
  const std::string& origin_;
  size_t pos_ = 0;
  int nesting_ = 0;
  int loops_ = 0;

  struct Nest {  // bounds the parser's recursion
    Parser& parser;
    Nest(Parser& p, const Token& at) : parser(p) {
      if (++parser.nesting_ > kMaxNesting) nesting_exceeded(parser.origin_, at.line, at.col);
    }
    ~Nest() { --parser.nesting_; }
  };

  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    const Token& t = peek(ahead);
    return t.kind == Tok::kOp && t.text == op;
  }
  bool is_kw(const char* word) const { return peek().kind == Tok::kName && peek().text == word; }
  bool accept_op(const char* op) { return is_op(op) ? (advance(), true) : false; }
  bool accept_kw(const char* word) { return is_kw(word) ? (advance(), true) : false; }
  const Token& expect_op(const char* op) {
    if (!is_op(op)) syntax(peek(), std::string("expected '") + op + "' but found " + describe(peek()));
    return advance();
  }
  [[noreturn]] void syntax(const Token& t, const std::string& what) const {
    syntax_error(origin_, t.line, t.col, what);
  }
  [[noreturn]] void unsupported(const Token& t, const std::string& what) const {
    throw Unsupported(origin_, t.line, t.col, what);
  }
  Node make(NodeKind kind, const Token& at, std::vector<Node> kids = {}) const;
  bool at_expression_start() const;

  Node star_expressions();
  Node expression();
  Node bool_chain(bool is_or);
  Node inversion();
  Node comparison();
  std::optional<Cmp> comparison_op();
  Node binary(int level);
  std::optional<BinOp> binary_op(int level, const Token& t) const;
  Node factor();
  Node power();
  Node primary();
  Node call(Node function);
  Node subscript(Node object);
  Node slice(const Token& at, Node lower);
  Node atom();
  Node name_atom();
  Node strings();
  Node paren_atom();
  Node list_atom();
  Node brace_atom();

  Node statement();
  Node simple_statements();
  Node simple_statement();
  Node assignment(Node first, const Token& at);
  Node import_from();
  Node if_statement();
  Node for_statement();
  Node target_list();
  Node block();
  void check_target(const Node& target, bool augmented) const;
};

Node Parser::make(NodeKind kind, const Token& at, std::vector<Node> kids) const {
  Node n;
  n.kind = kind;
  n.line = at.line;
  n.col = at.col;
  for (const Node& kid : kids) n.depth = std::max(n.depth, kid.depth + 1);
  if (n.depth > kMaxNesting) nesting_exceeded(origin_, at.line, at.col);
  n.kids = std::move(kids);
  return n;
}

bool Parser::at_expression_start() const {
  const Token& t = peek();
  switch (t.kind) {
    case Tok::kInt:
    case Tok::kFloat:
    case Tok::kString:
      return true;
    case Tok::kName:
      return !is_keyword(t.text) || t.text == "True" || t.text == "False" || t.text == "None" || t.text == "not" ||
             t.text == "lambda" || t.text == "await" || t.text == "yield";
    case Tok::kOp:
      return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" || t.text == "+" || t.text == "~" ||
             t.text == "*" || t.text == "...";
    default:
      return false;
  }
}

Node Parser::expression_root() {
  Node e = star_expressions();
  while (peek().kind == Tok::kNewline) advance();
  if (peek().kind != Tok::kEnd) syntax(peek(), "unexpected " + describe(peek()) + " after the expression");
  return e;
}

// `a, b` without brackets is a tuple, as in `x = 1, 2` and eval("1, 2").
Node Parser::star_expressions() {
  const Token& at = peek();
  Node first = expression();
  if (!is_op(",")) return first;
  std::vector<Node> items = kids_of(std::move(first));
  while (accept_op(",") && at_expression_start()) items.push_back(expression());
  return make(NodeKind::kTuple, at, std::move(items));
}

Node Parser::expression() {
  const Token& at = peek();
  Nest nest(*this, at);
  Node body = bool_chain(true);
  if (is_op(":=")) unsupported(peek(), "an assignment expression (:=)");
  if (!accept_kw("if")) return body;
  Node test = bool_chain(true);
  if (!accept_kw("else")) syntax(peek(), "expected 'else' in a conditional expression");
  Node orelse = expression();
  return make(NodeKind::kIfExp, at, kids_of(std::move(body), std::move(test), std::move(orelse)));
}

Node Parser::bool_chain(bool is_or) {
  const Token& at = peek();
  const char* word = is_or ? "or" : "and";
  Node first = is_or ? bool_chain(false) : inversion();
  if (!is_kw(word)) return first;
  std::vector<Node> operands = kids_of(std::move(first));
  while (accept_kw(word)) operands.push_back(is_or ? bool_chain(false) : inversion());
  return make(is_or ? NodeKind::kOr : NodeKind::kAnd, at, std::move(operands));
}

Node Parser::inversion() {
  if (!is_kw("not")) return comparison();
  const Token& at = advance();
  Nest nest(*this, at);
  return make(NodeKind::kNot, at, kids_of(inversion()));
}

std::optional<Cmp> Parser::comparison_op() {
  static const std::pair<const char*, Cmp> kOps[] = {{"<", Cmp::kLt},  {"<=", Cmp::kLe}, {">", Cmp::kGt},
                                                     {">=", Cmp::kGe}, {"==", Cmp::kEq}, {"!=", Cmp::kNe}};
  for (const auto& [text, op] : kOps) {
    if (accept_op(text)) return op;
  }
  if (accept_kw("in")) return Cmp::kIn;
  if (is_kw("not") && peek(1).kind == Tok::kName && peek(1).text == "in") {
    advance();
    advance();
    return Cmp::kNotIn;
  }
  if (accept_kw("is")) return accept_kw("not") ? Cmp::kIsNot : Cmp::kIs;
  return std::nullopt;
}

Node Parser::comparison() {
  const Token& at = peek();
  Node first = binary(0);
  std::optional<Cmp> op = comparison_op();
  if (!op) return first;
  std::vector<Node> operands = kids_of(std::move(first));
  std::vector<uint8_t> ops;
  for (; op; op = comparison_op()) {
    ops.push_back(static_cast<uint8_t>(*op));
    operands.push_back(binary(0));
  }
  Node n = make(NodeKind::kCompare, at, std::move(operands));
  n.ops = std::move(ops);
  return n;
}

constexpr int kBinaryLevels = 6;  // | ^ & shifts +- */ (loosest first)

std::optional<BinOp> Parser::binary_op(int level, const Token& t) const {
  if (t.kind != Tok::kOp) return std::nullopt;
  const std::string& s = t.text;
  switch (level) {
    case 0:
      return s == "|" ? std::optional(BinOp::kBitOr) : std::nullopt;
    case 1:
      return s == "^" ? std::optional(BinOp::kBitXor) : std::nullopt;
    case 2:
      return s == "&" ? std::optional(BinOp::kBitAnd) : std::nullopt;
    case 3:
      if (s == "<<" || s == ">>") unsupported(t, "the shift operator " + s);
      return std::nullopt;
    case 4:
      return s == "+" ? std::optional(BinOp::kAdd) : s == "-" ? std::optional(BinOp::kSub) : std::nullopt;
    default:
      if (s == "@") unsupported(t, "the matrix multiplication operator @");
      if (s == "*") return BinOp::kMul;
      if (s == "/") return BinOp::kDiv;
      if (s == "//") return BinOp::kFloorDiv;
      if (s == "%") return BinOp::kMod;
      return std::nullopt;
  }
}

// Left-associative binary operators, one precedence level per call.
Node Parser::binary(int level) {
  if (level == kBinaryLevels) return factor();
  Node left = binary(level + 1);
  while (std::optional<BinOp> op = binary_op(level, peek())) {
    const Token& at = advance();
    Node right = binary(level + 1);
    Node n = make(NodeKind::kBinary, at, kids_of(std::move(left), std::move(right)));
    n.op = static_cast<uint8_t>(*op);
    left = std::move(n);
  }
  return left;
}

Node Parser::factor() {
  if (!is_op("-") && !is_op("+") && !is_op("~")) return power();
  const Token& at = advance();
  Nest nest(*this, at);
  Node n = make(NodeKind::kUnary, at, kids_of(factor()));
  n.op = static_cast<uint8_t>(at.text == "-" ? UnOp::kNeg : at.text == "+" ? UnOp::kPos : UnOp::kInvert);
  return n;
}

// `**` binds tighter than a unary minus on its left and is right-associative: -2**2 == -(2**2).
Node Parser::power() {
  Node base = primary();
  if (!is_op("**")) return base;
  const Token& at = advance();
  Nest nest(*this, at);
  Node n = make(NodeKind::kBinary, at, kids_of(std::move(base), factor()));
  n.op = static_cast<uint8_t>(BinOp::kPow);
  return n;
}

Node Parser::primary() {
  Node n = atom();
  while (true) {
    if (is_op(".")) {
      advance();
      const Token& attr = advance();
      if (attr.kind != Tok::kName || is_keyword(attr.text)) syntax(attr, "expected an attribute name after '.'");
      if (is_dunder(attr.text)) unsupported(attr, "the dunder attribute ." + attr.text);
      Node a = make(NodeKind::kAttribute, attr, kids_of(std::move(n)));
      a.name = attr.text;
      n = std::move(a);
    } else if (is_op("(")) {
      n = call(std::move(n));
    } else if (is_op("[")) {
      n = subscript(std::move(n));
    } else {
      return n;
    }
  }
}

Node Parser::call(Node function) {
  const Token& at = advance();  // (
  std::vector<Node> kids = kids_of(std::move(function));
  std::vector<std::string> keywords;
  while (!is_op(")")) {
    if (is_op("*") || is_op("**")) unsupported(peek(), "argument unpacking (*args, **kwargs)");
    if (peek().kind == Tok::kName && is_op("=", 1) && !is_keyword(peek().text)) {
      const Token& key = advance();
      advance();
      if (std::find(keywords.begin(), keywords.end(), key.text) != keywords.end()) {
        syntax(key, "keyword argument repeated: " + key.text);
      }
      keywords.push_back(key.text);
      kids.push_back(expression());
    } else {
      if (!keywords.empty()) syntax(peek(), "positional argument follows keyword argument");
      kids.push_back(expression());
      if (is_kw("for")) unsupported(peek(), "a generator expression");
    }
    if (!accept_op(",")) break;
  }
  expect_op(")");
  Node n = make(NodeKind::kCall, at, std::move(kids));
  n.names = std::move(keywords);
  return n;
}

Node Parser::subscript(Node object) {
  const Token& at = advance();  // [
  Node index;
  if (is_op(":")) {
    Node none = make(NodeKind::kConst, at);
    index = slice(at, std::move(none));
  } else {
    index = star_expressions();
    if (is_op(":")) index = slice(at, std::move(index));
  }
  expect_op("]");
  return make(NodeKind::kSubscript, at, kids_of(std::move(object), std::move(index)));
}

Node Parser::slice(const Token& at, Node lower) {
  expect_op(":");
  Node upper = is_op(":") || is_op("]") ? make(NodeKind::kConst, at) : expression();
  Node step = make(NodeKind::kConst, at);
  if (accept_op(":") && !is_op("]")) step = expression();
  if (is_op(",")) unsupported(peek(), "a multi-dimensional subscript");
  return make(NodeKind::kSlice, at, kids_of(std::move(lower), std::move(upper), std::move(step)));
}

Node Parser::atom() {
  const Token& t = peek();
  switch (t.kind) {
    case Tok::kInt:
    case Tok::kFloat: {
      advance();
      Node n = make(NodeKind::kConst, t);
      n.constant = t.kind == Tok::kInt ? Value::integer(t.int_value) : Value::real(t.float_value);
      return n;
    }
    case Tok::kString:
      return strings();
    case Tok::kName:
      return name_atom();
    case Tok::kOp:
      if (t.text == "(") return paren_atom();
      if (t.text == "[") return list_atom();
      if (t.text == "{") return brace_atom();
      if (t.text == "...") unsupported(t, "Ellipsis (...)");
      if (t.text == "*") unsupported(t, "a starred expression");
      break;
    default:
      break;
  }
  syntax(t, "unexpected " + describe(t));
}

Node Parser::name_atom() {
  const Token& t = advance();
  if (t.text == "True" || t.text == "False" || t.text == "None") {
    Node n = make(NodeKind::kConst, t);
    if (t.text != "None") n.constant = Value::boolean(t.text == "True");
    return n;
  }
  if (is_keyword(t.text)) {
    if (is_unsupported_keyword(t.text)) unsupported(t, "'" + t.text + "'");
    syntax(t, "unexpected '" + t.text + "'");
  }
  if (is_dunder(t.text)) unsupported(t, "the dunder name " + t.text);
  if (is_forbidden_builtin(t.text)) unsupported(t, "the builtin " + t.text + "()");
  Node n = make(NodeKind::kName, t);
  n.name = t.text;
  return n;
}

Node Parser::strings() {  // adjacent literals concatenate: 'a' "b" == 'ab'
  const Token& at = peek();
  std::string text;
  while (peek().kind == Tok::kString) text += advance().text;
  Node n = make(NodeKind::kConst, at);
  n.constant = Value::string(std::move(text));
  return n;
}

Node Parser::paren_atom() {
  const Token& at = advance();  // (
  if (accept_op(")")) return make(NodeKind::kTuple, at);
  if (is_kw("yield")) unsupported(peek(), "'yield'");
  Node first = expression();
  if (is_kw("for")) unsupported(peek(), "a generator expression");
  if (accept_op(")")) return first;
  if (!is_op(",")) syntax(peek(), "expected ')' but found " + describe(peek()));
  std::vector<Node> items = kids_of(std::move(first));
  while (accept_op(",") && !is_op(")")) items.push_back(expression());
  expect_op(")");
  return make(NodeKind::kTuple, at, std::move(items));
}

Node Parser::list_atom() {
  const Token& at = advance();  // [
  std::vector<Node> items;
  while (!is_op("]")) {
    items.push_back(expression());
    if (is_kw("for")) unsupported(peek(), "a list comprehension");
    if (!accept_op(",")) break;
  }
  expect_op("]");
  return make(NodeKind::kList, at, std::move(items));
}

Node Parser::brace_atom() {
  const Token& at = advance();  // {
  std::vector<Node> kids;
  while (!is_op("}")) {
    if (is_op("**")) unsupported(peek(), "dict unpacking (**)");
    kids.push_back(expression());
    if (is_kw("for")) unsupported(peek(), "a set comprehension");
    if (!is_op(":")) unsupported(at, "a set");
    advance();
    kids.push_back(expression());
    if (is_kw("for")) unsupported(peek(), "a dict comprehension");
    if (!accept_op(",")) break;
  }
  expect_op("}");
  return make(NodeKind::kDict, at, std::move(kids));
}

}  // namespace

namespace {

Node Parser::program_root() {
  const Token& at = peek();
  std::vector<Node> body;
  while (peek().kind != Tok::kEnd) body.push_back(statement());
  return make(NodeKind::kBlock, at, std::move(body));
}

Node Parser::statement() {
  const Token& t = peek();
  if (t.kind == Tok::kIndent) syntax(t, "unexpected indent");
  if (t.kind == Tok::kName) {
    if (t.text == "if") return if_statement();
    if (t.text == "for") return for_statement();
    if (t.text == "while" || t.text == "def" || t.text == "class" || t.text == "try" || t.text == "with" ||
        t.text == "async") {
      unsupported(t, "the '" + t.text + "' statement");
    }
  }
  return simple_statements();
}

// simple statements separated by ';' up to the end of the line
Node Parser::simple_statements() {
  const Token& at = peek();
  std::vector<Node> statements;
  do {
    statements.push_back(simple_statement());
  } while (accept_op(";") && peek().kind != Tok::kNewline && peek().kind != Tok::kEnd);
  if (peek().kind == Tok::kNewline) {
    advance();
  } else if (peek().kind != Tok::kEnd) {
    syntax(peek(), "unexpected " + describe(peek()));
  }
  if (statements.size() == 1) return std::move(statements[0]);
  return make(NodeKind::kBlock, at, std::move(statements));
}

std::optional<BinOp> augmented_op(const Token& t) {
  static const std::pair<const char*, BinOp> kOps[] = {
      {"+=", BinOp::kAdd},       {"-=", BinOp::kSub},   {"*=", BinOp::kMul},  {"/=", BinOp::kDiv},
      {"//=", BinOp::kFloorDiv}, {"%=", BinOp::kMod},   {"**=", BinOp::kPow}, {"|=", BinOp::kBitOr},
      {"^=", BinOp::kBitXor},    {"&=", BinOp::kBitAnd}};
  if (t.kind != Tok::kOp) return std::nullopt;
  for (const auto& [text, op] : kOps) {
    if (t.text == text) return op;
  }
  return std::nullopt;
}

Node Parser::simple_statement() {
  const Token& t = peek();
  if (t.kind == Tok::kName) {
    if (t.text == "pass") return advance(), make(NodeKind::kPass, t);
    if (t.text == "break" || t.text == "continue") {
      if (loops_ == 0) syntax(t, "'" + t.text + "' outside a loop");
      advance();
      return make(t.text == "break" ? NodeKind::kBreak : NodeKind::kContinue, t);
    }
    if (t.text == "from") return import_from();
    if (is_unsupported_keyword(t.text) && t.text != "lambda" && t.text != "await" && t.text != "yield") {
      unsupported(t, "the '" + t.text + "' statement");
    }
  }
  Node first = star_expressions();
  if (is_op("=")) return assignment(std::move(first), t);
  if (std::optional<BinOp> op = augmented_op(peek())) {
    const Token& at = advance();
    check_target(first, true);
    Node n = make(NodeKind::kAugAssign, at, kids_of(std::move(first), star_expressions()));
    n.op = static_cast<uint8_t>(*op);
    return n;
  }
  if (is_op("<<=") || is_op(">>=") || is_op("@=")) unsupported(peek(), "the operator " + peek().text);
  if (is_op(":")) unsupported(peek(), "an annotated assignment");
  return make(NodeKind::kExprStmt, t, kids_of(std::move(first)));
}

Node Parser::assignment(Node first, const Token& at) {
  std::vector<Node> parts = kids_of(std::move(first));
  while (accept_op("=")) parts.push_back(star_expressions());
  for (size_t i = 0; i + 1 < parts.size(); ++i) check_target(parts[i], false);
  return make(NodeKind::kAssign, at, std::move(parts));
}

void Parser::check_target(const Node& target, bool augmented) const {
  switch (target.kind) {
    case NodeKind::kName:
    case NodeKind::kAttribute:
      return;
    case NodeKind::kSubscript:
      if (target.kids[1].kind == NodeKind::kSlice) {
        throw Unsupported(origin_, target.line, target.col, "assignment to a slice");
      }
      return;
    case NodeKind::kTuple:
    case NodeKind::kList:
      if (augmented) syntax_error(origin_, target.line, target.col, "illegal target for augmented assignment");
      for (const Node& kid : target.kids) check_target(kid, false);
      return;
    default:
      syntax_error(origin_, target.line, target.col, "cannot assign to this expression");
  }
}

// The one import the rules use: `from dataclasses import replace` (optionally `as name`).
Node Parser::import_from() {
  const Token& at = advance();  // from
  if (is_op(".")) unsupported(peek(), "a relative import");
  std::string module;
  do {
    const Token& part = advance();
    if (part.kind != Tok::kName) syntax(part, "expected a module name");
    module += (module.empty() ? "" : ".") + part.text;
  } while (accept_op("."));
  if (!accept_kw("import")) syntax(peek(), "expected 'import'");
  if (module != "dataclasses") unsupported(at, "an import from module " + module);
  if (is_op("*")) unsupported(peek(), "from dataclasses import *");
  const bool parenthesized = accept_op("(");
  Node n = make(NodeKind::kImport, at);
  do {
    const Token& name = advance();
    if (name.kind != Tok::kName) syntax(name, "expected a name to import");
    if (name.text != "replace") unsupported(name, "dataclasses." + name.text);
    std::string bound = name.text;
    if (accept_kw("as")) {
      const Token& alias = advance();
      if (alias.kind != Tok::kName || is_keyword(alias.text)) syntax(alias, "expected a name after 'as'");
      bound = alias.text;
    }
    n.names.push_back(bound);
  } while (accept_op(",") && !(parenthesized && is_op(")")));
  if (parenthesized) expect_op(")");
  return n;
}

Node Parser::if_statement() {
  const Token& at = advance();  // if
  std::vector<Node> parts;
  parts.push_back(expression());
  expect_op(":");
  parts.push_back(block());
  while (accept_kw("elif")) {
    parts.push_back(expression());
    expect_op(":");
    parts.push_back(block());
  }
  if (accept_kw("else")) {
    expect_op(":");
    parts.push_back(block());
  }
  return make(NodeKind::kIf, at, std::move(parts));
}

Node Parser::for_statement() {
  const Token& at = advance();  // for
  std::vector<Node> parts;
  parts.push_back(target_list());
  if (!accept_kw("in")) syntax(peek(), "expected 'in' in a for statement");
  parts.push_back(star_expressions());
  expect_op(":");
  ++loops_;
  parts.push_back(block());
  --loops_;
  if (accept_kw("else")) {
    expect_op(":");
    parts.push_back(block());
  }
  return make(NodeKind::kFor, at, std::move(parts));
}

Node Parser::target_list() {
  const Token& at = peek();
  if (is_op("*")) unsupported(at, "a starred assignment target");
  Node first = primary();
  if (!is_op(",")) {
    check_target(first, false);
    return first;
  }
  std::vector<Node> targets = kids_of(std::move(first));
  while (accept_op(",") && !is_kw("in")) targets.push_back(primary());
  Node n = make(NodeKind::kTuple, at, std::move(targets));
  check_target(n, false);
  return n;
}

Node Parser::block() {
  if (peek().kind != Tok::kNewline) return simple_statements();  // `if x: y = 1`
  advance();
  if (peek().kind != Tok::kIndent) syntax(peek(), "expected an indented block");
  const Token& at = advance();
  std::vector<Node> body;
  while (peek().kind != Tok::kDedent && peek().kind != Tok::kEnd) body.push_back(statement());
  if (peek().kind == Tok::kDedent) advance();
  return make(NodeKind::kBlock, at, std::move(body));
}

}  // namespace

// =========================================================================================================
// Interpreter

namespace {

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

struct CallArgs {
  std::string name;  // for messages: "sorted", "dict.get"
  Value self;        // a bound method's receiver
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Evaluates one parsed snippet against a scope, counting steps, depth and created elements.
class Interpreter {
 public:
  Interpreter(const detail::Code& code, Scope& scope, const Limits& limits)
      : code_(code), scope_(scope), limits_(limits) {}
  Value eval(const Node& n);
  Flow exec(const Node& n);

  // Services for the builtins.
  void tick(size_t steps);
  void charge_items(size_t count);        // before creating `count` container elements
  void charge_string(size_t bytes);       // before creating a string of `bytes` bytes
  void check_length(size_t bytes) const;  // while building a string
  [[noreturn]] void unsupported(const std::string& what) const;
  Value call(const Value& function, CallArgs& args);
  Value binary(BinOp op, const Value& a, const Value& b);
  bool compare(Cmp op, const Value& a, const Value& b);
  std::vector<Value> iterate(const Value& iterable);  // a snapshot of the elements
  std::string to_str(const Value& v);
  std::string to_repr(const Value& v);

 private:
  const detail::Code& code_;
  Scope& scope_;
  const Limits& limits_;
  size_t steps_ = 0;
  size_t created_ = 0;
  int depth_ = 0;
  const Node* current_ = nullptr;

  struct Frame {  // one node being evaluated: counts a step and a level of depth
    Interpreter& in;
    const Node* saved;
    Frame(Interpreter& i, const Node& n) : in(i), saved(i.current_) {
      in.current_ = &n;
      if (in.depth_ >= in.limits_.max_depth) {
        in.limit("max_depth", "more than " + std::to_string(in.limits_.max_depth) + " nested levels");
      }
      in.tick(1);
      ++in.depth_;
    }
    ~Frame() {
      --in.depth_;
      in.current_ = saved;
    }
  };

  [[noreturn]] void limit(const char* name, const std::string& what) const;
  std::string where(const Node& n) const { return where_text(code_.origin, n.line, n.col); }

  Value eval_node(const Node& n);
  Value lookup(const std::string& name);
  Value eval_sequence(const Node& n);
  Value eval_dict(const Node& n);
  Value eval_bool(const Node& n);
  Value eval_compare(const Node& n);
  Value eval_subscript(const Node& n);
  Value eval_call(const Node& n);
  Value unary(UnOp op, const Value& v);
  Value concat(const Value& a, const Value& b);
  Value repeat(const Value& a, const Value& b);
  bool contains(const Value& container, const Value& item);
  bool identical(const Value& a, const Value& b) const;
  Value get_item(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& lower, const Value& upper, const Value& step);
  void set_item(const Value& obj, const Value& key, Value value);
  Value get_attribute(const Value& obj, const std::string& name);
  Value method(const Value& obj, const std::string& name);
  void set_attribute(const Value& obj, const std::string& name, Value value);

  Flow exec_node(const Node& n);
  void assign(const Node& target, const Value& value);
  void aug_assign(const Node& n);
  Value in_place(BinOp op, const Value& old, const Value& rhs);
  Flow exec_if(const Node& n);
  Flow exec_for(const Node& n);
  bool loop_body(const Node& n, const Value& item, bool& broke);
};

struct BuiltinDef {
  const char* name;
  Value (*impl)(Interpreter&, CallArgs&);
  bool is_type = false;
};
const std::vector<BuiltinDef>& builtin_table();
int builtin_index(std::string_view name);
const Value* global_builtin(std::string_view name);

void Interpreter::limit(const char* name, const std::string& what) const {
  const std::string at = current_ != nullptr ? where(*current_) : code_.origin;
  throw LimitExceeded(name, at + ": rule code exceeded " + name + ": " + what);
}

void Interpreter::tick(size_t steps) {
  steps_ += std::min(steps, static_cast<size_t>(std::numeric_limits<long>::max()));
  if (steps_ > static_cast<size_t>(std::max(limits_.max_steps, 0L))) {
    limit("max_steps", "more than " + std::to_string(limits_.max_steps) + " steps");
  }
}

void Interpreter::charge_items(size_t count) {
  if (count > limits_.max_items || created_ + count > limits_.max_items) {
    limit("max_items", "more than " + std::to_string(limits_.max_items) + " elements");
  }
  created_ += count;
  tick(count);
}

void Interpreter::check_length(size_t bytes) const {
  if (bytes > limits_.max_string) {
    limit("max_string", "a string of more than " + std::to_string(limits_.max_string) + " bytes");
  }
}

void Interpreter::charge_string(size_t bytes) {
  check_length(bytes);
  charge_items(bytes / 16);
}

void Interpreter::unsupported(const std::string& what) const {
  if (current_ == nullptr) throw Unsupported(code_.origin, 1, 1, what);
  throw Unsupported(code_.origin, current_->line, current_->col, what);
}

std::string Interpreter::to_repr(const Value& v) {
  ReprOut out;
  out.cap = limits_.max_string;
  repr_into(v, out, 0);
  charge_string(out.text.size());
  return std::move(out.text);
}

std::string Interpreter::to_str(const Value& v) { return v.kind() == Kind::kString ? v.as_string() : to_repr(v); }

Value Interpreter::eval(const Node& n) {
  Frame frame(*this, n);
  try {
    return eval_node(n);
  } catch (const NotInSubset& e) {
    throw Unsupported(code_.origin, n.line, n.col, e.construct);
  } catch (const PythonError& e) {
    if (!e.where.empty()) throw;
    throw PythonError(e.type, e.message, where(n));  // the innermost node that was running raised it
  }
}

Value Interpreter::eval_node(const Node& n) {
  switch (n.kind) {
    case NodeKind::kConst:
      return n.constant;
    case NodeKind::kName:
      return lookup(n.name);
    case NodeKind::kList:
    case NodeKind::kTuple:
      return eval_sequence(n);
    case NodeKind::kDict:
      return eval_dict(n);
    case NodeKind::kAnd:
    case NodeKind::kOr:
      return eval_bool(n);
    case NodeKind::kNot:
      return Value::boolean(!truthy(eval(n.kids[0])));
    case NodeKind::kCompare:
      return eval_compare(n);
    case NodeKind::kBinary: {
      const Value a = eval(n.kids[0]);
      return binary(static_cast<BinOp>(n.op), a, eval(n.kids[1]));
    }
    case NodeKind::kUnary:
      return unary(static_cast<UnOp>(n.op), eval(n.kids[0]));
    case NodeKind::kIfExp:
      return truthy(eval(n.kids[1])) ? eval(n.kids[0]) : eval(n.kids[2]);
    case NodeKind::kAttribute:
      return get_attribute(eval(n.kids[0]), n.name);
    case NodeKind::kSubscript:
      return eval_subscript(n);
    case NodeKind::kCall:
      return eval_call(n);
    default:
      throw std::logic_error("rule_code: a statement node evaluated as an expression");
  }
}

const std::unordered_set<std::string_view>& python_builtin_names() {
  static const std::unordered_set<std::string_view> kNames = name_set(
      "aiter anext ascii bin breakpoint bytearray bytes callable chr classmethod compile complex copyright credits "
      "delattr dir divmod enumerate eval exec exit filter format frozenset getattr globals hasattr hash help hex id "
      "input issubclass iter license locals map memoryview next object oct open ord pow print property quit repr "
      "reversed set setattr slice staticmethod super type vars zip Ellipsis NotImplemented ArithmeticError "
      "AssertionError AttributeError BaseException Exception IndexError KeyError LookupError NameError OverflowError "
      "RuntimeError TypeError ValueError ZeroDivisionError StopIteration");
  return kNames;
}

// Python's LOAD_NAME: locals, then globals, then builtins.
Value Interpreter::lookup(const std::string& name) {
  if (const Value* v = scope_.locals.find(name)) return *v;
  if (const Value* v = scope_.globals.find(name)) return *v;
  if (const Value* v = global_builtin(name)) return *v;
  if (python_builtin_names().count(name) != 0) unsupported("the builtin " + name);
  raise("NameError", "name '" + name + "' is not defined");
}

Value Interpreter::eval_sequence(const Node& n) {
  charge_items(n.kids.size());
  std::vector<Value> items;
  items.reserve(n.kids.size());
  for (const Node& kid : n.kids) items.push_back(eval(kid));
  return n.kind == NodeKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
}

Value Interpreter::eval_dict(const Node& n) {
  charge_items(n.kids.size() / 2);
  Value dict = Value::dict();
  for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
    Value key = eval(n.kids[i]);
    dict.set(std::move(key), eval(n.kids[i + 1]));
  }
  return dict;
}

// `and` yields the first falsy operand, `or` the first truthy one, else the last operand.
Value Interpreter::eval_bool(const Node& n) {
  const bool stop_on = n.kind == NodeKind::kOr;
  Value v;
  for (const Node& kid : n.kids) {
    v = eval(kid);
    if (truthy(v) == stop_on) return v;
  }
  return v;
}

Value Interpreter::eval_compare(const Node& n) {
  Value left = eval(n.kids[0]);
  for (size_t i = 0; i < n.ops.size(); ++i) {
    Value right = eval(n.kids[i + 1]);
    if (!compare(static_cast<Cmp>(n.ops[i]), left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

size_t cost_of(const Value& v) {
  return v.kind() == Kind::kList || v.kind() == Kind::kTuple ? v.items().size()
         : v.kind() == Kind::kDict                           ? v.entries().size()
         : v.kind() == Kind::kString                         ? v.as_string().size() / 16
                                                             : 0;
}

bool Interpreter::compare(Cmp op, const Value& a, const Value& b) {
  switch (op) {
    case Cmp::kEq:
    case Cmp::kNe:
      tick(std::min(cost_of(a), cost_of(b)));
      return py_equal(a, b, 0) == (op == Cmp::kEq);
    case Cmp::kIn:
    case Cmp::kNotIn:
      return contains(b, a) == (op == Cmp::kIn);
    case Cmp::kIs:
    case Cmp::kIsNot:
      return identical(a, b) == (op == Cmp::kIs);
    default:
      tick(std::min(cost_of(a), cost_of(b)));
      return py_order(op, a, b, 0);
  }
}

bool Interpreter::contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kDict:
      return container.find(item) != nullptr;
    case Kind::kList:
    case Kind::kTuple: {
      const std::vector<Value>& items = container.items();
      tick(items.size());
      return std::any_of(items.begin(), items.end(), [&](const Value& x) { return element_equal(x, item, 0); });
    }
    case Kind::kString:
      if (item.kind() != Kind::kString) {
        raise("TypeError", "'in <string>' requires string as left operand, not " + python_type_name(item));
      }
      tick(cost_of(container));
      return container.as_string().find(item.as_string()) != std::string::npos;
    default:
      if (special_of(container) != Special::kNone) {
        tick(special_of(container) == Special::kValues ? special_length(container) : 1);
        return special_contains(container, item);
      }
      raise("TypeError", "argument of type '" + python_type_name(container) + "' is not iterable");
  }
}

// `is`: None, True and False are singletons and mutable containers have identity, but whether two equal
// numbers, strings or tuples are one object depends on CPython's caches and constant folding, so that case
// is refused rather than guessed (one value passed around is still itself).
bool Interpreter::identical(const Value& a, const Value& b) const {
  if (a.kind() != b.kind()) return false;
  const Kind kind = a.kind();
  if (kind == Kind::kInt || kind == Kind::kFloat) unsupported("'is' between two " + python_type_name(a) + " values");
  if ((kind == Kind::kString || kind == Kind::kTuple) && !a.is(b)) {
    unsupported("'is' between two " + python_type_name(a) + " values");
  }
  return a.is(b);
}

}  // namespace

// =========================================================================================================
// Arithmetic

namespace {

[[noreturn]] void operand_error(BinOp op, const Value& a, const Value& b) {
  raise("TypeError", std::string("unsupported operand type(s) for ") + binop_symbol(op) + ": '" + python_type_name(a) +
                         "' and '" + python_type_name(b) + "'");
}

int64_t int_power(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if ((exponent & 1) != 0 && __builtin_mul_overflow(result, base, &result)) int_overflow();
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) int_overflow();
  }
  return result;
}

// Python's float `**`: 0.0 to a negative power and overflow raise, a negative base to a fractional power
// would be a complex number.
double float_power(double x, double y) {
  if (x == 0.0 && y < 0.0 && std::isfinite(y)) raise("ZeroDivisionError", "0.0 cannot be raised to a negative power");
  if (x < 0.0 && std::isfinite(x) && std::isfinite(y) && y != std::floor(y)) {
    throw NotInSubset{"a complex result (a negative number to a fractional power)"};
  }
  const double result = std::pow(x, y);
  if (std::isinf(result) && std::isfinite(x) && std::isfinite(y)) {
    raise("OverflowError", "(34, 'Numerical result out of range')");
  }
  return result;
}

// Python's floor division and modulo on floats: the remainder takes the divisor's sign.
std::pair<double, double> float_divmod(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv = 0.0;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return {floordiv, mod};
}

Value int_arithmetic(BinOp op, int64_t x, int64_t y) {
  int64_t r = 0;
  switch (op) {
    case BinOp::kAdd:
      if (__builtin_add_overflow(x, y, &r)) int_overflow();
      return Value::integer(r);
    case BinOp::kSub:
      if (__builtin_sub_overflow(x, y, &r)) int_overflow();
      return Value::integer(r);
    case BinOp::kMul:
      if (__builtin_mul_overflow(x, y, &r)) int_overflow();
      return Value::integer(r);
    case BinOp::kDiv:  // exact for |x|, |y| < 2**53; Python rounds larger ints' quotient exactly
      if (y == 0) raise("ZeroDivisionError", "division by zero");
      return Value::real(static_cast<double>(x) / static_cast<double>(y));
    case BinOp::kFloorDiv:
    case BinOp::kMod: {
      if (y == 0) raise("ZeroDivisionError", "integer division or modulo by zero");
      if (y == -1) {
        if (op == BinOp::kMod) return Value::integer(0);
        if (x == std::numeric_limits<int64_t>::min()) int_overflow();
        return Value::integer(-x);
      }
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // round the quotient toward minus infinity
        --q;
        m += y;
      }
      return Value::integer(op == BinOp::kMod ? m : q);
    }
    case BinOp::kPow:
      if (y >= 0) return Value::integer(int_power(x, y));
      return Value::real(float_power(static_cast<double>(x), static_cast<double>(y)));
    case BinOp::kBitOr:
      return Value::integer(x | y);
    case BinOp::kBitXor:
      return Value::integer(x ^ y);
    default:
      return Value::integer(x & y);
  }
}

Value float_arithmetic(BinOp op, double x, double y) {
  switch (op) {
    case BinOp::kAdd:
      return Value::real(x + y);
    case BinOp::kSub:
      return Value::real(x - y);
    case BinOp::kMul:
      return Value::real(x * y);
    case BinOp::kDiv:
      if (y == 0.0) raise("ZeroDivisionError", "float division by zero");
      return Value::real(x / y);
    case BinOp::kFloorDiv:
      if (y == 0.0) raise("ZeroDivisionError", "float floor division by zero");
      return Value::real(float_divmod(x, y).first);
    case BinOp::kMod:
      if (y == 0.0) raise("ZeroDivisionError", "float modulo");
      return Value::real(float_divmod(x, y).second);
    default:
      return Value::real(float_power(x, y));
  }
}

bool is_bitwise(BinOp op) { return op == BinOp::kBitOr || op == BinOp::kBitXor || op == BinOp::kBitAnd; }

// bool, int and float mix as in Python: bool is an int, an int meeting a float becomes a float, `/` is
// always a float, and `|`, `^`, `&` of two bools is a bool.
Value numeric(BinOp op, const Value& a, const Value& b) {
  const bool ints = a.kind() != Kind::kFloat && b.kind() != Kind::kFloat;
  if (is_bitwise(op)) {
    if (!ints) operand_error(op, a, b);
    const Value r = int_arithmetic(op, a.as_int(), b.as_int());
    return a.kind() == Kind::kBool && b.kind() == Kind::kBool ? Value::boolean(r.as_int() != 0) : r;
  }
  if (ints) return int_arithmetic(op, a.as_int(), b.as_int());
  return float_arithmetic(op, a.as_double(), b.as_double());
}

size_t checked_product(size_t a, size_t b) {
  size_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<size_t>::max() : r;
}

}  // namespace

Value Interpreter::binary(BinOp op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numeric(op, a, b);
  const auto is_set_like = [](const Value& v) {
    return special_of(v) == Special::kKeys || special_of(v) == Special::kItems;
  };
  const bool set_like = is_set_like(a) || is_set_like(b);
  if (set_like && (op == BinOp::kBitOr || op == BinOp::kBitAnd || op == BinOp::kSub || op == BinOp::kBitXor)) {
    unsupported("a set operation on a dict view");
  }
  if (op == BinOp::kAdd) return concat(a, b);
  if (op == BinOp::kMul) return repeat(a, b);
  if (op == BinOp::kMod && a.kind() == Kind::kString) unsupported("%-formatting of strings");
  operand_error(op, a, b);
}

Value Interpreter::concat(const Value& a, const Value& b) {
  if (a.kind() != b.kind() || (a.kind() != Kind::kString && a.kind() != Kind::kList && a.kind() != Kind::kTuple)) {
    operand_error(BinOp::kAdd, a, b);
  }
  if (a.kind() == Kind::kString) {
    charge_string(a.as_string().size() + b.as_string().size());
    return Value::string(a.as_string() + b.as_string());
  }
  charge_items(a.items().size() + b.items().size());
  std::vector<Value> items = a.items();
  items.insert(items.end(), b.items().begin(), b.items().end());
  return a.kind() == Kind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
}

// str, list or tuple times an int, either way round; a count below one gives an empty sequence.
Value Interpreter::repeat(const Value& a, const Value& b) {
  const bool a_sequence = a.kind() == Kind::kString || a.kind() == Kind::kList || a.kind() == Kind::kTuple;
  const Value& seq = a_sequence ? a : b;
  const Value& count = a_sequence ? b : a;
  if (seq.kind() != Kind::kString && seq.kind() != Kind::kList && seq.kind() != Kind::kTuple) {
    operand_error(BinOp::kMul, a, b);
  }
  if (!is_int_like(count)) {
    raise("TypeError", "can't multiply sequence by non-int of type '" + python_type_name(count) + "'");
  }
  const size_t times = count.as_int() > 0 ? static_cast<size_t>(count.as_int()) : 0;
  if (seq.kind() == Kind::kString) {
    const std::string& s = seq.as_string();
    charge_string(checked_product(s.size(), times));
    std::string out;
    out.reserve(s.size() * times);
    for (size_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out));
  }
  const std::vector<Value>& items = seq.items();
  charge_items(checked_product(items.size(), times));
  std::vector<Value> out;
  out.reserve(items.size() * times);
  for (size_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.kind() == Kind::kList ? Value::list(std::move(out)) : Value::tuple(std::move(out));
}

Value Interpreter::unary(UnOp op, const Value& v) {
  static const char* const kSymbols[] = {"-", "+", "~"};
  if (v.kind() == Kind::kFloat && op != UnOp::kInvert) {
    return Value::real(op == UnOp::kNeg ? -v.as_double() : v.as_double());
  }
  if (!is_int_like(v)) {
    raise("TypeError", std::string("bad operand type for unary ") + kSymbols[static_cast<int>(op)] + ": '" +
                           python_type_name(v) + "'");
  }
  const int64_t i = v.as_int();
  if (op == UnOp::kPos) return Value::integer(i);
  if (op == UnOp::kInvert) return Value::integer(~i);
  if (i == std::numeric_limits<int64_t>::min()) int_overflow();
  return Value::integer(-i);
}

// =========================================================================================================
// Subscripts, attributes and calls

namespace {

// Starts of a string's code points, then its size: the index Python's str operations work in.
std::vector<size_t> code_point_starts(std::string_view s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size();) {
    starts.push_back(i);
    decode_utf8(s, i);
  }
  starts.push_back(s.size());
  return starts;
}

// A Python index into a sequence of `size` elements; `what` names it in IndexError ("list", "tuple", ...).
size_t sequence_index(const Value& key, size_t size, const char* what, const char* verb = "") {
  if (!is_int_like(key)) {
    raise("TypeError", std::string(what) + " indices must be integers or slices, not " + python_type_name(key));
  }
  int64_t i = key.as_int();
  if (i < 0) i += static_cast<int64_t>(size);
  if (i < 0 || i >= static_cast<int64_t>(size)) raise("IndexError", std::string(what) + verb + " index out of range");
  return static_cast<size_t>(i);
}

struct SliceRange {
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  size_t count = 0;
};

int64_t slice_bound(const Value& v, int64_t fallback) {
  if (v.is_none()) return fallback;
  if (!is_int_like(v)) raise("TypeError", "slice indices must be integers or None or have an __index__ method");
  return v.as_int();
}

// Python's slice.indices(): negative bounds count from the end, then both are clamped to the sequence.
SliceRange slice_range(const Value& lower, const Value& upper, const Value& step_value, size_t size) {
  const auto n = static_cast<int64_t>(size);
  SliceRange r;
  r.step = std::max(slice_bound(step_value, 1), -std::numeric_limits<int64_t>::max());
  if (r.step == 0) raise("ValueError", "slice step cannot be zero");
  const auto clamp = [&](const Value& v, int64_t fallback) {
    int64_t x = slice_bound(v, fallback);
    if (v.is_none()) return x;
    if (x < 0) x = std::max<int64_t>(x + n, r.step > 0 ? 0 : -1);
    return std::min<int64_t>(x, r.step > 0 ? n : n - 1);
  };
  r.start = clamp(lower, r.step > 0 ? 0 : n - 1);
  r.stop = clamp(upper, r.step > 0 ? n : -1);
  if (r.step > 0 && r.start < r.stop) r.count = static_cast<size_t>((r.stop - r.start - 1) / r.step + 1);
  if (r.step < 0 && r.start > r.stop) r.count = static_cast<size_t>((r.start - r.stop - 1) / -r.step + 1);
  return r;
}

}  // namespace

Value Interpreter::eval_subscript(const Node& n) {
  const Value obj = eval(n.kids[0]);
  const Node& index = n.kids[1];
  if (index.kind != NodeKind::kSlice) return get_item(obj, eval(index));
  const Value lower = eval(index.kids[0]);
  const Value upper = eval(index.kids[1]);
  return slice(obj, lower, upper, eval(index.kids[2]));
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kList:
    case Kind::kTuple: {
      const std::vector<Value>& items = obj.items();
      return items[sequence_index(key, items.size(), obj.kind() == Kind::kList ? "list" : "tuple")];
    }
    case Kind::kString: {
      const std::string& s = obj.as_string();
      if (all_ascii(s)) return Value::string(std::string(1, s[sequence_index(key, s.size(), "string")]));
      const std::vector<size_t> starts = code_point_starts(s);
      const size_t i = sequence_index(key, starts.size() - 1, "string");
      return Value::string(s.substr(starts[i], starts[i + 1] - starts[i]));
    }
    case Kind::kDict:
      return obj.get(key);
    default:
      if (special_of(obj) == Special::kRange) {
        return special_element(obj, sequence_index(key, special_length(obj), "range object"));
      }
      raise("TypeError", "'" + python_type_name(obj) + "' object is not subscriptable");
  }
}

Value Interpreter::slice(const Value& obj, const Value& lower, const Value& upper, const Value& step) {
  if (obj.kind() == Kind::kList || obj.kind() == Kind::kTuple) {
    const std::vector<Value>& items = obj.items();
    const SliceRange r = slice_range(lower, upper, step, items.size());
    charge_items(r.count);
    std::vector<Value> out;
    out.reserve(r.count);
    for (size_t k = 0; k < r.count; ++k)
      out.push_back(items[static_cast<size_t>(r.start + static_cast<int64_t>(k) * r.step)]);
    return obj.kind() == Kind::kList ? Value::list(std::move(out)) : Value::tuple(std::move(out));
  }
  if (obj.kind() == Kind::kString) {
    const std::string& s = obj.as_string();
    const std::vector<size_t> starts = code_point_starts(s);
    const SliceRange r = slice_range(lower, upper, step, starts.size() - 1);
    charge_string(std::min(s.size(), checked_product(r.count, 4)));
    std::string out;
    for (size_t k = 0; k < r.count; ++k) {
      const auto i = static_cast<size_t>(r.start + static_cast<int64_t>(k) * r.step);
      out.append(s, starts[i], starts[i + 1] - starts[i]);
    }
    return Value::string(std::move(out));
  }
  if (special_of(obj) == Special::kRange) {  // a range again, as Python computes it
    const RangeBounds range = range_bounds(obj);
    const SliceRange r = slice_range(lower, upper, step, range.length);
    const __int128 start = range.start + static_cast<__int128>(r.start) * range.step;
    const __int128 new_step = static_cast<__int128>(range.step) * r.step;
    const __int128 stop = range.start + static_cast<__int128>(r.stop) * range.step;
    const __int128 lo = std::numeric_limits<int64_t>::min();
    const __int128 hi = std::numeric_limits<int64_t>::max();
    if (start < lo || start > hi || stop < lo || stop > hi || new_step < lo || new_step > hi) int_overflow();
    return make_range(static_cast<int64_t>(start), static_cast<int64_t>(stop), static_cast<int64_t>(new_step));
  }
  if (obj.kind() == Kind::kDict) raise("TypeError", "unhashable type: 'slice'");
  raise("TypeError", "'" + python_type_name(obj) + "' object is not subscriptable");
}

void Interpreter::set_item(const Value& obj, const Value& key, Value value) {
  switch (obj.kind()) {
    case Kind::kList: {
      std::vector<Value>& items = obj.items();
      items[sequence_index(key, items.size(), "list", " assignment")] = std::move(value);
      return;
    }
    case Kind::kDict:
      if (!obj.contains(key)) charge_items(1);
      obj.set(key, std::move(value));
      return;
    default:
      raise("TypeError", "'" + python_type_name(obj) + "' object does not support item assignment");
  }
}

namespace {

const std::unordered_set<std::string_view>& python_methods(Kind kind) {
  static const std::unordered_set<std::string_view> kStr = name_set(
      "capitalize casefold center count encode endswith expandtabs find format format_map index isalnum isalpha "
      "isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper join ljust lower "
      "lstrip maketrans partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split "
      "splitlines startswith strip swapcase title translate upper zfill");
  static const std::unordered_set<std::string_view> kList =
      name_set("append clear copy count extend index insert pop remove reverse sort");
  static const std::unordered_set<std::string_view> kDict =
      name_set("clear copy fromkeys get items keys pop popitem setdefault update values");
  static const std::unordered_set<std::string_view> kTuple = name_set("count index");
  static const std::unordered_set<std::string_view> kInt =
      name_set("as_integer_ratio bit_count bit_length conjugate denominator from_bytes imag numerator real to_bytes");
  static const std::unordered_set<std::string_view> kFloat =
      name_set("as_integer_ratio conjugate fromhex hex imag is_integer real");
  static const std::unordered_set<std::string_view> kNone;
  switch (kind) {
    case Kind::kString:
      return kStr;
    case Kind::kList:
      return kList;
    case Kind::kDict:
      return kDict;
    case Kind::kTuple:
      return kTuple;
    case Kind::kInt:
    case Kind::kBool:
      return kInt;
    case Kind::kFloat:
      return kFloat;
    default:
      return kNone;
  }
}

const std::unordered_set<std::string_view>& python_math_names() {
  static const std::unordered_set<std::string_view> kNames = name_set(
      "acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist e erf erfc exp exp2 expm1 "
      "fabs factorial floor fmod frexp fsum gamma gcd hypot inf isclose isfinite isinf isnan isqrt lcm ldexp lgamma "
      "log log10 log1p log2 modf nan nextafter perm pi pow prod radians remainder sin sinh sqrt tan tanh tau trunc "
      "ulp");
  return kNames;
}

}  // namespace

Value Interpreter::get_attribute(const Value& obj, const std::string& name) {
  if (obj.kind() == Kind::kObject) {
    if (const Value* v = obj.get_attr(name)) return *v;
    const Special special = special_of(obj);
    if ((special == Special::kRange && (name == "count" || name == "index")) ||
        ((special == Special::kKeys || special == Special::kItems) && name == "isdisjoint") ||
        (special != Special::kNone && special != Special::kRange && name == "mapping")) {
      unsupported(obj.type_name() + "." + name);
    }
    raise("AttributeError", "'" + obj.type_name() + "' object has no attribute '" + name + "'");
  }
  if (obj.kind() == Kind::kModule) {
    if (const Value* v = obj.get_attr(name)) return *v;
    if (obj.type_name() == "math" && python_math_names().count(name) != 0) unsupported("math." + name);
    raise("AttributeError", "module '" + obj.type_name() + "' has no attribute '" + name + "'");
  }
  return method(obj, name);
}

// A method of a builtin type, bound to its receiver: s.update, l.append, 'x'.format, ...
Value Interpreter::method(const Value& obj, const std::string& name) {
  const std::string type = python_type_name(obj);
  const std::string qualified = (obj.kind() == Kind::kBool ? "int" : type) + "." + name;
  const int index = obj.kind() == Kind::kFunction ? -1 : builtin_index(qualified);
  if (index >= 0) return Internals::builtin_function(qualified, index, obj);
  if (python_methods(obj.kind()).count(name) != 0) unsupported("the method " + type + "." + name + "()");
  raise("AttributeError", "'" + type + "' object has no attribute '" + name + "'");
}

void Interpreter::set_attribute(const Value& obj, const std::string& name, Value value) {
  if (obj.kind() == Kind::kObject && special_of(obj) == Special::kNone) return obj.set_attr(name, std::move(value));
  if (obj.kind() == Kind::kModule) unsupported("assigning a module attribute");
  raise("AttributeError", "'" + python_type_name(obj) + "' object has no attribute '" + name + "'");
}

Value Interpreter::eval_call(const Node& n) {
  const Value function = eval(n.kids[0]);
  CallArgs args;
  const size_t positional = n.kids.size() - 1 - n.names.size();
  for (size_t i = 1; i <= positional; ++i) args.pos.push_back(eval(n.kids[i]));
  for (size_t k = 0; k < n.names.size(); ++k) args.kw.emplace_back(n.names[k], eval(n.kids[1 + positional + k]));
  return call(function, args);
}

Value Interpreter::call(const Value& function, CallArgs& args) {
  if (function.kind() != Kind::kFunction) {
    raise("TypeError", "'" + python_type_name(function) + "' object is not callable");
  }
  const FnData& fn = Internals::data<FnData>(function);
  if (fn.builtin >= 0) {
    args.name = fn.name;
    args.self = fn.self;
    return builtin_table()[static_cast<size_t>(fn.builtin)].impl(*this, args);
  }
  if (!args.kw.empty()) unsupported("keyword arguments to " + fn.name + "()");
  return fn.native(args.pos);
}

std::vector<Value> Interpreter::iterate(const Value& iterable) {
  switch (iterable.kind()) {
    case Kind::kList:
    case Kind::kTuple:
      tick(iterable.items().size());
      return iterable.items();
    case Kind::kDict: {
      std::vector<Value> keys;
      tick(iterable.entries().size());
      for (const auto& entry : iterable.entries()) keys.push_back(entry.first);
      return keys;
    }
    case Kind::kString: {
      const std::string& s = iterable.as_string();
      const std::vector<size_t> starts = code_point_starts(s);
      charge_items(starts.size() - 1);
      std::vector<Value> chars;
      for (size_t i = 0; i + 1 < starts.size(); ++i)
        chars.push_back(Value::string(s.substr(starts[i], starts[i + 1] - starts[i])));
      return chars;
    }
    default: {
      if (special_of(iterable) == Special::kNone) {
        raise("TypeError", "'" + python_type_name(iterable) + "' object is not iterable");
      }
      const size_t n = special_length(iterable);
      charge_items(n);
      std::vector<Value> items;
      items.reserve(n);
      for (size_t i = 0; i < n; ++i) items.push_back(special_element(iterable, i));
      return items;
    }
  }
}

// =========================================================================================================
// Statements

Flow Interpreter::exec(const Node& n) {
  Frame frame(*this, n);
  try {
    return exec_node(n);
  } catch (const NotInSubset& e) {
    throw Unsupported(code_.origin, n.line, n.col, e.construct);
  } catch (const PythonError& e) {
    if (!e.where.empty()) throw;
    throw PythonError(e.type, e.message, where(n));
  }
}

Flow Interpreter::exec_node(const Node& n) {
  switch (n.kind) {
    case NodeKind::kBlock:
      for (const Node& statement : n.kids) {
        const Flow flow = exec(statement);
        if (flow != Flow::kNormal) return flow;
      }
      return Flow::kNormal;
    case NodeKind::kExprStmt:
      eval(n.kids[0]);
      return Flow::kNormal;
    case NodeKind::kAssign: {
      const Value value = eval(n.kids.back());
      for (size_t i = 0; i + 1 < n.kids.size(); ++i) assign(n.kids[i], value);
      return Flow::kNormal;
    }
    case NodeKind::kAugAssign:
      aug_assign(n);
      return Flow::kNormal;
    case NodeKind::kIf:
      return exec_if(n);
    case NodeKind::kFor:
      return exec_for(n);
    case NodeKind::kBreak:
      return Flow::kBreak;
    case NodeKind::kContinue:
      return Flow::kContinue;
    case NodeKind::kImport:
      for (const std::string& name : n.names) {
        scope_.locals.set(name, Internals::builtin_function("replace", builtin_index("replace"), Value()));
      }
      return Flow::kNormal;
    default:  // kPass
      return Flow::kNormal;
  }
}

void Interpreter::assign(const Node& target, const Value& value) {
  switch (target.kind) {
    case NodeKind::kName:
      return scope_.locals.set(target.name, value);
    case NodeKind::kSubscript: {
      const Value obj = eval(target.kids[0]);
      return set_item(obj, eval(target.kids[1]), value);
    }
    case NodeKind::kAttribute:
      return set_attribute(eval(target.kids[0]), target.name, value);
    default: {  // a tuple or list of targets: unpack
      const std::vector<Value> items = iterate(value);
      if (items.size() != target.kids.size()) {
        raise("ValueError", items.size() > target.kids.size()
                                ? "too many values to unpack (expected " + std::to_string(target.kids.size()) + ")"
                                : "not enough values to unpack (expected " + std::to_string(target.kids.size()) +
                                      ", got " + std::to_string(items.size()) + ")");
      }
      for (size_t i = 0; i < items.size(); ++i) assign(target.kids[i], items[i]);
    }
  }
}

// `t op= v` evaluates t's object and key once, reads, evaluates v, combines and stores back, as Python does.
void Interpreter::aug_assign(const Node& n) {
  const Node& target = n.kids[0];
  const auto op = static_cast<BinOp>(n.op);
  if (target.kind == NodeKind::kName) {
    const Value old = lookup(target.name);
    scope_.locals.set(target.name, in_place(op, old, eval(n.kids[1])));
  } else if (target.kind == NodeKind::kSubscript) {
    const Value obj = eval(target.kids[0]);
    const Value key = eval(target.kids[1]);
    const Value old = get_item(obj, key);
    set_item(obj, key, in_place(op, old, eval(n.kids[1])));
  } else {
    const Value obj = eval(target.kids[0]);
    const Value old = get_attribute(obj, target.name);
    set_attribute(obj, target.name, in_place(op, old, eval(n.kids[1])));
  }
}

// A list's += extends it and *= repeats it in place, so every name for the list sees the change.
Value Interpreter::in_place(BinOp op, const Value& old, const Value& rhs) {
  if (old.kind() != Kind::kList || (op != BinOp::kAdd && op != BinOp::kMul)) return binary(op, old, rhs);
  std::vector<Value>& items = old.items();
  if (op == BinOp::kAdd) {
    const std::vector<Value> more = iterate(rhs);
    charge_items(more.size());
    items.insert(items.end(), more.begin(), more.end());
    return old;
  }
  if (!is_int_like(rhs)) {
    raise("TypeError", "can't multiply sequence by non-int of type '" + python_type_name(rhs) + "'");
  }
  const size_t times = rhs.as_int() > 0 ? static_cast<size_t>(rhs.as_int()) : 0;
  charge_items(checked_product(items.size(), times > 0 ? times - 1 : 0));
  const std::vector<Value> once = items;
  items.clear();
  for (size_t i = 0; i < times; ++i) items.insert(items.end(), once.begin(), once.end());
  return old;
}

Flow Interpreter::exec_if(const Node& n) {
  size_t i = 0;
  for (; i + 1 < n.kids.size(); i += 2) {
    if (truthy(eval(n.kids[i]))) return exec(n.kids[i + 1]);
  }
  return i < n.kids.size() ? exec(n.kids[i]) : Flow::kNormal;
}

bool Interpreter::loop_body(const Node& n, const Value& item, bool& broke) {
  tick(1);
  assign(n.kids[0], item);
  if (exec(n.kids[2]) != Flow::kBreak) return true;
  broke = true;
  return false;
}

// Lists are walked live, as Python does (appending while looping visits the new elements, bounded by the
// limits); a dict that changes size while looped over raises RuntimeError, as in Python.
Flow Interpreter::exec_for(const Node& n) {
  const Value iterable = eval(n.kids[1]);
  bool broke = false;
  if (iterable.kind() == Kind::kList) {
    for (size_t i = 0; i < iterable.items().size(); ++i) {
      const Value item = iterable.items()[i];
      if (!loop_body(n, item, broke)) break;
    }
  } else if (iterable.kind() == Kind::kDict || special_of(iterable) != Special::kNone) {
    // A dict or a view of one: changing the dict's size while looping raises, as in Python. A range is
    // walked without building its elements.
    const Value& dict = iterable.kind() == Kind::kDict ? iterable : view_mapping(iterable);
    const bool range = special_of(iterable) == Special::kRange;
    const size_t size = range ? special_length(iterable) : dict.entries().size();
    for (size_t i = 0; i < size; ++i) {
      if (!range && dict.entries().size() != size) break;
      const Value item = iterable.kind() == Kind::kDict ? dict.entries()[i].first : special_element(iterable, i);
      if (!loop_body(n, item, broke)) break;
    }
    if (!range && !broke && dict.entries().size() != size) {
      raise("RuntimeError", "dictionary changed size during iteration");
    }
  } else {
    for (const Value& item : iterate(iterable)) {
      if (!loop_body(n, item, broke)) break;
    }
  }
  if (!broke && n.kids.size() > 3) return exec(n.kids[3]);
  return Flow::kNormal;
}

// =========================================================================================================
// Builtin functions

namespace {

void arity(const CallArgs& a, size_t min, size_t max) {
  if (a.pos.size() >= min && a.pos.size() <= max) return;
  const std::string expected =
      min == max ? std::to_string(min) : "from " + std::to_string(min) + " to " + std::to_string(max);
  raise("TypeError",
        a.name + "() takes " + expected + " positional arguments but " + std::to_string(a.pos.size()) + " were given");
}

std::optional<Value> keyword(CallArgs& a, std::string_view key) {
  for (auto it = a.kw.begin(); it != a.kw.end(); ++it) {
    if (it->first == key) {
      Value v = std::move(it->second);
      a.kw.erase(it);
      return v;
    }
  }
  return std::nullopt;
}

void no_keywords(const CallArgs& a) {
  if (!a.kw.empty()) raise("TypeError", "'" + a.kw[0].first + "' is an invalid keyword argument for " + a.name + "()");
}

// A parameter that may be passed by position or by keyword.
std::optional<Value> param(CallArgs& a, size_t index, std::string_view key) {
  std::optional<Value> by_name = keyword(a, key);
  if (index >= a.pos.size()) return by_name;
  if (by_name)
    raise("TypeError", "argument for " + a.name + "() given by name ('" + std::string(key) + "') and position");
  return a.pos[index];
}

int64_t index_arg(const Value& v) {
  if (!is_int_like(v)) raise("TypeError", "'" + python_type_name(v) + "' object cannot be interpreted as an integer");
  return v.as_int();
}

double real_arg(const Value& v) {
  if (!v.is_number()) raise("TypeError", "must be real number, not " + python_type_name(v));
  return v.as_double();
}

int64_t float_to_int(double d) {
  if (std::isnan(d)) raise("ValueError", "cannot convert float NaN to integer");
  if (std::isinf(d)) raise("OverflowError", "cannot convert float infinity to integer");
  if (d >= 9223372036854775808.0 || d < -9223372036854775808.0) int_overflow();
  return static_cast<int64_t>(d);  // toward zero, as int() does
}

Value b_len(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  const Value& v = a.pos[0];
  if (special_of(v) != Special::kNone) {
    const size_t n = special_length(v);
    if (n > static_cast<size_t>(std::numeric_limits<int64_t>::max())) int_overflow();
    return Value::integer(static_cast<int64_t>(n));
  }
  if (v.kind() != Kind::kString && v.kind() != Kind::kList && v.kind() != Kind::kTuple && v.kind() != Kind::kDict) {
    raise("TypeError", "object of type '" + python_type_name(v) + "' has no len()");
  }
  return Value::integer(static_cast<int64_t>(v.size()));
}

Value b_abs(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  const Value& v = a.pos[0];
  if (v.kind() == Kind::kFloat) return Value::real(std::fabs(v.as_double()));
  if (!is_int_like(v)) raise("TypeError", "bad operand type for abs(): '" + python_type_name(v) + "'");
  return v.as_int() < 0 ? in.binary(BinOp::kSub, Value::integer(0), v) : Value::integer(v.as_int());
}

// round(int, negative ndigits): to a multiple of 10**-ndigits, ties to even, exactly.
Value round_int(int64_t x, int64_t ndigits) {
  if (ndigits >= 0) return Value::integer(x);
  if (ndigits < -38) return Value::integer(0);
  __int128 p = 1;
  for (int64_t k = 0; k < -ndigits; ++k) p *= 10;
  __int128 q = x / p;
  __int128 r = x % p;
  if (r < 0) {  // floor division
    r += p;
    q -= 1;
  }
  if (2 * r > p || (2 * r == p && q % 2 != 0)) q += 1;
  const __int128 result = q * p;
  if (result > std::numeric_limits<int64_t>::max() || result < std::numeric_limits<int64_t>::min()) int_overflow();
  return Value::integer(static_cast<int64_t>(result));
}

// round(): half to even; one argument gives an int. With ndigits the float is rounded on its exact binary
// value, as Python does (glibc's printf rounds the exact value half to even too).
Value b_round(Interpreter& in, CallArgs& a) {
  arity(a, 1, 2);
  const Value x = a.pos[0];
  const Value digits = param(a, 1, "ndigits").value_or(Value());
  no_keywords(a);
  if (!x.is_number()) raise("TypeError", "type " + python_type_name(x) + " doesn't define __round__ method");
  if (digits.is_none()) {
    return is_int_like(x) ? Value::integer(x.as_int()) : Value::integer(float_to_int(std::nearbyint(x.as_double())));
  }
  const int64_t n = index_arg(digits);
  if (is_int_like(x)) return round_int(x.as_int(), n);
  const double d = x.as_double();
  if (!std::isfinite(d) || n > 330) return Value::real(d);
  if (n < 0) in.unsupported("round() of a float to a negative number of digits");
  std::vector<char> buf(static_cast<size_t>(n) + 400);
  std::snprintf(buf.data(), buf.size(), "%.*f", static_cast<int>(n), d);
  return Value::real(std::strtod(buf.data(), nullptr));
}

Value key_of(Interpreter& in, const std::optional<Value>& key, const Value& item) {
  if (!key || key->is_none()) return item;
  CallArgs args;
  args.pos.push_back(item);
  return in.call(*key, args);
}

// min() and max(): of one iterable or of several arguments; the first extreme element wins, as in Python.
Value extreme(Interpreter& in, CallArgs& a, bool want_max) {
  const std::optional<Value> key = keyword(a, "key");
  const std::optional<Value> fallback = keyword(a, "default");
  no_keywords(a);
  if (a.pos.empty()) raise("TypeError", a.name + " expected at least 1 argument, got 0");
  if (a.pos.size() > 1 && fallback) {
    raise("TypeError", "Cannot specify a default for " + a.name + "() with multiple positional arguments");
  }
  const std::vector<Value> items = a.pos.size() == 1 ? in.iterate(a.pos[0]) : a.pos;
  if (items.empty()) {
    if (fallback) return *fallback;
    raise("ValueError", a.name + "() arg is an empty sequence");
  }
  Value best = items[0];
  Value best_key = key_of(in, key, best);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key_of(in, key, items[i]);
    if (in.compare(want_max ? Cmp::kGt : Cmp::kLt, k, best_key)) {
      best = items[i];
      best_key = std::move(k);
    }
  }
  return best;
}

Value b_min(Interpreter& in, CallArgs& a) { return extreme(in, a, false); }
Value b_max(Interpreter& in, CallArgs& a) { return extreme(in, a, true); }

// A stable merge sort that only asks less(a, b), as Python's sort only uses <; whatever a comparison
// answers (NaN is unordered) the result is a permutation of the input.
template <class Less>
void merge_sort(std::vector<size_t>& order, Less less) {
  std::vector<size_t> buffer(order.size());
  for (size_t width = 1; width < order.size(); width *= 2) {
    for (size_t lo = 0; lo < order.size(); lo += 2 * width) {
      const size_t mid = std::min(lo + width, order.size());
      const size_t hi = std::min(lo + 2 * width, order.size());
      size_t i = lo;
      size_t j = mid;
      size_t k = lo;
      while (i < mid && j < hi) buffer[k++] = less(order[j], order[i]) ? order[j++] : order[i++];
      while (i < mid) buffer[k++] = order[i++];
      while (j < hi) buffer[k++] = order[j++];
    }
    order.swap(buffer);
  }
}

Value b_sorted(Interpreter& in, CallArgs& a) {
  const std::optional<Value> key = keyword(a, "key");
  const bool reverse = truthy(keyword(a, "reverse").value_or(Value::boolean(false)));
  no_keywords(a);
  arity(a, 1, 1);
  std::vector<Value> items = in.iterate(a.pos[0]);
  in.charge_items(items.size());
  if (reverse) std::reverse(items.begin(), items.end());  // Python keeps equal elements in order when reversed
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) keys.push_back(key_of(in, key, item));
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  in.tick(items.size() * static_cast<size_t>(std::log2(static_cast<double>(items.size()) + 1) + 1));
  merge_sort(order, [&](size_t x, size_t y) { return in.compare(Cmp::kLt, keys[x], keys[y]); });
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(items[i]);
  if (reverse) std::reverse(sorted.begin(), sorted.end());
  return Value::list(std::move(sorted));
}

bool instance_of(const Value& v, const Value& type, int depth) {
  check_value_nesting(depth);
  if (type.kind() == Kind::kTuple) {
    return std::any_of(type.items().begin(), type.items().end(),
                       [&](const Value& t) { return instance_of(v, t, depth + 1); });
  }
  if (!is_type_object(type)) {
    raise("TypeError", "isinstance() arg 2 must be a type, a tuple of types, or a union");
  }
  const std::string& name = type.function_name();
  if (name == "int") return is_int_like(v);  // bool is an int
  if (name == "float") return v.kind() == Kind::kFloat;
  if (name == "str") return v.kind() == Kind::kString;
  if (name == "bool") return v.kind() == Kind::kBool;
  if (name == "list") return v.kind() == Kind::kList;
  if (name == "tuple") return v.kind() == Kind::kTuple;
  return v.kind() == Kind::kDict;
}

Value b_isinstance(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 2, 2);
  return Value::boolean(instance_of(a.pos[0], a.pos[1], 0));
}

bool is_py_space(uint32_t cp) {
  return cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Strips whitespace (chars == nullptr) or the given code points from either end, as str.strip() does.
std::string_view strip_view(std::string_view s, bool left, bool right, const std::vector<uint32_t>* chars) {
  const auto stripped = [&](uint32_t cp) {
    return chars != nullptr ? std::find(chars->begin(), chars->end(), cp) != chars->end() : is_py_space(cp);
  };
  size_t begin = 0;
  size_t end = s.size();
  while (left && begin < end) {
    size_t next = begin;
    if (!stripped(decode_utf8(s, next))) break;
    begin = next;
  }
  while (right && end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t next = start;
    if (!stripped(decode_utf8(s, next)) || next != end) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

// Digits with single underscores between them, as int() and float() accept; advances i past them.
size_t scan_digits(std::string_view s, size_t& i) {
  size_t count = 0;
  while (i < s.size()) {
    if (std::isdigit(static_cast<unsigned char>(s[i])) != 0) {
      ++count;
      ++i;
    } else if (s[i] == '_' && count > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      ++i;
    } else {
      break;
    }
  }
  return count;
}

std::string without_underscores(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != '_') out += c;
  }
  return out;
}

std::optional<int64_t> parse_int_text(std::string_view text) {
  const std::string_view s = strip_view(text, true, true, nullptr);
  size_t i = s.empty() || (s[0] != '+' && s[0] != '-') ? 0 : 1;
  const size_t begin = i;
  if (scan_digits(s, i) == 0 || i != s.size()) return std::nullopt;
  const std::string digits = (s[0] == '-' ? "-" : "") + without_underscores(s.substr(begin));
  int64_t value = 0;
  const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (result.ec != std::errc()) int_overflow();
  return value;
}

std::optional<double> parse_float_text(std::string_view text) {
  const std::string_view s = strip_view(text, true, true, nullptr);
  const bool negative = !s.empty() && s[0] == '-';
  const size_t begin = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  std::string word;
  for (char c : s.substr(begin)) word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (word == "inf" || word == "infinity") return negative ? -HUGE_VAL : HUGE_VAL;
  if (word == "nan") return std::nan("");
  size_t i = begin;
  size_t digits = scan_digits(s, i);
  if (i < s.size() && s[i] == '.') {
    ++i;
    digits += scan_digits(s, i);
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (scan_digits(s, i) == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const std::string clean = without_underscores(s.substr(begin));
  double value = 0;
  const auto result = std::from_chars(clean.data(), clean.data() + clean.size(), value);
  if (result.ec != std::errc()) value = std::strtod(clean.c_str(), nullptr);  // overflow to inf, underflow
  return negative ? -value : value;
}

Value b_int(Interpreter& in, CallArgs& a) {
  if (a.pos.size() > 1 || keyword(a, "base")) in.unsupported("int() with a base");
  no_keywords(a);
  if (a.pos.empty()) return Value::integer(0);
  const Value& v = a.pos[0];
  if (is_int_like(v)) return Value::integer(v.as_int());
  if (v.kind() == Kind::kFloat) return Value::integer(float_to_int(v.as_double()));
  if (v.kind() == Kind::kString) {
    if (std::optional<int64_t> i = parse_int_text(v.as_string())) return Value::integer(*i);
    raise("ValueError", "invalid literal for int() with base 10: " + in.to_repr(v));
  }
  raise("TypeError",
        "int() argument must be a string, a bytes-like object or a real number, not '" + python_type_name(v) + "'");
}

Value b_float(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 0, 1);
  if (a.pos.empty()) return Value::real(0.0);
  const Value& v = a.pos[0];
  if (v.is_number()) return Value::real(v.as_double());
  if (v.kind() == Kind::kString) {
    if (std::optional<double> d = parse_float_text(v.as_string())) return Value::real(*d);
    raise("ValueError", "could not convert string to float: " + in.to_repr(v));
  }
  raise("TypeError", "float() argument must be a string or a real number, not '" + python_type_name(v) + "'");
}

Value b_str(Interpreter& in, CallArgs& a) {
  if (a.pos.size() > 1 || !a.kw.empty()) in.unsupported("str() with an encoding");
  return Value::string(a.pos.empty() ? std::string() : in.to_str(a.pos[0]));
}

Value b_bool(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 0, 1);
  return Value::boolean(!a.pos.empty() && truthy(a.pos[0]));
}

Value b_list(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 0, 1);
  std::vector<Value> items = a.pos.empty() ? std::vector<Value>() : in.iterate(a.pos[0]);
  in.charge_items(items.size());
  return Value::list(std::move(items));
}

Value b_tuple(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 0, 1);
  std::vector<Value> items = a.pos.empty() ? std::vector<Value>() : in.iterate(a.pos[0]);
  in.charge_items(items.size());
  return Value::tuple(std::move(items));
}

// dict(m) / d.update(m): from a dict, or from an iterable of key-value pairs.
void merge_into(Interpreter& in, const Value& dict, const Value& source) {
  if (source.kind() == Kind::kDict) {
    const std::vector<std::pair<Value, Value>> entries = source.entries();  // source may be dict itself
    in.charge_items(entries.size());
    for (const auto& [key, value] : entries) dict.set(key, value);
    return;
  }
  const std::vector<Value> pairs = in.iterate(source);
  in.charge_items(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::vector<Value> pair = in.iterate(pairs[i]);
    if (pair.size() != 2) {
      raise("ValueError", "dictionary update sequence element #" + std::to_string(i) + " has length " +
                              std::to_string(pair.size()) + "; 2 is required");
    }
    dict.set(pair[0], pair[1]);
  }
}

Value b_dict(Interpreter& in, CallArgs& a) {
  arity(a, 0, 1);
  Value dict = Value::dict();
  if (!a.pos.empty()) merge_into(in, dict, a.pos[0]);
  in.charge_items(a.kw.size());
  for (auto& [key, value] : a.kw) dict.set(Value::string(key), value);
  return dict;
}

// Python 3.11's sum(): left to right with +, so float sums round as a loop would (3.12 compensates).
Value b_sum(Interpreter& in, CallArgs& a) {
  arity(a, 1, 2);
  Value total = param(a, 1, "start").value_or(Value::integer(0));
  no_keywords(a);
  if (total.kind() == Kind::kString) raise("TypeError", "sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : in.iterate(a.pos[0])) total = in.binary(BinOp::kAdd, total, item);
  return total;
}

Value b_all(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  const std::vector<Value> items = in.iterate(a.pos[0]);
  return Value::boolean(std::all_of(items.begin(), items.end(), [](const Value& v) { return truthy(v); }));
}

Value b_any(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  const std::vector<Value> items = in.iterate(a.pos[0]);
  return Value::boolean(std::any_of(items.begin(), items.end(), [](const Value& v) { return truthy(v); }));
}

// range(): a lazy range object, so `for i in range(n)` costs steps, not memory.
Value b_range(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 3);
  const int64_t start = a.pos.size() == 1 ? 0 : index_arg(a.pos[0]);
  const int64_t stop = index_arg(a.pos.size() == 1 ? a.pos[0] : a.pos[1]);
  const int64_t step = a.pos.size() == 3 ? index_arg(a.pos[2]) : 1;
  if (step == 0) raise("ValueError", "range() arg 3 must not be zero");
  return make_range(start, stop, step);
}

// dataclasses.replace(obj, **changes): a shallow copy of the dataclass fields, so containers stay shared.
Value b_replace(Interpreter& in, CallArgs& a) {
  arity(a, 1, 1);
  const Value& obj = a.pos[0];
  if (obj.kind() != Kind::kObject || special_of(obj) != Special::kNone) {
    raise("TypeError", "replace() should be called on dataclass instances");
  }
  const ObjData& data = Internals::data<ObjData>(obj);
  std::vector<std::pair<std::string, Value>> fields(data.fields.begin(),
                                                    data.fields.begin() + static_cast<std::ptrdiff_t>(data.declared));
  in.charge_items(fields.size());
  Value copy = Value::object(data.type_name, std::move(fields));
  for (auto& [name, value] : a.kw) {
    if (copy.get_attr(name) == nullptr) {
      raise("TypeError", data.type_name + ".__init__() got an unexpected keyword argument '" + name + "'");
    }
    copy.set_attr(name, value);
  }
  return copy;
}

}  // namespace

// =========================================================================================================
// math

namespace {

double positive_arg(const Value& v) {
  const double d = real_arg(v);
  if (!(d > 0.0)) {
    if (std::isnan(d)) return d;
    raise("ValueError", "math domain error");
  }
  return d;
}

Value m_log2(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  return Value::real(std::log2(positive_arg(a.pos[0])));
}

Value m_log(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 2);
  const double x = std::log(positive_arg(a.pos[0]));
  if (a.pos.size() == 1) return Value::real(x);
  const double base = std::log(positive_arg(a.pos[1]));
  if (base == 0.0) raise("ZeroDivisionError", "float division by zero");
  return Value::real(x / base);
}

Value m_round_to_int(CallArgs& a, double (*rounding)(double)) {
  no_keywords(a);
  arity(a, 1, 1);
  const Value& v = a.pos[0];
  if (is_int_like(v)) return Value::integer(v.as_int());
  return Value::integer(float_to_int(rounding(real_arg(v))));
}

Value m_ceil(Interpreter&, CallArgs& a) {
  return m_round_to_int(a, [](double d) { return std::ceil(d); });
}
Value m_floor(Interpreter&, CallArgs& a) {
  return m_round_to_int(a, [](double d) { return std::floor(d); });
}

Value m_sqrt(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  const double d = real_arg(a.pos[0]);
  if (d < 0.0) raise("ValueError", "math domain error");
  return Value::real(std::sqrt(d));
}

// math.isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0): |a-b| within rel_tol of the larger magnitude, or abs_tol.
Value m_isclose(Interpreter&, CallArgs& a) {
  const double rel_tol = real_arg(keyword(a, "rel_tol").value_or(Value::real(1e-09)));
  const double abs_tol = real_arg(keyword(a, "abs_tol").value_or(Value::real(0.0)));
  no_keywords(a);
  arity(a, 2, 2);
  const double x = real_arg(a.pos[0]);
  const double y = real_arg(a.pos[1]);
  if (rel_tol < 0.0 || abs_tol < 0.0) raise("ValueError", "tolerances must be non-negative");
  if (x == y) return Value::boolean(true);
  if (std::isinf(x) || std::isinf(y)) return Value::boolean(false);
  const double diff = std::fabs(y - x);
  return Value::boolean(diff <= std::fabs(rel_tol * y) || diff <= std::fabs(rel_tol * x) || diff <= abs_tol);
}

Value m_isnan(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  return Value::boolean(std::isnan(real_arg(a.pos[0])));
}

Value m_isinf(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  return Value::boolean(std::isinf(real_arg(a.pos[0])));
}

// =========================================================================================================
// Methods of dict, list and tuple

Value d_update(Interpreter& in, CallArgs& a) {
  arity(a, 0, 1);
  if (!a.pos.empty()) merge_into(in, a.self, a.pos[0]);
  in.charge_items(a.kw.size());
  for (auto& [key, value] : a.kw) a.self.set(Value::string(key), value);
  return Value();
}

Value d_get(Interpreter&, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 2);
  const Value* v = a.self.find(a.pos[0]);
  return v != nullptr ? *v : a.pos.size() == 2 ? a.pos[1] : Value();
}

// keys(), values() and items(): live views of the dict, as in Python.
Value dict_view(CallArgs& a, Special which) {
  no_keywords(a);
  arity(a, 0, 0);
  return make_view(a.self, which);
}

Value d_keys(Interpreter&, CallArgs& a) { return dict_view(a, Special::kKeys); }
Value d_values(Interpreter&, CallArgs& a) { return dict_view(a, Special::kValues); }
Value d_items(Interpreter&, CallArgs& a) { return dict_view(a, Special::kItems); }

Value d_pop(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 2);
  const Value* v = a.self.find(a.pos[0]);
  if (v == nullptr) {
    if (a.pos.size() == 2) return a.pos[1];
    raise("KeyError", in.to_repr(a.pos[0]));
  }
  const Value result = *v;
  in.tick(a.self.entries().size());
  a.self.erase(a.pos[0]);
  return result;
}

Value d_setdefault(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 2);
  if (const Value* v = a.self.find(a.pos[0])) return *v;
  const Value fallback = a.pos.size() == 2 ? a.pos[1] : Value();
  in.charge_items(1);
  a.self.set(a.pos[0], fallback);
  return fallback;
}

Value l_append(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  in.charge_items(1);
  a.self.items().push_back(a.pos[0]);
  return Value();
}

Value l_extend(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  const std::vector<Value> more = in.iterate(a.pos[0]);  // a snapshot, so l.extend(l) doubles l
  in.charge_items(more.size());
  a.self.items().insert(a.self.items().end(), more.begin(), more.end());
  return Value();
}

Value s_count(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  const std::vector<Value>& items = a.self.items();
  in.tick(items.size());
  return Value::integer(
      std::count_if(items.begin(), items.end(), [&](const Value& x) { return element_equal(x, a.pos[0], 0); }));
}

Value s_index(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 3);
  const std::vector<Value>& items = a.self.items();
  const Value none;
  const SliceRange r =
      slice_range(a.pos.size() > 1 ? a.pos[1] : none, a.pos.size() > 2 ? a.pos[2] : none, none, items.size());
  in.tick(r.count);
  for (size_t k = 0; k < r.count; ++k) {
    const auto i = static_cast<size_t>(r.start) + k;
    if (element_equal(items[i], a.pos[0], 0)) return Value::integer(static_cast<int64_t>(i));
  }
  if (a.self.kind() == Kind::kTuple) raise("ValueError", "tuple.index(x): x not in tuple");
  raise("ValueError", in.to_repr(a.pos[0]) + " is not in list");
}

}  // namespace

// =========================================================================================================
// Methods of str

namespace {

const std::string& str_arg(const Value& v, const std::string& what) {
  if (v.kind() != Kind::kString) raise("TypeError", what + " must be str, not " + python_type_name(v));
  return v.as_string();
}

// One replacement field of str.format(): {}, {0}, {name}, optionally with !r or !s. Format specs are not
// modelled, so `{:.2f}` is Unsupported rather than printed differently.
std::string format_field(Interpreter& in, const CallArgs& a, const std::string& field, size_t& next_auto, int& mode) {
  const size_t colon = field.find(':');
  const std::string head = field.substr(0, colon);
  if (colon != std::string::npos && colon + 1 < field.size())
    in.unsupported("the format spec '" + field.substr(colon) + "'");
  const size_t bang = head.find('!');
  const std::string name = head.substr(0, bang);
  const std::string conversion = bang == std::string::npos ? "" : head.substr(bang + 1);
  if (name.find_first_of(".[") != std::string::npos) in.unsupported("an attribute or index in a format field");
  if (conversion != "" && conversion != "r" && conversion != "s") {
    if (conversion == "a") in.unsupported("the !a conversion");
    raise("ValueError", "Unknown conversion specifier " + conversion);
  }
  const Value* arg = nullptr;
  if (name.empty() ||
      std::all_of(name.begin(), name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    const int want = name.empty() ? 1 : 2;
    if (mode != 0 && mode != want) {
      raise("ValueError", name.empty() ? "cannot switch from manual field specification to automatic field numbering"
                                       : "cannot switch from automatic field numbering to manual field specification");
    }
    mode = want;
    const size_t index = name.empty() ? next_auto++ : (name.size() > 9 ? SIZE_MAX : std::stoul(name));
    if (index >= a.pos.size()) {
      raise("IndexError", "Replacement index " + std::to_string(index) + " out of range for positional args tuple");
    }
    arg = &a.pos[index];
  } else {
    for (const auto& [key, value] : a.kw) {
      if (key == name) arg = &value;
    }
    if (arg == nullptr) raise("KeyError", "'" + name + "'");
  }
  return conversion == "r" ? in.to_repr(*arg) : in.to_str(*arg);
}

Value s_format(Interpreter& in, CallArgs& a) {
  const std::string& f = a.self.as_string();
  std::string out;
  size_t next_auto = 0;
  int mode = 0;  // 1 automatic numbering, 2 manual
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out += c;
      ++i;
    } else if (c == '}') {
      raise("ValueError", "Single '}' encountered in format string");
    } else if (c != '{') {
      out += c;
    } else {
      const size_t close = f.find_first_of("{}", i + 1);
      if (close == std::string::npos) raise("ValueError", "expected '}' before end of string");
      if (f[close] == '{') in.unsupported("a nested replacement field in a format string");
      out += format_field(in, a, f.substr(i + 1, close - i - 1), next_auto, mode);
      i = close;
    }
    in.check_length(out.size());
  }
  in.charge_string(out.size());
  return Value::string(std::move(out));
}

}  // namespace

namespace {

Value affix(Interpreter& in, CallArgs& a, bool prefix) {
  no_keywords(a);
  arity(a, 1, 3);
  if (a.pos.size() > 1) in.unsupported(a.name + "() with start or end");
  const std::string& s = a.self.as_string();
  const auto test = [&](const Value& v) {
    if (v.kind() != Kind::kString) {
      raise("TypeError", "tuple for " + a.name.substr(4) + " must only contain str, not " + python_type_name(v));
    }
    const std::string& x = v.as_string();
    return x.size() <= s.size() && s.compare(prefix ? 0 : s.size() - x.size(), x.size(), x) == 0;
  };
  const Value& arg = a.pos[0];
  if (arg.kind() == Kind::kTuple) return Value::boolean(std::any_of(arg.items().begin(), arg.items().end(), test));
  if (arg.kind() != Kind::kString) {
    raise("TypeError", a.name.substr(4) + " first arg must be str or a tuple of str, not " + python_type_name(arg));
  }
  return Value::boolean(test(arg));
}

Value s_startswith(Interpreter& in, CallArgs& a) { return affix(in, a, true); }
Value s_endswith(Interpreter& in, CallArgs& a) { return affix(in, a, false); }

Value strip(CallArgs& a, bool left, bool right) {
  no_keywords(a);
  arity(a, 0, 1);
  const std::string& s = a.self.as_string();
  if (a.pos.empty() || a.pos[0].is_none()) return Value::string(std::string(strip_view(s, left, right, nullptr)));
  const std::string& chars = str_arg(a.pos[0], a.name.substr(4) + " arg");
  std::vector<uint32_t> set;
  for (size_t i = 0; i < chars.size();) set.push_back(decode_utf8(chars, i));
  return Value::string(std::string(strip_view(s, left, right, &set)));
}

Value s_strip(Interpreter&, CallArgs& a) { return strip(a, true, true); }
Value s_lstrip(Interpreter&, CallArgs& a) { return strip(a, true, false); }
Value s_rstrip(Interpreter&, CallArgs& a) { return strip(a, false, true); }

Value change_case(Interpreter& in, CallArgs& a, bool upper) {
  no_keywords(a);
  arity(a, 0, 0);
  std::string s = a.self.as_string();
  if (!all_ascii(s)) in.unsupported(a.name + "() of non-ASCII text");
  for (char& c : s) {
    c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
  }
  return Value::string(std::move(s));
}

Value s_lower(Interpreter& in, CallArgs& a) { return change_case(in, a, false); }
Value s_upper(Interpreter& in, CallArgs& a) { return change_case(in, a, true); }

// split() on runs of whitespace: no empty pieces, and after maxsplit splits the rest is kept as it is.
std::vector<Value> split_whitespace(std::string_view s, int64_t maxsplit) {
  std::vector<Value> out;
  size_t i = 0;
  const auto skip_space = [&] {
    while (i < s.size()) {
      size_t next = i;
      if (!is_py_space(decode_utf8(s, next))) break;
      i = next;
    }
  };
  skip_space();
  while (i < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(Value::string(std::string(s.substr(i))));
      break;
    }
    size_t end = i;
    while (end < s.size()) {
      size_t next = end;
      if (is_py_space(decode_utf8(s, next))) break;
      end = next;
    }
    out.push_back(Value::string(std::string(s.substr(i, end - i))));
    i = end;
    skip_space();
  }
  return out;
}

Value s_split(Interpreter& in, CallArgs& a) {
  arity(a, 0, 2);
  const Value sep = param(a, 0, "sep").value_or(Value());
  const int64_t maxsplit = index_arg(param(a, 1, "maxsplit").value_or(Value::integer(-1)));
  no_keywords(a);
  const std::string& s = a.self.as_string();
  in.charge_items(s.size() / 2 + 1);
  if (sep.is_none()) return Value::list(split_whitespace(s, maxsplit));
  const std::string& separator = str_arg(sep, "sep");
  if (separator.empty()) raise("ValueError", "empty separator");
  std::vector<Value> out;
  size_t start = 0;
  for (size_t at = s.find(separator);
       at != std::string::npos && (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit);
       at = s.find(separator, start)) {
    out.push_back(Value::string(s.substr(start, at - start)));
    start = at + separator.size();
  }
  out.push_back(Value::string(s.substr(start)));
  return Value::list(std::move(out));
}

Value s_join(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 1, 1);
  const std::string& separator = a.self.as_string();
  const std::vector<Value> items = in.iterate(a.pos[0]);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind() != Kind::kString) {
      raise("TypeError",
            "sequence item " + std::to_string(i) + ": expected str instance, " + python_type_name(items[i]) + " found");
    }
    if (i > 0) out += separator;
    out += items[i].as_string();
    in.check_length(out.size());
  }
  in.charge_string(out.size());
  return Value::string(std::move(out));
}

Value s_replace(Interpreter& in, CallArgs& a) {
  no_keywords(a);
  arity(a, 2, 3);
  const std::string& s = a.self.as_string();
  const std::string& old = str_arg(a.pos[0], "replace() argument 1");
  const std::string& with = str_arg(a.pos[1], "replace() argument 2");
  int64_t count = a.pos.size() == 3 ? index_arg(a.pos[2]) : -1;
  std::string out;
  if (old.empty()) {  // insert `with` before every code point and at the end
    const std::vector<size_t> starts = code_point_starts(s);
    for (size_t i = 0; i + 1 < starts.size(); ++i) {
      if (count != 0) {
        out += with;
        --count;
      }
      out.append(s, starts[i], starts[i + 1] - starts[i]);
      in.check_length(out.size());
    }
    if (count != 0) out += with;
  } else {
    size_t start = 0;
    for (size_t at = s.find(old); at != std::string::npos && count != 0; at = s.find(old, start), --count) {
      out.append(s, start, at - start).append(with);
      start = at + old.size();
      in.check_length(out.size());
    }
    out.append(s, start, std::string::npos);
  }
  in.charge_string(out.size());
  return Value::string(std::move(out));
}

// =========================================================================================================
// The builtin table

// Every builtin the subset implements, by the name Python code reaches it through: a builtin, math.<name>,
// or <type>.<method> for a method. Plain names are the builtins; "replace" is bound only by the import.
constexpr BuiltinDef kBuiltins[] = {
    // functions
    {"min", b_min},
    {"max", b_max},
    {"abs", b_abs},
    {"round", b_round},
    {"len", b_len},
    {"sorted", b_sorted},
    {"isinstance", b_isinstance},
    {"int", b_int, true},
    {"float", b_float, true},
    {"str", b_str, true},
    {"bool", b_bool, true},
    {"list", b_list, true},
    {"tuple", b_tuple, true},
    {"dict", b_dict, true},
    {"sum", b_sum},
    {"all", b_all},
    {"any", b_any},
    {"range", b_range},
    {"replace", b_replace},
    // math
    {"math.log2", m_log2},
    {"math.log", m_log},
    {"math.ceil", m_ceil},
    {"math.floor", m_floor},
    {"math.sqrt", m_sqrt},
    {"math.isclose", m_isclose},
    {"math.isnan", m_isnan},
    {"math.isinf", m_isinf},
    // methods
    {"dict.update", d_update},
    {"dict.get", d_get},
    {"dict.keys", d_keys},
    {"dict.values", d_values},
    {"dict.items", d_items},
    {"dict.pop", d_pop},
    {"dict.setdefault", d_setdefault},
    {"list.append", l_append},
    {"list.extend", l_extend},
    {"list.count", s_count},
    {"list.index", s_index},
    {"tuple.count", s_count},
    {"tuple.index", s_index},
    {"str.format", s_format},
    {"str.startswith", s_startswith},
    {"str.endswith", s_endswith},
    {"str.strip", s_strip},
    {"str.lstrip", s_lstrip},
    {"str.rstrip", s_rstrip},
    {"str.lower", s_lower},
    {"str.upper", s_upper},
    {"str.split", s_split},
    {"str.join", s_join},
    {"str.replace", s_replace},
};

const std::vector<BuiltinDef>& builtin_table() {
  static const std::vector<BuiltinDef> kTable(std::begin(kBuiltins), std::end(kBuiltins));
  return kTable;
}

int builtin_index(std::string_view name) {
  static const std::unordered_map<std::string_view, int> kIndex = [] {
    std::unordered_map<std::string_view, int> index;
    for (size_t i = 0; i < builtin_table().size(); ++i) index.emplace(builtin_table()[i].name, static_cast<int>(i));
    return index;
  }();
  const auto it = kIndex.find(name);
  return it == kIndex.end() ? -1 : it->second;
}

// The builtins a bare name reaches (min, len, int, ...); not replace, math.* or methods.
const Value* global_builtin(std::string_view name) {
  static const std::unordered_map<std::string_view, Value> kValues = [] {
    std::unordered_map<std::string_view, Value> values;
    for (size_t i = 0; i < builtin_table().size(); ++i) {
      const std::string_view n = builtin_table()[i].name;
      if (n.find('.') == std::string_view::npos && n != "replace") {
        values.emplace(n, Internals::builtin_function(std::string(n), static_cast<int>(i), Value()));
      }
    }
    return values;
  }();
  const auto it = kValues.find(name);
  return it == kValues.end() ? nullptr : &it->second;
}

bool is_type_object(const Value& v) {
  if (v.kind() != Kind::kFunction) return false;
  const FnData& fn = Internals::data<FnData>(v);
  return fn.builtin >= 0 && fn.self.is_none() && builtin_table()[static_cast<size_t>(fn.builtin)].is_type;
}

}  // namespace

std::string python_type_name(const Value& value) {
  static const char* const kNames[] = {"NoneType", "bool", "int", "float", "str",   "list",
                                       "tuple",    "dict", "",    "",      "module"};
  switch (value.kind()) {
    case Kind::kObject:
      return value.type_name();
    case Kind::kFunction:
      if (is_type_object(value)) return "type";
      return Internals::data<FnData>(value).builtin >= 0 ? "builtin_function_or_method" : "function";
    default:
      return kNames[static_cast<int>(value.kind())];
  }
}

Value math_module() {
  std::vector<std::pair<std::string, Value>> attributes;
  for (size_t i = 0; i < builtin_table().size(); ++i) {
    const std::string_view name = builtin_table()[i].name;
    if (name.substr(0, 5) == "math.") {
      attributes.emplace_back(std::string(name.substr(5)),
                              Internals::builtin_function(std::string(name), static_cast<int>(i), Value()));
    }
  }
  attributes.emplace_back("inf", Value::real(HUGE_VAL));
  attributes.emplace_back("nan", Value::real(std::nan("")));
  attributes.emplace_back("pi", Value::real(3.141592653589793));
  attributes.emplace_back("e", Value::real(2.718281828459045));
  return Internals::module("math", std::move(attributes));
}

// =========================================================================================================
// Parsing and evaluation entry points

namespace {

std::string universal_newlines(std::string_view code) {  // as compile() reads source: \r\n and \r become \n
  std::string out;
  out.reserve(code.size());
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i] != '\r') {
      out += code[i];
    } else {
      out += '\n';
      if (i + 1 < code.size() && code[i + 1] == '\n') ++i;
    }
  }
  return out;
}

std::shared_ptr<const detail::Code> parse(std::string_view code, const std::string& origin, bool program) {
  const std::string text = universal_newlines(code);
  auto parsed = std::make_shared<detail::Code>();
  parsed->origin = origin;
  Parser parser(Lexer(text, parsed->origin).run(), parsed->origin);
  parsed->root = program ? parser.program_root() : parser.expression_root();
  return parsed;
}

void check_scope(const Scope& scope) {
  if (scope.globals.kind() != Kind::kDict || scope.locals.kind() != Kind::kDict) {
    throw std::logic_error("rule_code: Scope globals and locals must both be dicts");
  }
}

}  // namespace

const std::string& Expression::origin() const { return Internals::code(code_).origin; }
const std::string& Program::origin() const { return Internals::code(code_).origin; }

Expression parse_expression(std::string_view code, const std::string& origin) {
  return Internals::expression(parse(code, origin, false));
}

Program parse_program(std::string_view code, const std::string& origin) {
  return Internals::program(parse(code, origin, true));
}

Value evaluate(const Expression& expression, Scope& scope, const Limits& limits) {
  const detail::Code& code = Internals::code(expression);
  check_scope(scope);
  Interpreter interpreter(code, scope, limits);
  return interpreter.eval(code.root);
}

void execute(const Program& program, Scope& scope, const Limits& limits) {
  const detail::Code& code = Internals::code(program);
  check_scope(scope);
  Interpreter interpreter(code, scope, limits);
  interpreter.exec(code.root);
}

}  // namespace trainbench::review::rule_code
