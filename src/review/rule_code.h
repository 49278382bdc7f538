#pragma once
// Rule code: a small, bounded interpreter for the subset of Python that MLPerf's official compliance
// checker (mlcommons/logging, compliance_checker/mlp_compliance.py) hands to eval()/exec() from its YAML
// rule files (CHECK, PRE, POST, ATLEAST_ONE_CHECK, FIRST_CHECK, BEGIN: CODE, END: PRE/CHECK).
//
// trainbench evaluates those snippets natively so a review never runs Python. Three outcomes matter:
//  - a Value, computed with Python's semantics (int/float/bool arithmetic, floor division, float repr,
//    dict key equality 1 == 1.0 == True, list aliasing, ...);
//  - PythonError: an exception Python itself would raise for this input (missing key, None > 0, ...). The
//    official checker catches those with a bare `except` and reports the check as failed;
//  - Unsupported (code outside the subset) or LimitExceeded (a bound was hit): trainbench::Error, never a
//    verdict, because Python would have done something this interpreter cannot reproduce.
//
// Known differences from CPython, all outside what the rule files use: integers are 64-bit (a result that
// would need a bigger int raises PythonError "OverflowError", which Python would not); recursion that
// Python ends with RecursionError (comparing two self-containing lists, 1,000-deep values) is
// LimitExceeded; a container that contains itself is never freed (shared ownership); sum() adds floats left
// to right as Python 3.11 does (3.12 compensates). Where CPython's answer is an implementation detail
// (`x is y` between numbers, strings or tuples) or needs a type not modelled (sets, complex numbers), the
// construct is Unsupported rather than guessed.
//
// range() and dict.keys()/values()/items() are objects (Kind::kObject, python_type_name "range",
// "dict_keys", ...) that behave like Python's: lazy, live, and not subscriptable where Python's are not.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/error.h"

namespace trainbench::review::rule_code {

class Value;
using NativeFunction = std::function<Value(std::vector<Value>& args)>;

namespace detail {
struct Heap;  // shared payload of strings, containers, objects and functions (rule_code.cpp)
struct Code;  // a parsed snippet
}  // namespace detail

// A Python value. Copies are cheap: strings are immutable and shared, and a list, tuple, dict, object,
// function or module is a shared reference, so mutating it through one copy is seen by every other (as
// Python's names alias one object). The mutators are therefore const: they change the referenced object,
// not the handle. Accessors for the wrong kind throw std::logic_error (a caller bug, not a rule verdict).
class Value {
 public:
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kObject, kFunction, kModule };

  Value();  // None
  static Value boolean(bool value);
  static Value integer(int64_t value);
  static Value real(double value);
  static Value string(std::string text);
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items);
  static Value dict();  // empty; insertion-ordered, keys compared with Python equality (1 == 1.0 == True)
  // An attribute bag such as the checker's LogLine dataclass: the fields given here are its dataclass
  // fields (compared by ==, shown by repr, copied by dataclasses.replace); set_attr may add others.
  static Value object(std::string type_name, std::vector<std::pair<std::string, Value>> fields);
  static Value function(std::string name, NativeFunction function);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }

  bool as_bool() const;                  // kBool
  int64_t as_int() const;                // kInt or kBool
  double as_double() const;              // kInt, kBool or kFloat
  const std::string& as_string() const;  // kString (UTF-8)

  // kList or kTuple: the shared elements (do not change a tuple's).
  std::vector<Value>& items() const;

  // kDict. find() returns nullptr for a missing key; get() raises PythonError KeyError; an unhashable key
  // (list, dict, object) raises PythonError TypeError, as Python does.
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  Value get(const Value& key) const;
  Value get(std::string_view key) const;
  void set(Value key, Value value) const;
  void set(std::string_view key, Value value) const;
  bool contains(const Value& key) const { return find(key) != nullptr; }
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  bool erase(const Value& key) const;
  const std::vector<std::pair<Value, Value>>& entries() const;  // insertion order

  size_t size() const;  // elements of a list, tuple or dict; code points of a string

  // kObject or kModule.
  const std::string& type_name() const;
  const Value* get_attr(std::string_view name) const;  // nullptr when absent
  void set_attr(std::string_view name, Value value) const;
  const std::vector<std::pair<std::string, Value>>& fields() const;

  const std::string& function_name() const;  // kFunction

  // Identity: the same shared object (strings, containers, objects, functions, modules), or the same kind
  // and value for None, bools and numbers.
  bool is(const Value& other) const;

 private:
  friend struct Internals;
  Kind kind_ = Kind::kNone;
  union {
    int64_t int_;
    double real_;
  } scalar_{};
  std::shared_ptr<detail::Heap> heap_;
};

