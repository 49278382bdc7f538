#pragma once
// The value predicates a rule file can put on a logged value or metadata field. They are the v1.1 YAML
// CHECK expressions, reduced to the handful of shapes those expressions take (in a list, == x, > x,
// x*k for integer k, x*2^N, list length, ...), so rules stay data and a check can say what it expected.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace trainbench::review {

struct ValueCheck {
  bool not_empty = false;              // neither "" nor null
  std::vector<nlohmann::json> one_of;  // equal to one of these
  std::optional<nlohmann::json> equals;
  std::optional<double> greater_than, at_least, less_than, at_most;
  std::optional<double> grid_step;  // (value - grid_origin) / grid_step is an integer
  double grid_origin = 0;
  std::optional<double> power_of_two_times;  // value = x * 2^N for an integer N
  std::optional<size_t> length;              // a list of this length
  bool integer = false;
  std::vector<std::string> has_fields;  // an object with these fields
  std::vector<size_t> element_indices;  // element_checks[i] applies to list element element_indices[i]
  std::vector<ValueCheck> element_checks;

  // Reads the predicates of one "value" object of a rule file; throws trainbench::Error naming `where`.
  static ValueCheck from_json(const nlohmann::json& spec, const std::string& where);
};

// Why `value` fails `check`, or nothing when it passes.
std::optional<std::string> check_value(const ValueCheck& check, const nlohmann::json& value);

// A number, or the strings "NaN", "Infinity" and "-Infinity" the parser makes of Python's bare words.
std::optional<double> number_of(const nlohmann::json& value);

// The shortest text of a number as JSON writes it, without a trailing ".0" (2, 0.0001, 1e-09).
std::string format_number(double value);

// Short JSON text of a value for messages (at most max_bytes, printable).
std::string describe(const nlohmann::json& value, size_t max_bytes = 80);

// Equality the way the rule files mean it: numbers by value (1 == 1.0, within 1e-9 relative), the rest exactly.
bool same_value(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace trainbench::review
