// Tests of the rule-code interpreter. Every expected value that Python decides (a result, a repr, a
// truth value, an exception type) was produced by running the same code under Debian 12's /usr/bin/python3
// (3.11.2); the few places where trainbench deliberately differs say so.
#include "review/rule_code.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trainbench::review::rule_code {
namespace {

// A scope like the checker's: `math` in the globals.
Scope checker_scope() {
  Scope scope;
  scope.globals.set("math", math_module());
  return scope;
}

Value eval_in(const std::string& code, Scope& scope, const Limits& limits = {}) {
  return evaluate(parse_expression(code, "test"), scope, limits);
}

std::string eval_repr(const std::string& code) {
  Scope scope = checker_scope();
  return repr(eval_in(code, scope));
}

void run(const std::string& code, Scope& scope, const Limits& limits = {}) {
  execute(parse_program(code, "test"), scope, limits);
}

Value json(const char* text) { return from_json(nlohmann::ordered_json::parse(text)); }

// The checker's LogLine dataclass.
Value log_line(Value value, double timestamp, const std::string& key = "key", const std::string& full = "") {
  return Value::object("LogLine", {{"full_string", Value::string(full)},
                                   {"timestamp", Value::real(timestamp)},
                                   {"key", Value::string(key)},
                                   {"value", std::move(value)},
                                   {"lineno", Value::integer(1)}});
}

// The checker's is_integer(), written as rule code: abs(round(value) - value) < 0.00001.
Value is_integer_function() {
  static const Expression body = parse_expression("abs(round(value) - value) < 0.00001", "is_integer");
  return Value::function("is_integer", [](std::vector<Value>& args) {
    Scope local;
    local.locals.set("value", args.at(0));
    return evaluate(body, local);
  });
}

// The exception type a snippet raises ("" when it raises none).
template <class Run>
std::string raised(Run&& run_it) {
  try {
    run_it();
  } catch (const PythonError& e) {
    return e.type;
  }
  return "";
}

// ---------------------------------------------------------------------------------------------------------
// Values

TEST(RuleCodeValue, ScalarsKeepTheirKinds) {
  EXPECT_EQ(Value().kind(), Value::Kind::kNone);
  EXPECT_TRUE(Value::boolean(true).as_bool());
  EXPECT_EQ(Value::boolean(true).as_int(), 1);  // bool is an int
  EXPECT_EQ(Value::integer(-7).as_int(), -7);
  EXPECT_DOUBLE_EQ(Value::integer(3).as_double(), 3.0);
  EXPECT_DOUBLE_EQ(Value::real(0.5).as_double(), 0.5);
  EXPECT_EQ(Value::string("x").as_string(), "x");
  EXPECT_EQ(Value::string("h\xc3\xa9llo").size(), 5U);  // code points, as len() counts
  EXPECT_THROW(Value::real(1.0).as_int(), std::logic_error);
  EXPECT_THROW(Value().items(), std::logic_error);
}

TEST(RuleCodeValue, DictKeysUsePythonEquality) {
  const Value d = Value::dict();
  d.set(Value::integer(1), Value::string("int"));
  d.set(Value::real(1.0), Value::string("float"));
  d.set(Value::boolean(true), Value::string("bool"));
  ASSERT_EQ(d.entries().size(), 1U);
  EXPECT_EQ(d.entries()[0].first.kind(), Value::Kind::kInt);  // Python keeps the first key
  EXPECT_EQ(d.get(Value::real(1.0)).as_string(), "bool");
  d.set("b", Value::integer(2));
  d.set("a", Value::integer(3));
  EXPECT_EQ(repr(d), "{1: 'bool', 'b': 2, 'a': 3}");  // insertion order
  EXPECT_TRUE(d.contains("b"));
  EXPECT_TRUE(d.erase(Value::string("b")));
  EXPECT_FALSE(d.contains("b"));
  EXPECT_EQ(d.get("a").as_int(), 3);
  EXPECT_EQ(d.find("zz"), nullptr);
  EXPECT_EQ(raised([&] { d.get("zz"); }), "KeyError");
  EXPECT_EQ(raised([&] { d.set(Value::list(), Value()); }), "TypeError");  // unhashable
  d.set(Value::tuple({Value::integer(1), Value::string("x")}), Value::integer(9));
  EXPECT_EQ(d.get(Value::tuple({Value::real(1.0), Value::string("x")})).as_int(), 9);
}

TEST(RuleCodeValue, ContainersAreSharedReferences) {
  const Value list = Value::list({Value::integer(1)});
  const Value alias = list;
  alias.items().push_back(Value::integer(2));
  EXPECT_EQ(repr(list), "[1, 2]");
  EXPECT_TRUE(list.is(alias));
  EXPECT_FALSE(list.is(Value::list({Value::integer(1), Value::integer(2)})));
  EXPECT_TRUE(equal(list, Value::list({Value::integer(1), Value::real(2.0)})));
}

TEST(RuleCodeValue, FromJsonMapsEachType) {
  const Value v = json(R"({"b": null, "a": [true, 3, 2.5, "s", {"k": 18446744073709551615}]})");
  // Python would keep 2**64-1 as an int; trainbench's ints are 64-bit, so it becomes a float.
  EXPECT_EQ(repr(v), "{'b': None, 'a': [True, 3, 2.5, 's', {'k': 1.8446744073709552e+19}]}");
  EXPECT_EQ(repr(from_json(nlohmann::json::parse(R"({"b": 1, "a": 2})"))), "{'a': 2, 'b': 1}");  // json sorts keys
  std::string deep;
  for (int i = 0; i < 1500; ++i) deep += "[";
  for (int i = 0; i < 1500; ++i) deep += "]";
  EXPECT_THROW(from_json(nlohmann::json::parse(deep)), LimitExceeded);
}

TEST(RuleCodeValue, ReprAndStrMatchPython) {
  EXPECT_EQ(repr(Value::real(1e-05)), "1e-05");
  EXPECT_EQ(repr(Value::real(0.0001)), "0.0001");
  EXPECT_EQ(repr(Value::real(1e16)), "1e+16");
  EXPECT_EQ(repr(Value::real(1e15)), "1000000000000000.0");
  EXPECT_EQ(repr(Value::real(2.0)), "2.0");
  EXPECT_EQ(repr(Value::real(0.1)), "0.1");
  EXPECT_EQ(repr(Value::real(-0.0)), "-0.0");
  EXPECT_EQ(repr(Value::real(1.5e300)), "1.5e+300");
  EXPECT_EQ(repr(Value::real(123456789012345678.0)), "1.2345678901234568e+17");
  EXPECT_EQ(repr(Value::real(HUGE_VAL)), "inf");
  EXPECT_EQ(repr(Value::real(std::nan(""))), "nan");
  EXPECT_EQ(repr(Value::string("it's")), "\"it's\"");
  EXPECT_EQ(repr(Value::string("a\"b'")), "'a\"b\\''");
  EXPECT_EQ(repr(Value::string(std::string("\x00\x7f\n", 3))), "'\\x00\\x7f\\n'");
  EXPECT_EQ(repr(Value::string("\xc3\xa9\xe2\x80\xa8")), "'\xc3\xa9\\u2028'");
  EXPECT_EQ(repr(Value::tuple({Value::integer(1)})), "(1,)");
  EXPECT_EQ(repr(Value::tuple({})), "()");
  EXPECT_EQ(str(Value::string("x")), "x");
  EXPECT_EQ(str(Value()), "None");
  EXPECT_EQ(repr(math_module()), "<module 'math' (built-in)>");
}

TEST(RuleCodeValue, TruthinessFollowsPython) {
  EXPECT_FALSE(truthy(Value()));
  EXPECT_FALSE(truthy(Value::integer(0)));
  EXPECT_FALSE(truthy(Value::real(0.0)));
  EXPECT_TRUE(truthy(Value::real(std::nan(""))));
  EXPECT_FALSE(truthy(Value::string("")));
  EXPECT_FALSE(truthy(Value::list()));
  EXPECT_FALSE(truthy(Value::dict()));
  EXPECT_TRUE(truthy(Value::list({Value()})));
  EXPECT_TRUE(truthy(log_line(Value(), 0)));
}

TEST(RuleCodeValue, ObjectsAreAttributeBags) {
  const Value line = log_line(json(R"({"value": 1})"), 2.5, "run_start");
  EXPECT_EQ(line.type_name(), "LogLine");
  EXPECT_EQ(python_type_name(line), "LogLine");
  EXPECT_DOUBLE_EQ(line.get_attr("timestamp")->as_double(), 2.5);
  EXPECT_EQ(line.get_attr("nope"), nullptr);
  line.set_attr("key", Value::string("run_stop"));
  line.set_attr("extra", Value::integer(1));  // not a dataclass field: not in repr
  EXPECT_EQ(repr(line), "LogLine(full_string='', timestamp=2.5, key='run_stop', value={'value': 1}, lineno=1)");
  EXPECT_EQ(python_type_name(Value::function("f", [](std::vector<Value>&) { return Value(); })), "function");
  EXPECT_EQ(python_type_name(Value()), "NoneType");
}

TEST(RuleCodeValue, DeeplyNestedValuesAreDestroyedWithoutRecursion) {
  Value v = Value::list();
  for (int i = 0; i < 1'000'000; ++i) v = Value::list({v});
  v = Value();  // a recursive destructor would overflow the stack here
  SUCCEED();
}

TEST(RuleCodeValue, MathModuleHasTheSubset) {
  const Value math = math_module();
  EXPECT_EQ(math.kind(), Value::Kind::kModule);
  for (const char* name : {"log2", "log", "ceil", "floor", "sqrt", "isclose", "isnan", "isinf", "inf", "nan"}) {
    EXPECT_NE(math.get_attr(name), nullptr) << name;
  }
  EXPECT_EQ(math.get_attr("cos"), nullptr);
}

// ---------------------------------------------------------------------------------------------------------
// Expressions

struct ExpressionCase {
  const char* code;
  const char* python_repr;  // repr() of the result under python3
};

TEST(RuleCodeExpression, MatchesPython) {
  const ExpressionCase cases[] = {
      {R"(-2**2)", R"(-4)"},
      {R"(2**-1)", R"(0.5)"},
      {R"(2**3**2)", R"(512)"},
      {R"((-2)**2)", R"(4)"},
      {R"(-2**0.5)", R"(-1.4142135623730951)"},
      {R"(1 + 2 * 3 - 4 / 2)", R"(5.0)"},
      {R"(2 * 3 % 4)", R"(2)"},
      {R"(100 / 10 / 5)", R"(2.0)"},
      {R"(3 - 2 - 1)", R"(0)"},
      {R"(7 // 2, -7 // 2, 7 % -3, -7 % 3)", R"((3, -4, -2, 2))"},
      {R"(-7.5 // 2, -7.5 % 2, 7.5 % -2, 7 // 2.0)", R"((-4.0, 0.5, -0.5, 3.0))"},
      {R"(1 / 3, 10 / 2, 2**62 + (2**62 - 1))", R"((0.3333333333333333, 5.0, 9223372036854775807))"},
      {R"(0 if False else 0 or 5)", R"(5)"},
      {R"(1 if 0 else 2 or 3)", R"(2)"},
      {R"(1 + 2 if 0 else 3 + 4)", R"(7)"},
      {R"(1 if 2 else 3 if 4 else 5)", R"(1)"},
      {R"(1 | 0 == 1)", R"(True)"},
      {R"((1 | 0) == 1)", R"(True)"},
      {R"(True | False, True & False, True ^ True, 6 & 3, 5 ^ 1, 1 | 2)", R"((True, False, False, 2, 4, 3))"},
      {R"(~5, ~True, -True, +True, True + True, True * 3, True / 2, - - 1)", R"((-6, -2, -1, 1, 2, 3, 0.5, 1))"},
      {R"(not 1 == 2)", R"(True)"},
      {R"(not 1 + 1)", R"(False)"},
      {R"(not None, not [], not [0], not '', not 0.0, not {})", R"((True, True, False, True, True, True))"},
      {R"(0.0 <= 0.5 <= 1.0, 0.0 <= 1.5 <= 1.0, 1 < 2 < 3 < 2, 1 < 2 == 2 > 1)", R"((True, False, False, True))"},
      {R"(1 == 1.0 == True, 'a' == 1, [1, 2] == [1, 2.0], [1] == (1,), None == 0, {'a': 1} == {'a': 1.0})",
       R"((True, False, True, False, False, True))"},
      {R"([1, 2] < [1, 3], (1, 2) < (1, 2, 0), 'abc' < 'abd', 'B' < 'a')", R"((True, True, True, True))"},
      {R"('ab' in 'xaby', 1 in [1.0], True in {1: 0}, 'k' not in {'k': 1}, 2 in (1, 2), '' in 'x')",
       R"((True, True, True, False, True, True))"},
      {R"(1 and 2, 0 and 2, 0 or '', None or [] or 'x')", R"((2, 0, '', 'x'))"},
      {R"([1, 2, 3][-1], (4, 5)[1], 'héllo'[1], [1, 2, 3, 4, 5][1:3], [1, 2, 3][::-1], 'hello'[1:-1], [1, 2, 3][5:])",
       R"((3, 5, 'é', [2, 3], [3, 2, 1], 'ell', []))"},
      {R"([0] * 3, 'ab' * 2, 3 * [1], 'x' * -1, [1] + [2], (1,) + (2,), 'a' 'b' "c")",
       R"(([0, 0, 0], 'abab', [1, 1, 1], '', [1, 2], (1, 2), 'abc'))"},
      {R"({1: 'a', 1.0: 'b', True: 'c'})", R"({1: 'c'})"},
      {R"({'a': 1, 'b': [2, 3],})", R"({'a': 1, 'b': [2, 3]})"},
      {R"((1,), (), [], {}, [1, 2, 3,])", R"(((1,), (), [], {}, [1, 2, 3]))"},
      {R"(1_000_000 + 0x10 + 0o10 + 0b10, .5 + 1. + 1e3, 9e99, 1.0e-6, 1e-9)",
       R"((1000026, 1001.5, 9e+99, 1e-06, 1e-09))"},
      {"'\\x41\\u00e9\\n\\t\\\\\\''", "\"Aé\\n\\t\\\\'\""},
      {R"(str(0.1), str(1e-05), str(0.0001), str(1e16), str(1e15), str(2.0), str(1e22), str(-0.0), str(123456789012345678.0))",
       R"(('0.1', '1e-05', '0.0001', '1e+16', '1000000000000000.0', '2.0', '1e+22', '-0.0', '1.2345678901234568e+17'))"},
      {R"(0.1 + 0.2, 1.1 * 3, 4.35 * 100, 5e-324, 2**0.5, 1e300 * 1e10)",
       R"((0.30000000000000004, 3.3000000000000003, 434.99999999999994, 5e-324, 1.4142135623730951, inf))"},
      {R"(round(2.5), round(3.5), round(-0.5), round(2.675, 2), round(1250, -2), round(7.0), round(0.125, 2))",
       R"((2, 4, 0, 2.67, 1200, 7, 0.12))"},
      {R"(abs(-3), abs(-2.5), min(3, 1, 2), max([1, 5, 2]), max(2.0, 2), min([], default=0), max([3, -4], key=abs))",
       R"((3, 2.5, 1, 5, 2.0, 0, -4))"},
      {R"(len('héllo'), len([1, 2]), len({'a': 1}), len(()))", R"((5, 2, 1, 0))"},
      {R"(sorted([3, 1, 2]), sorted(['b', 'a', 'C']), sorted([3, 1, 2], reverse=True), sorted([1, 2.5, True, 0]), sorted({'b': 1, 'a': 2}))",
       R"(([1, 2, 3], ['C', 'a', 'b'], [3, 2, 1], [0, 1, True, 2.5], ['a', 'b']))"},
      {R"(isinstance(True, int), isinstance(True, bool), isinstance(1.0, int), isinstance(1.0, (int, float)), isinstance('a', str), isinstance([], list), isinstance({}, dict), isinstance((), tuple), isinstance(1, bool))",
       R"((True, True, False, True, True, True, True, True, False))"},
      {R"(int('12'), int(' -7 '), int(3.9), int(-3.9), int('1_000'), float('1.5'), float(' 2e3 '), float(3), str(1.5), str(None), bool(''), bool([0]))",
       R"((12, -7, 3, -3, 1000, 1.5, 2000.0, 3.0, '1.5', 'None', False, True))"},
      {R"(float('inf'), float('-inf') < -1e308, float('nan') == float('nan'), float('nan') != float('nan'))",
       R"((inf, True, False, True))"},
      {R"(list('ab'), tuple([1, 2]), dict(a=1), dict([('x', 1)]), list({'k': 1}))",
       R"((['a', 'b'], (1, 2), {'a': 1}, {'x': 1}, ['k']))"},
      {R"(sum([1, 2, 3]), sum([0.1, 0.2, 0.3]), sum([[1], [2]], []), all([1, 2]), all([]), any([0, '']))",
       R"((6, 0.6000000000000001, [1, 2], True, True, False))"},
      {R"(math.log2(8), math.log(100, 10), math.ceil(2.1), math.floor(-2.1), math.sqrt(16), math.isclose(1.0, 1.0 + 1e-10), math.isclose(1.0, 1.05, rel_tol=0.1), math.isnan(math.nan), math.isinf(-math.inf), math.inf > 1e308)",
       R"((3.0, 2.0, 3, -3, 4.0, True, True, True, True, True))"},
      {R"('{}_{}'.format('a', 1), '{0}{1}{0}'.format('x', 'y'), '{name}!'.format(name='b'), '{}'.format(0.1), '{!r}'.format('q'), '{{}}{}'.format(3), '{}'.format(1e-05))",
       R"(('a_1', 'xyx', 'b!', '0.1', "'q'", '{}3', '1e-05'))"},
      {R"(' a b  c '.split(), 'a,b,,c'.split(','), 'a b c'.split(None, 1), 'a,b,c'.split(',', maxsplit=1))",
       R"((['a', 'b', 'c'], ['a', 'b', '', 'c'], ['a', 'b c'], ['a', 'b,c']))"},
      {R"('-'.join(['a', 'b']), '  x  '.strip(), 'xxhixx'.strip('x'), 'Hello'.lower(), 'Hello'.upper(), 'abc'.startswith('ab'), 'abc'.endswith(('x', 'c')), 'a.b.c'.replace('.', '/'))",
       R"(('a-b', 'x', 'hi', 'hello', 'HELLO', True, True, 'a/b/c'))"},
      {R"({'a': 1}.get('a'), {'a': 1}.get('b'), {'a': 1}.get('b', 5), list({'a': 1, 'b': 2}.keys()), list({'a': 1}.values()), list({'a': 1}.items()))",
       R"((1, None, 5, ['a', 'b'], [1], [('a', 1)]))"},
      {R"([1, 2, 1].count(1), [1, 2, 3].index(2), (1, 2).index(2))", R"((2, 1, 1))"},
      {"(1 +\n 2)", R"(3)"},
      {"1 + \\\n 2", R"(3)"},
      {"[1, # one\n 2]  # two", R"([1, 2])"},
      {R"(range(3), range(10, 0, -4), list(range(1, 3)), range(0), len(range(10**12)))",
       R"((range(0, 3), range(10, 0, -4), [1, 2], range(0, 0), 1000000000000))"},
      {R"(5 in range(0, 10, 5), 3 in range(0, 10, 5), 2.0 in range(3), 'a' in range(3), range(10)[-1], range(1, 5, 2).step)",
       R"((True, False, True, False, 9, 2))"},
      {R"(range(10)[2:8:2], range(10)[::-1], range(0, 10, 3)[:], range(5, 0, -1)[::2], range(3) == range(0, 3), range(3) == [0, 1, 2])",
       R"((range(2, 8, 2), range(9, -1, -1), range(0, 12, 3), range(5, 0, -2), True, False))"},
      {R"(list(range(1, 10, 4)), sum(range(5)), sorted(range(3), reverse=True), bool(range(0)))",
       R"(([1, 5, 9], 10, [2, 1, 0], False))"},
      {R"({'a': 1}.keys(), {'a': [1]}.values(), {'a': 1}.items(), {}.keys(), list({'a': 1}.items()), max({'x': 3, 'y': 1}.values()))",
       R"((dict_keys(['a']), dict_values([[1]]), dict_items([('a', 1)]), dict_keys([]), [('a', 1)], 3))"},
      {R"({'a': 1, 'b': 2}.keys() == {'b': 0, 'a': 5}.keys(), {'a': 1}.values() == {'a': 1}.values(), {'a': 1}.keys() == ['a'])",
       R"((True, False, False))"},
      {R"('a' in {'a': 1}.keys(), ('a', 1) in {'a': 1}.items(), ('a', 2) in {'a': 1}.items(), 1 in {'a': 1}.values(), len({'a': 1}.items()))",
       R"((True, True, False, True, 1))"},
  };
  for (const ExpressionCase& c : cases) EXPECT_EQ(eval_repr(c.code), c.python_repr) << c.code;
}

TEST(RuleCodeExpression, PowerBindsTighterThanUnaryMinusOnItsLeft) {
  EXPECT_EQ(eval_repr("-2**2"), "-4");
  EXPECT_EQ(eval_repr("-2**-1"), "-0.5");
  EXPECT_EQ(eval_repr("2**-2**2"), "0.0625");  // right-associative, the exponent's minus applies to 2**2
}

TEST(RuleCodeExpression, NamesResolveLocalsThenGlobalsThenBuiltins) {
  Scope scope;
  scope.globals.set("x", Value::integer(1));
  scope.globals.set("len", Value::integer(5));  // a global shadows the builtin
  EXPECT_EQ(repr(eval_in("x, len", scope)), "(1, 5)");
  scope.locals.set("x", Value::integer(2));
  EXPECT_EQ(repr(eval_in("x + len", scope)), "7");
  Scope plain;
  EXPECT_EQ(repr(eval_in("len([1])", plain)), "1");
}

TEST(RuleCodeExpression, DictViewsAreLiveAndRangesLazy) {
  Scope scope;
  run("d = {'a': 1}\nk = d.keys()\nitems = d.items()\nd['b'] = 2\nseen = list(k)\nn = len(items)\n"
      "last = list(items)[-1]\nt = 0\nfor i in range(5):\n    t += i",
      scope);
  EXPECT_EQ(repr(scope.locals.get("seen")), "['a', 'b']");
  EXPECT_EQ(repr(scope.locals.get("n")), "2");
  EXPECT_EQ(repr(scope.locals.get("last")), "('b', 2)");
  EXPECT_EQ(repr(scope.locals.get("t")), "10");
  EXPECT_EQ(raised([&] { run("d = {'a': 1}\nfor k in d.keys():\n    d['b'] = 2", scope); }), "RuntimeError");
  EXPECT_EQ(raised([&] { run("r = range(3)\nr.x = 1", scope); }), "AttributeError");
}

TEST(RuleCodeExpression, KeepsItsOrigin) {
  EXPECT_EQ(parse_expression("1", "closed_common.yaml KEY:run_start CHECK").origin(),
            "closed_common.yaml KEY:run_start CHECK");
  EXPECT_THROW(Expression().origin(), std::logic_error);
}

// ---------------------------------------------------------------------------------------------------------
// Statements

TEST(RuleCodeProgram, PlainNamesAreStoredInLocals) {
  Scope scope;
  scope.globals.set("g", Value::integer(1));
  run("a = g + 1\nb = c = [a]\nx, y = 'pq'", scope);
  EXPECT_EQ(repr(scope.locals), "{'a': 2, 'b': [2], 'c': [2], 'x': 'p', 'y': 'q'}");
  EXPECT_EQ(repr(scope.globals), "{'g': 1}");
  EXPECT_TRUE(scope.locals.get("b").is(scope.locals.get("c")));
}

TEST(RuleCodeProgram, ListPlusEqualsExtendsInPlace) {
  Scope scope;
  const Value s = json(R"({"l": []})");
  scope.globals.set("s", s);
  const Value before = s.get("l");
  run("t = s['l']\ns['l'] += [1]\nt += (2,)\nu = (1,)\nw = u\nw += (2,)", scope);
  EXPECT_EQ(repr(before), "[1, 2]");  // every name for the list sees both extensions
  EXPECT_TRUE(s.get("l").is(before));
  EXPECT_EQ(repr(scope.locals.get("u")), "(1,)");  // a tuple's += makes a new tuple
  EXPECT_EQ(repr(scope.locals.get("w")), "(1, 2)");
}

TEST(RuleCodeProgram, ReplaceCopySharesTheInnerDictUntilReassigned) {
  Scope scope;
  const Value line = log_line(json(R"({"value": 1})"), 1.0);
  scope.locals.set("ll", line);
  run("from dataclasses import replace\n"
      "c = replace(ll)\n"
      "c.value['value'] = 2\n"
      "shared = c.value is ll.value\n"
      "c.value = {}\n"
      "c.key = 'copy'\n"
      "after = c.value is ll.value\n"
      "same = replace(ll) == ll\n"
      "k = replace(ll, key='k').key",
      scope);
  EXPECT_EQ(repr(line.get_attr("value") ? *line.get_attr("value") : Value()), "{'value': 2}");
  EXPECT_EQ(line.get_attr("key")->as_string(), "key");
  EXPECT_EQ(repr(scope.locals.get("shared")), "True");
  EXPECT_EQ(repr(scope.locals.get("after")), "False");
  EXPECT_EQ(repr(scope.locals.get("same")), "True");
  EXPECT_EQ(repr(scope.locals.get("k")), "'k'");
  EXPECT_EQ(raised([&] { run("from dataclasses import replace as r\nr({})", scope); }), "TypeError");
  EXPECT_EQ(raised([&] { run("from dataclasses import replace as r\nr(ll, nope=1)", scope); }), "TypeError");
}

TEST(RuleCodeProgram, ForLoopsWithBreakContinueAndElse) {
  Scope scope;
  run("total = 0\n"
      "for i in [1, 2, 3, 4, 5, 6]:\n"
      "    if i % 2 == 0:\n"
      "        continue\n"
      "    if i > 4:\n"
      "        break\n"
      "    total += i\n"
      "else:\n"
      "    total = -1\n"
      "seen = ''\n"
      "for k in {'a': 1, 'b': 2}:\n"
      "    seen += k\n"
      "else:\n"
      "    seen += '!'\n"
      "pairs = []\n"
      "for k, v in {'x': 1}.items(): pairs.append(k * v)\n",
      scope);
  EXPECT_EQ(repr(scope.locals.get("total")), "4");
  EXPECT_EQ(repr(scope.locals.get("seen")), "'ab!'");
  EXPECT_EQ(repr(scope.locals.get("pairs")), "['x']");
}

TEST(RuleCodeProgram, LoopsSeeTheirListGrowAndRefuseAResizedDict) {
  Scope scope;
  run("l = [1, 2]\nfor x in l:\n    if len(l) < 5:\n        l.append(x * 10)", scope);
  EXPECT_EQ(repr(scope.locals.get("l")), "[1, 2, 10, 20, 100]");
  EXPECT_EQ(raised([&] { run("d = {'a': 1}\nfor k in d:\n    d['b'] = 2", scope); }), "RuntimeError");
}

TEST(RuleCodeProgram, IfElifElse) {
  Scope scope;
  run("if 0:\n    r = 'a'\nelif []:\n    r = 'b'\nelif 'x':\n    r = 'c'\nelse:\n    r = 'd'\n"
      "if 1: one = 1; two = 2\n"
      "if None:\n    pass\nelse:\n\n    # a comment and a blank line\n    z = 0",
      scope);
  EXPECT_EQ(repr(scope.locals), "{'r': 'c', 'one': 1, 'two': 2, 'z': 0}");
}

TEST(RuleCodeProgram, AugmentedAssignmentEvaluatesTheTargetOnce) {
  Scope scope;
  run("x = 5\nx -= 2\nx *= 3\nx /= 2\nx //= 2\nx **= 2\nx %= 5\n"
      "d = {'n': [1]}\nd['n'][0] += 5\nd['m'] = 1\nd['m'] |= 2",
      scope);
  EXPECT_EQ(repr(scope.locals.get("x")), "4.0");
  EXPECT_EQ(repr(scope.locals.get("d")), "{'n': [6], 'm': 3}");
  EXPECT_EQ(raised([&] { run("x = {}\nx['a'] += 1", scope); }), "KeyError");
}

TEST(RuleCodeProgram, CallsNativeFunctions) {
  Scope scope;
  std::vector<std::string> queued;
  scope.globals.set("enqueue_config", Value::function("enqueue_config", [&](std::vector<Value>& args) {
                      queued.push_back(args.at(0).as_string());
                      return Value();
                    }));
  scope.globals.set("is_integer", is_integer_function());
  scope.locals.set("v", json(R"({"value": "open"})"));
  run("enqueue_config('training_6.0.0/{}_common.yaml'.format(v['value'])); r = is_integer(3.0), is_integer(2.5)",
      scope);
  EXPECT_EQ(queued, std::vector<std::string>{"training_6.0.0/open_common.yaml"});
  EXPECT_EQ(repr(scope.locals.get("r")), "(True, False)");
  EXPECT_EQ(raised([&] { run("is_integer(None)", scope); }), "TypeError");
  EXPECT_THROW(run("enqueue_config(config='x')", scope), Unsupported);
}

// ---------------------------------------------------------------------------------------------------------
// Exceptions Python would raise

TEST(RuleCodePythonError, KindsMatchPython) {
  const std::pair<const char*, const char*> cases[] = {
      {"{'a': 1}['b']", "KeyError"},
      {"None < 1", "TypeError"},
      {"v['value'] > 0", "TypeError"},
      {"'a' < 1", "TypeError"},
      {"[1, 'a'] < [1, 2]", "TypeError"},
      {"sorted([1, 'a'])", "TypeError"},
      {"'a' + 1", "TypeError"},
      {"len(5)", "TypeError"},
      {"5()", "TypeError"},
      {"1 in 'abc'", "TypeError"},
      {"[1] in {}", "TypeError"},
      {"undefined_name", "NameError"},
      {"ll.nope", "AttributeError"},
      {"{}.x", "AttributeError"},
      {"math.foo", "AttributeError"},
      {"1 / 0", "ZeroDivisionError"},
      {"1 // 0", "ZeroDivisionError"},
      {"1.0 % 0.0", "ZeroDivisionError"},
      {"0.0 ** -1", "ZeroDivisionError"},
      {"[1][2]", "IndexError"},
      {"range(3)[5]", "IndexError"},
      {"{'a': 1}.keys()[0]", "TypeError"},
      {"{'a': 1}.keys() + [1]", "TypeError"},
      {"'x'[-2]", "IndexError"},
      {"int('1.5')", "ValueError"},
      {"float('abc')", "ValueError"},
      {"min([])", "ValueError"},
      {"math.log2(0)", "ValueError"},
      {"math.sqrt(-1)", "ValueError"},
      {"[1, 2].index(5)", "ValueError"},
      {"'{}{0}'.format(1, 2)", "ValueError"},
      {"'{1}'.format(1)", "IndexError"},
      {"10.0 ** 400", "OverflowError"},
      {"int(float('inf'))", "OverflowError"},
  };
  for (const auto& [code, type] : cases) {
    Scope scope = checker_scope();
    scope.locals.set("v", json(R"({"value": null})"));
    scope.locals.set("ll", log_line(Value(), 0));
    EXPECT_EQ(raised([&] { eval_in(code, scope); }), type) << code;
  }
}

TEST(RuleCodePythonError, BeyondSixtyFourBitsIsAnOverflowError) {
  // Deliberate difference: Python would compute these exactly with its arbitrary-precision ints.
  EXPECT_EQ(raised([] { eval_repr("2 ** 63"); }), "OverflowError");
  EXPECT_EQ(raised([] { eval_repr("-(2**63 - 1) - 2"); }), "OverflowError");
  EXPECT_EQ(raised([] { eval_repr("int('99999999999999999999')"); }), "OverflowError");
  EXPECT_EQ(eval_repr("2**62 + (2**62 - 1)"), "9223372036854775807");
}

TEST(RuleCodePythonError, NamesWhereItWasRaised) {
  Scope scope;
  scope.globals.set("s", Value::dict());
  scope.locals.set("v", json(R"({"value": 1})"));
  try {
    run("x = 1\ns['a'] = v['missing']", scope);
    FAIL() << "no KeyError";
  } catch (const PythonError& e) {
    EXPECT_EQ(e.type, "KeyError");
    EXPECT_EQ(e.message, "'missing'");
    EXPECT_EQ(e.where, "test:2:11");
    EXPECT_STREQ(e.what(), "test:2:11: KeyError: 'missing'");
  }
}

// ---------------------------------------------------------------------------------------------------------
// Code outside the subset

TEST(RuleCodeUnsupported, RefusedWhenParsed) {
  for (const char* code : {"lambda x: x",
                           "__import__('os')",
                           "[x for x in y]",
                           "(x for x in y)",
                           "{k: 1 for k in y}",
                           "eval('1')",
                           "exec('x = 1')",
                           "open('f')",
                           "getattr(x, 'y')",
                           "globals()",
                           "x.__class__",
                           "{1, 2}",
                           "f'{x}'",
                           "b'x'",
                           "1 << 2",
                           "a @ b",
                           "(y := 1)",
                           "f(*args)",
                           "f(**kw)",
                           "...",
                           "1j",
                           "'\\N{BULLET}'",
                           "12345678901234567890",
                           "import os",
                           "yield x"}) {
    EXPECT_THROW(parse_expression(code, "test"), Unsupported) << code;
  }
  for (const char* code : {"import os", "from os import path", "from dataclasses import field", "while True: pass",
                           "def f(): pass", "class A: pass", "try:\n    x = 1\nexcept:\n    pass", "with x: pass",
                           "del x", "global x", "return 1", "assert x", "raise ValueError", "x: int = 1", "l[1:2] = []",
                           "x <<= 1", "for x in y:\n    lambda: 1", "if x:\n\ty = 1"}) {
    EXPECT_THROW(parse_program(code, "test"), Unsupported) << code;
  }
}

TEST(RuleCodeUnsupported, RefusedWhenRun) {
  for (const char* code : {"print('x')",
                           "type(1)",
                           "hasattr(ll, 'key')",
                           "'x'.title()",
                           "[3, 1].sort()",
                           "(1.5).is_integer()",
                           "math.cos(0)",
                           "'{:.2f}'.format(1.0)",
                           "'{0.key}'.format(ll)",
                           "'%d' % 1",
                           "1 is 1",
                           "'a' is 'a'",
                           "(-8) ** 0.5",
                           "round(1.5, -1)",
                           "int('12', 16)",
                           "'\xc3\x89'.lower()",
                           "'ab'.startswith('a', 1)",
                           "range(3).count(1)",
                           "{'a': 1}.keys() | {'b': 2}.keys()",
                           "[1] - {'a': 1}.keys()",
                           "{'a': 1}.keys().mapping",
                           "() is ()"}) {
    Scope scope = checker_scope();
    scope.locals.set("ll", log_line(Value(), 0));
    const Expression parsed = parse_expression(code, "test");
    EXPECT_THROW(evaluate(parsed, scope), Unsupported) << code;
  }
  Scope scope = checker_scope();
  EXPECT_THROW(run("math.pi = 3", scope), Unsupported);
}

TEST(RuleCodeUnsupported, MessageNamesOriginPositionAndConstruct) {
  try {
    parse_program("s['a'] = 1\nx = [v for v in s]", "training_4.0.0/closed_common.yaml BEGIN");
    FAIL() << "no Unsupported";
  } catch (const Unsupported& e) {
    EXPECT_EQ(e.origin, "training_4.0.0/closed_common.yaml BEGIN");
    EXPECT_EQ(e.line, 2);
    EXPECT_EQ(e.column, 8);
    EXPECT_EQ(e.construct, "a list comprehension");
    EXPECT_NE(std::string(e.what()).find("training_4.0.0/closed_common.yaml BEGIN:2:8"), std::string::npos);
  }
  try {
    Scope scope;
    evaluate(parse_expression("0 or print(1)", "o"), scope);
    FAIL() << "no Unsupported";
  } catch (const Unsupported& e) {
    EXPECT_EQ(e.construct, "the builtin print");
    EXPECT_EQ(e.column, 6);
  }
}

TEST(RuleCodeUnsupported, TheEngineMayProvideMissingBuiltins) {
  Scope scope;
  int printed = 0;
  scope.globals.set("print", Value::function("print", [&](std::vector<Value>&) {
                      ++printed;
                      return Value();
                    }));
  run("print('score', 1)", scope);
  EXPECT_EQ(printed, 1);
}

TEST(RuleCodeSyntaxError, IsAnErrorButNotUnsupported) {
  for (const char* code : {"", "1 +", "(1", "1)", "[1, 2", "x = 1", "a b", "1 if 2", "'abc", "1 2", "x.", "f(a=1, 2)",
                           "f(a=1, a=2)", "not", "a not b", "$", "0777", "1__0", "1e"}) {
    try {
      parse_expression(code, "test");
      ADD_FAILURE() << "parsed: " << code;
    } catch (const Unsupported&) {
      ADD_FAILURE() << "Unsupported: " << code;
    } catch (const LimitExceeded&) {
      ADD_FAILURE() << "LimitExceeded: " << code;
    } catch (const trainbench::Error& e) {
      EXPECT_NE(std::string(e.what()).find("test:1:"), std::string::npos) << e.what();
    }
  }
  for (const char* code : {"if x:\ny = 1", "x = 1\n  y = 2", "if x:\n    a = 1\n  b = 2", "break", "x = = 1", "1 = x",
                           "f() = 1", "x + 1 = 2", "for in x: pass", "else: pass", "x += 1, y += 2"}) {
    EXPECT_THROW(
        {
          try {
            parse_program(code, "test");
          } catch (const Unsupported&) {
            ADD_FAILURE() << "Unsupported: " << code;
          }
        },
        trainbench::Error)
        << code;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Limits

std::string limit_hit(const std::string& code, const Limits& limits = {}, bool program = false) {
  Scope scope = checker_scope();
  try {
    if (program) {
      run(code, scope, limits);
    } else {
      eval_in(code, scope, limits);
    }
  } catch (const LimitExceeded& e) {
    return e.limit;
  }
  return "";
}

TEST(RuleCodeLimits, DeepNestingIsRefusedWhenParsed) {
  const std::string parens = std::string(10'000, '(') + "1" + std::string(10'000, ')');
  EXPECT_THROW(parse_expression(parens, "test"), LimitExceeded);
  EXPECT_THROW(parse_expression(std::string(10'000, '-') + "1", "test"), LimitExceeded);
  std::string nots;
  for (int i = 0; i < 10'000; ++i) nots += "not ";
  EXPECT_THROW(parse_expression(nots + "x", "test"), LimitExceeded);
  std::string sum = "1";
  for (int i = 0; i < 10'000; ++i) sum += "+1";
  EXPECT_THROW(parse_expression(sum, "test"), LimitExceeded);
  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += std::string(static_cast<size_t>(i), ' ') + "if x:\n";
  EXPECT_THROW(parse_program(blocks + std::string(300, ' ') + "pass", "test"), LimitExceeded);
}

TEST(RuleCodeLimits, EvaluationDepthIsBounded) {
  const std::string nested = std::string(150, '-') + "1";
  EXPECT_EQ(limit_hit(nested), "max_depth");
  Limits deeper;
  deeper.max_depth = 400;
  EXPECT_EQ(limit_hit(nested, deeper), "");
}

TEST(RuleCodeLimits, HugeValuesAreRefusedBeforeTheyAreBuilt) {
  EXPECT_EQ(limit_hit("'a' * 10**9"), "max_string");
  EXPECT_EQ(limit_hit("[0] * 10**12"), "max_items");
  EXPECT_EQ(limit_hit("list(range(10**12))"), "max_items");
  EXPECT_EQ(limit_hit("'{0}{0}{0}{0}'.format('x' * 2**23)"), "max_string");
  EXPECT_EQ(limit_hit("l = ['x' * 2**22] * 8\ns = ''.join(l)", {}, true), "max_string");
  Limits few;
  few.max_items = 1000;
  EXPECT_EQ(limit_hit("for i in range(900):\n    x = [i, i]", few, true), "max_items");  // counted per call
}

TEST(RuleCodeLimits, LongLoopsCountSteps) {
  Limits limits;
  limits.max_steps = 100'000;
  EXPECT_EQ(limit_hit("for i in range(10**8):\n    pass", limits, true), "max_steps");
  EXPECT_EQ(limit_hit("n = 0\nfor i in range(10000):\n    for j in range(10000):\n        n += 1", limits, true),
            "max_steps");
  EXPECT_EQ(limit_hit("l = [0]\nfor x in l:\n    l.append(x)", limits, true), "max_steps");
}

TEST(RuleCodeLimits, NestedAndCyclicValuesFailCleanly) {
  Scope scope;
  run("a = []\nfor i in range(100000):\n    a = [a]", scope);
  EXPECT_THROW(eval_in("str(a)", scope), LimitExceeded);    // Python raises RecursionError
  EXPECT_THROW(eval_in("a == [a]", scope), LimitExceeded);  // likewise
  run("c = []\nc.append(c)\ne = []\ne.append(e)\nd = {}\nd['me'] = d", scope);
  EXPECT_EQ(repr(eval_in("str(c), str(d)", scope)), "('[[...]]', \"{'me': {...}}\")");
  EXPECT_EQ(repr(eval_in("c == c, c in c, c == [c]", scope)), "(True, True, True)");  // identity, as in Python
  EXPECT_THROW(eval_in("c == e", scope), LimitExceeded);                              // Python: RecursionError
  scope.locals.get("c").items().clear();  // break the cycles so they are freed
  scope.locals.get("e").items().clear();
  scope.locals.get("d").erase(Value::string("me"));
}

// ---------------------------------------------------------------------------------------------------------
// Snippets of the official rule files

struct CheckCase {
  const char* code;
  const char* state;   // s, as JSON
  const char* value;   // v (the log line's value), as JSON
  double timestamp;    // ll.timestamp
  const char* python;  // what python3 made of it: True or False (the check's truth value), or the exception
};

// Runs a CHECK / ATLEAST_ONE_CHECK / FIRST_CHECK / END CHECK as the checker does:
// eval(code, {'s': s, 'math': math, 'is_integer': ..., 'enqueue_config': ...}, {'ll': ll, 'v': v}).
std::string check_outcome(const CheckCase& c) {
  Scope scope = checker_scope();
  scope.globals.set("s", json(c.state));
  scope.globals.set("is_integer", is_integer_function());
  const Value v = json(c.value);
  scope.locals.set("ll", log_line(v, c.timestamp));
  scope.locals.set("v", v);
  try {
    return truthy(evaluate(parse_expression(c.code, "check"), scope)) ? "True" : "False";
  } catch (const PythonError& e) {
    return e.type;
  }
}

TEST(RuleCodeRuleSnippets, ChecksAgreeWithPython) {
  const char* const kRunning =
      R"({"global_batch_size": 1536, "init_started": true, "init_stopped": true, "run_started": true, "run_stopped": false, "in_epoch": true, "last_epoch": 3, "in_block": false, "last_eval": 2, "first_init_start": 1000.0, "compile_time_mins": 30, "initialized_tensors": [], "num_prompts_per_step": 128, "next_validation_samples": 4608, "target_accuracy": 0.69, "opt_learning_rate_warmup_steps": 6000, "save_model_ts": [10.0, 20.5], "run_start_ts": 10.0})";
  const char* const kEarly =
      R"({"global_batch_size": 8, "init_stopped": false, "run_started": false, "in_epoch": false, "last_epoch": 0, "last_eval": 0, "first_init_start": 9e+99, "compile_time_mins": 0, "initialized_tensors": ["joint_net", "pre_rnn", "post_rnn", "pred_embed", "dec_rnn", "joint_pred", "joint_enc"], "sgd_decay": 0, "sgd": 0, "lars_decay_steps": 1, "lars": 1, "lars_decay_power": 1, "lars_wd": 1, "lars_eps": 1})";
  const CheckCase cases[] = {
      {R"('epoch_num' in v['metadata'])", kRunning, R"({"value": null, "metadata": {"epoch_num": 1}})", 0.0, "True"},
      {R"('epoch_num' in v['metadata'])", kRunning, R"({"value": null, "metadata": {"samples_count": 1}})", 0.0,
       "False"},
      {R"(v['value'] < 1.0)", kRunning, R"({"value": 0.75, "metadata": {}})", 0.0, "True"},
      {R"((v['value'] >= 0.720) and v['value'] < 1.0)", kRunning, R"({"value": 0.72, "metadata": {}})", 0.0, "True"},
      {R"(0.0 <= v['value'] <= 1.0)", kRunning, R"({"value": 1.5, "metadata": {}})", 0.0, "False"},
      {R"((0.0 <= v['value']['FID'] <= 90.0) and (0.15 <= v['value']['CLIP'] <= 1.0))", kRunning,
       R"({"value": {"FID": 88.2, "CLIP": 0.151}, "metadata": {}})", 0.0, "True"},
      {R"(v['value']['BBOX'] >= 0.377 and v['value']['BBOX'] < 1.0 and v['value']['SEGM'] >= 0.339 and v['value']['SEGM'] < 1.0)",
       kRunning, R"({"value": {"BBOX": 0.378, "SEGM": 0.338}, "metadata": {}})", 0.0, "False"},
      {R"(('epoch_num' in v['metadata']) | ('samples_count' in v['metadata']))", kRunning,
       R"({"value": null, "metadata": {"samples_count": 3}})", 0.0, "True"},
      {R"('first_epoch_num' in v['metadata'] if 'epoch_count' in v['metadata'] else True)", kRunning,
       R"({"value": null, "metadata": {"epoch_count": 1}})", 0.0, "False"},
      {R"(v['metadata']['epoch_count'] > 0 if 'epoch_count' in v['metadata'] else True)", kRunning,
       R"({"value": null, "metadata": {}})", 0.0, "True"},
      {R"(abs(v['value'] - 0.125 * (256 / s['global_batch_size']) ** 0.5) < 1e-9)", R"({"global_batch_size": 1024})",
       R"({"value": 0.0625, "metadata": {}})", 0.0, "True"},
      {R"(abs(v['value'] - 2.4e-05 * (s['global_batch_size'] / 16384) ** 0.5) < 1e-9)",
       R"({"global_batch_size": 65536})", R"({"value": 4.8e-05, "metadata": {}})", 0.0, "True"},
      {R"(is_integer(math.log2(v['value'] / 0.0001)))", kRunning, R"({"value": 0.0008, "metadata": {}})", 0.0, "True"},
      {R"(is_integer(math.log2(v['value'] / 0.0001)))", kRunning, R"({"value": 0.0003, "metadata": {}})", 0.0, "False"},
      {R"(is_integer(v['value'] / 0.02) or ( s['global_batch_size'] < 16 and is_integer(0.02 / v['value']) ))", kEarly,
       R"({"value": 0.005, "metadata": {}})", 0.0, "True"},
      {R"(isinstance(v['value'], int))", kRunning, R"({"value": true, "metadata": {}})", 0.0, "True"},
      {R"(isinstance(v['value'], int))", kRunning, R"({"value": 4.0, "metadata": {}})", 0.0, "False"},
      {R"(len(v['value']) == 2)", kRunning, R"({"value": [0.9, 0.999], "metadata": {}})", 0.0, "True"},
      {R"(ll.timestamp - s['first_init_start'] < (s['compile_time_mins']*60*1e3))", kRunning,
       R"({"value": null, "metadata": {}})", 1801000.0, "False"},
      {R"(not s['init_stopped'])", kEarly, R"({"value": null, "metadata": {}})", 0.0, "True"},
      {R"(s['global_batch_size'] == s['num_prompts_per_step'] * v['value'])", kRunning,
       R"({"value": 12, "metadata": {}})", 0.0, "True"},
      {R"(v['metadata']['samples_count'] == s['next_validation_samples'])", kRunning,
       R"({"value": 0.5, "metadata": {"samples_count": 4608.0}})", 0.0, "True"},
      {R"(v['value'] != '')", kRunning, R"({"value": "", "metadata": {}})", 0.0, "False"},
      {R"(v['value'] * 1152 == s['global_batch_size'] * 8e-5)", kRunning,
       R"({"value": 0.0001066666666666667, "metadata": {}})", 0.0, "False"},
      {R"(v['value'] == 1_200_000 - s['opt_learning_rate_warmup_steps'])", kRunning,
       R"({"value": 1194000, "metadata": {}})", 0.0, "True"},
      {R"(v['value'] == 2e-5 or v['value'] == 3e-5)", kRunning, R"({"value": 3e-05, "metadata": {}})", 0.0, "True"},
      {R"(v['value'] == math.ceil(1_200_000 * 1152 / s['global_batch_size'] ) - s['opt_learning_rate_warmup_steps'])",
       kRunning, R"({"value": 894000, "metadata": {}})", 0.0, "True"},
      {R"(v['value'] in ['fp64', 'fp32', 'tf32', 'fp16', 'fp8', 'nvfp4', 'mxfp4', 'bfloat16', 'Graphcore FLOAT 16.16', 'int8', 'uint8', 'int4', 'uint4'])",
       kRunning, R"({"value": "Graphcore FLOAT 16.16", "metadata": {}})", 0.0, "True"},
      {R"(v['value'] in [1, float('inf')])", kRunning, R"({"value": 1.0, "metadata": {}})", 0.0, "True"},
      {R"(int(v['metadata']['samples_count']) == s['global_batch_size'] * math.floor(42 + 24576 / s['global_batch_size']))",
       kRunning, R"({"value": 0.5, "metadata": {"samples_count": "90624"}})", 0.0, "False"},
      {R"(sorted(s['initialized_tensors']) == sorted(['pre_rnn', 'post_rnn', 'pred_embed', 'dec_rnn', 'joint_pred', 'joint_enc', 'joint_net']))",
       kEarly, R"({"value": null, "metadata": {}})", 0.0, "True"},
      {R"(v['value'] > s['target_accuracy'])", kRunning, R"({"value": 0.69, "metadata": {}})", 0.0, "False"},
      {R"(is_integer(10 * (v['value'][1] / 50.0 - 1)))", kRunning, R"({"value": [1, 55], "metadata": {}})", 0.0,
       "True"},
      {R"(( s['init_stopped'] == True ))", kRunning, R"({"value": null, "metadata": {}})", 0.0, "True"},
      {R"(v['metadata']['step_num'] >= 0 if 'step_num' in v['metadata'] else True)", kRunning,
       R"({"value": null, "metadata": {"step_num": -1}})", 0.0, "False"},
      {R"((v['value'] >= 0.712 if s['global_batch_size'] < 8192 else v['value'] >= 0.706) and v['value'] < 1.0)",
       kRunning, R"({"value": 0.71, "metadata": {}})", 0.0, "False"},
      {R"(v['metadata']['first_epoch_num'] == (s['last_eval'] if s['in_epoch'] else s['last_epoch'] + 1))", kRunning,
       R"({"value": null, "metadata": {"first_epoch_num": 2}})", 0.0, "True"},
      {R"(s['run_started'] and not s['in_block'] and ((s['in_epoch'] and (v['metadata']['first_epoch_num'] == s['last_eval'])) or (not s['in_epoch'] and (v['metadata']['first_epoch_num'] == (s['last_epoch']+1)))) and (v['metadata']['epoch_count']>0) and not s['run_stopped'])",
       kRunning, R"({"value": null, "metadata": {"first_epoch_num": 2, "epoch_count": 1}})", 0.0, "True"},
      {R"((abs(v['metadata']['timestamp'] - (s['save_model_ts'][v['metadata']['iteration']-1] - s['run_start_ts'])<1.5e-3)) and (v['metadata']['iteration'] <= s['last_eval']))",
       kRunning, R"({"value": null, "metadata": {"timestamp": 10.5, "iteration": 2}})", 0.0, "True"},
      {R"(is_integer(v['value'] / 1000.0))", kRunning, R"({"value": 16000, "metadata": {}})", 0.0, "True"},
      {R"(is_integer(v['value']) and v['value'] > 0)", kRunning, R"({"value": 0, "metadata": {}})", 0.0, "False"},
      {R"(v['value'] in ['resnet', 'ssd', 'stable_diffusion', 'maskrcnn', 'gpt3', 'dlrm_dcnv2', 'bert', 'rnnt', 'unet3d', 'gnn','llama2_70b_lora'])",
       kRunning, R"({"value": "llama31_8b", "metadata": {}})", 0.0, "False"},
      {R"(((s['sgd_decay']==s['sgd']) and (s['lars_decay_steps']==s['lars']) and (s['lars_decay_power']==s['lars']) and (s['lars_wd']==s['lars']) and (s['lars_eps']==s['lars'])))",
       kEarly, R"({"value": null, "metadata": {}})", 0.0, "True"},
      {R"(v['value'] > 0)", kRunning, R"({"value": null, "metadata": {}})", 0.0, "TypeError"},
      {R"(v['metadata']['epoch_count'] > 0)", kRunning, R"({"value": 1, "metadata": {}})", 0.0, "KeyError"},
      {R"(abs(v['value'] - 0.125 * (256 / s['global_batch_size']) ** 0.5) < 1e-9)", R"({"global_batch_size": 0})",
       R"({"value": 0.0625, "metadata": {}})", 0.0, "ZeroDivisionError"},
      {R"(is_integer(math.log2(v['value'] / 0.0001)))", kRunning, R"({"value": 0, "metadata": {}})", 0.0, "ValueError"},
      {R"(len(v['value']) == 2)", kRunning, R"({"value": 7, "metadata": {}})", 0.0, "TypeError"},
      {R"(v['value'] > s['target_accuracy'])", R"({})", R"({"value": 0.7, "metadata": {}})", 0.0, "KeyError"},
  };
  for (const CheckCase& c : cases) EXPECT_EQ(check_outcome(c), c.python) << c.code;
}

struct ProgramCase {
  const char* code;
  const char* state;
  const char* value;
  double timestamp;
  const char* python;  // repr(s) after exec(code, {'s': s, 'math': math, ...}, {'ll': ll, 'v': v}), or the exception
};

TEST(RuleCodeRuleSnippets, ProgramsLeaveTheStatePythonLeaves) {
  const ProgramCase cases[] = {
      {"s.update({\n    'init_started': False,\n    'init_stopped' : False,\n    'run_started' : False,\n    "
       "'run_stopped' : False,\n    'in_epoch' : False,\n    'last_epoch' : 0,\n    'in_block' : False,\n    "
       "'block_first_epoch' : -1,\n    'first_init_start': 9e99,\n    'compile_time_mins': 0,\n})",
       R"({})", R"({"value": null, "metadata": {}})", 0.0,
       R"({'init_started': False, 'init_stopped': False, 'run_started': False, 'run_stopped': False, 'in_epoch': False, 'last_epoch': 0, 'in_block': False, 'block_first_epoch': -1, 'first_init_start': 9e+99, 'compile_time_mins': 0})"},
      {R"(s['init_started'] = True; s['first_init_start']=min(s['first_init_start'], ll.timestamp))",
       R"({"first_init_start": 9e+99})", R"({"value": null, "metadata": {}})", 1234.5,
       R"({'first_init_start': 1234.5, 'init_started': True})"},
      {R"(s['initialized_tensors'] += [v['metadata']['tensor']])", R"({"initialized_tensors": ["a"]})",
       R"({"value": null, "metadata": {"tensor": "b"}})", 0.0, R"({'initialized_tensors': ['a', 'b']})"},
      {R"(enqueue_config('training_6.0.0/{}_common.yaml'.format(v['value'])); s['compile_time_mins'] = 240 if v['value'] == 'open' else 30)",
       R"({})", R"({"value": "open", "metadata": {}})", 0.0, R"({'compile_time_mins': 240})"},
      {"if v['metadata']['samples_count'] == s['next_validation_samples']:\n    s['next_validation_samples'] += "
       "s['global_batch_size']",
       R"({"next_validation_samples": 4608, "global_batch_size": 1536})",
       R"({"value": 0.6, "metadata": {"samples_count": 4608}})", 0.0,
       R"({'next_validation_samples': 6144, 'global_batch_size': 1536})"},
      {"s['global_batch_size'] = v['value']\ns['learning_rate'] = 1.0e-6 * (s['global_batch_size'] / 256) ** "
       "0.5\ns['validation_start_samples'] = v['value'] * math.ceil(2.5 + 3840 / "
       "v['value'])\ns['next_validation_samples'] = s['validation_start_samples']",
       R"({})", R"({"value": 1024, "metadata": {}})", 0.0,
       R"({'global_batch_size': 1024, 'learning_rate': 2e-06, 'validation_start_samples': 7168, 'next_validation_samples': 7168})"},
      {R"(s['opt_learning_rate_warmup_steps'] = math.ceil(8000 * 1152 / s['global_batch_size'] ))",
       R"({"global_batch_size": 1536})", R"({"value": null, "metadata": {}})", 0.0,
       R"({'global_batch_size': 1536, 'opt_learning_rate_warmup_steps': 6000})"},
      {R"(s['in_block'] = True; s['accuracy_printed'] = True; s['block_first_epoch'] = v['metadata'].get('first_epoch_num', 'not set in block_start'))",
       R"({})", R"({"value": null, "metadata": {}})", 0.0,
       R"({'in_block': True, 'accuracy_printed': True, 'block_first_epoch': 'not set in block_start'})"},
      {R"(s['model_saved'] = True ; s['save_model_ts'].append(ll.timestamp))", R"({"save_model_ts": [1.5]})",
       R"({"value": null, "metadata": {}})", 2.25, R"({'save_model_ts': [1.5, 2.25], 'model_saved': True})"},
      {R"(s[v['value']]=1)", R"({"sgd": 0, "lars": 0})", R"({"value": "lars", "metadata": {}})", 0.0,
       R"({'sgd': 0, 'lars': 1})"},
      {R"(s['sgd_decay'] = s['sgd_decay']+1)", R"({})", R"({"value": null, "metadata": {}})", 0.0, R"(KeyError)"},
  };
  for (const ProgramCase& c : cases) {
    Scope scope = checker_scope();
    const Value s = json(c.state);
    scope.globals.set("s", s);
    scope.globals.set("enqueue_config", Value::function("enqueue_config", [](std::vector<Value>&) { return Value(); }));
    const Value v = json(c.value);
    scope.locals.set("ll", log_line(v, c.timestamp));
    scope.locals.set("v", v);
    std::string outcome;
    try {
      execute(parse_program(c.code, "post"), scope);
      outcome = repr(s);
    } catch (const PythonError& e) {
      outcome = e.type;
    }
    EXPECT_EQ(outcome, c.python) << c.code;
  }
}

// The BEGIN block of training_4.0.0/closed_stable_diffusion.yaml, which builds aggregated_eval_accuracy
// lines from copies of the eval_accuracy lines.
TEST(RuleCodeRuleSnippets, StableDiffusionBeginAggregatesEvalLines) {
  const char* begin =
      "from dataclasses import replace\nagg_eval_lines = {}\nfor line in loglines:\n    if line.key == "
      "\"eval_accuracy\" and 'metric' in line.value['metadata']:\n        samples_count = "
      "line.value['metadata']['samples_count']\n        if samples_count not in agg_eval_lines:\n            new_line "
      "= replace(line) # Make a copy\n            new_line.key = \"aggregated_eval_accuracy\"\n            "
      "new_line.full_string = \"\" # Not needed\n            new_line.lineno = -1      # Not needed\n            "
      "new_line.value = {'value': {'samples_count': samples_count}, 'metadata':{}}\n            "
      "agg_eval_lines[samples_count] = new_line\n\n        agg_eval_lines[samples_count].timestamp = "
      "max(line.timestamp, agg_eval_lines[samples_count].timestamp)\n        "
      "agg_eval_lines[samples_count].value['value'][line.value['metadata']['metric']] = "
      "line.value['value']\nloglines.extend(agg_eval_lines.values())\n";
  const Value lines = Value::list({
      log_line(json(R"({"value": 80.5, "metadata": {"metric": "FID", "samples_count": 100}})"), 1.0, "eval_accuracy",
               "l1"),
      log_line(json(R"({"value": 0.18, "metadata": {"metric": "CLIP", "samples_count": 100}})"), 2.5, "eval_accuracy",
               "l2"),
      log_line(json(R"({"value": 70.25, "metadata": {"metric": "FID", "samples_count": 200}})"), 2.0, "eval_accuracy",
               "l3"),
      log_line(json(R"({"value": null, "metadata": {"status": "success"}})"), 1.5, "run_stop", "l4"),
  });
  for (size_t i = 0; i < lines.items().size(); ++i) lines.items()[i].set_attr("lineno", Value::integer(int64_t(i) + 1));
  Scope scope = checker_scope();
  scope.globals.set("s", Value::dict());
  scope.locals.set("loglines", lines);
  execute(parse_program(begin, "closed_stable_diffusion.yaml BEGIN"), scope);
  ASSERT_EQ(lines.items().size(), 6U);
  EXPECT_EQ(
      repr(Value::list({lines.items()[4], lines.items()[5]})),
      R"([LogLine(full_string='', timestamp=2.5, key='aggregated_eval_accuracy', value={'value': {'samples_count': 100, 'FID': 80.5, 'CLIP': 0.18}, 'metadata': {}}, lineno=-1), LogLine(full_string='', timestamp=2.0, key='aggregated_eval_accuracy', value={'value': {'samples_count': 200, 'FID': 70.25}, 'metadata': {}}, lineno=-1)])");
  EXPECT_EQ(
      repr(lines.items()[0]),
      R"(LogLine(full_string='l1', timestamp=1.0, key='eval_accuracy', value={'value': 80.5, 'metadata': {'metric': 'FID', 'samples_count': 100}}, lineno=1))");  // the originals are untouched
}

}  // namespace
}  // namespace trainbench::review::rule_code