// null -> None, bool, integer -> int (an unsigned one beyond int64 -> float, as nlohmann already does for
// larger numbers), float, string, array -> list, object -> dict. nlohmann::json sorts object keys; pass an
// ordered_json to keep the document's order, as Python's json module does. Nesting deeper than 1,000
// levels raises LimitExceeded.
Value from_json(const nlohmann::json& json);
Value from_json(const nlohmann::ordered_json& json);
std::string repr(const Value& value);  // Python's repr(): 'a', 1e-05, 0.0001, 1e+16, 2.0, [1, 'x'], {'k': None}
std::string str(const Value& value);   // Python's str(): a string itself, otherwise repr
bool truthy(const Value& value);
bool equal(const Value& a, const Value& b);        // Python ==
std::string python_type_name(const Value& value);  // 'int', 'NoneType', 'LogLine', ...
// The `math` module (log2 log ceil floor sqrt isclose isnan isinf inf nan pi e); the engine puts it into
// the globals under the name "math", as the checker's `import math` does. A new module on every call.
Value math_module();

struct Limits {
  long max_steps = 200'000'000;   // expression nodes, loop iterations and elements touched, per call
  int max_depth = 100;            // nested expression/statement evaluation
  size_t max_items = 10'000'000;  // elements of one container, and container elements plus 16-byte units of
                                  // new strings one call may create (so memory stays bounded)
  size_t max_string = 1 << 24;    // bytes of one string
};

// Parsed snippets: immutable and shareable across threads. `origin` names the file and rule for messages.
class Expression {
 public:
  Expression() = default;
  const std::string& origin() const;

 private:
  friend struct Internals;
  std::shared_ptr<const detail::Code> code_;
};
class Program {
 public:
  Program() = default;
  const std::string& origin() const;

 private:
  friend struct Internals;
  std::shared_ptr<const detail::Code> code_;
};

// Both strip surrounding whitespace first, as the checker does before eval()/exec(). Invalid Python throws
// trainbench::Error ("<origin>:<line>:<column>: invalid Python ..."), code outside the subset Unsupported,
// nesting deeper than 200 levels LimitExceeded.
Expression parse_expression(std::string_view code, const std::string& origin);  // eval() mode
Program parse_program(std::string_view code, const std::string& origin);        // exec() mode

// Names are looked up in locals, then globals, then the builtins. Both must be dicts (they may be the same
// dict, as in exec(code, state)).
struct Scope {
  Value globals = Value::dict();
  Value locals = Value::dict();
};
Value evaluate(const Expression& expression, Scope& scope, const Limits& limits = {});
void execute(const Program& program, Scope& scope, const Limits& limits = {});  // plain-name stores go to locals

// An exception Python would raise: type is KeyError, TypeError, NameError, AttributeError, ZeroDivisionError,
// IndexError, ValueError, OverflowError or RuntimeError; message is Python's text (for KeyError the repr of
// the key); where is "<origin>:<line>:<column>" once the interpreter has located it.
struct PythonError : std::runtime_error {
  PythonError(std::string type, std::string message, std::string where = "");
  std::string type;
  std::string message;
  std::string where;
};

// Code outside the subset: syntax, builtin, module, import or method the interpreter does not implement.
struct Unsupported : trainbench::Error {
  Unsupported(std::string origin, int line, int column, std::string construct);
  std::string origin;
  int line;
  int column;
  std::string construct;  // what was not understood: "'lambda'", "the builtin open()", "the method str.title()"
};

// A bound was hit; `limit` names it: max_steps, max_depth, max_items, max_string, or nesting (parse nesting
// over 200 levels, value nesting over 1,000).
struct LimitExceeded : trainbench::Error {
  LimitExceeded(std::string limit, const std::string& message);
  std::string limit;
};

}  // namespace trainbench::review::rule_code
