#include "review/json_checks.h"

#include <cmath>
#include <limits>

#include "review/finding.h"
#include "util/error.h"

namespace trainbench::review {

namespace {

using nlohmann::json;

// Logged values went through binary floating point (0.003 / 0.001 = 2.9999999999999996), so "an integer"
// allows a rounding error, but never half a unit.
bool near_integer(double x) {
  return std::isfinite(x) && std::fabs(x - std::round(x)) <= std::max(1e-6, 1e-12 * std::fabs(x));
}

double number_field(const json& spec, const char* name, const std::string& where) {
  const auto found = spec.find(name);
  if (found == spec.end() || !found->is_number()) fail(where, std::string("'") + name + "' must be a number");
  return found->get<double>();
}

}  // namespace

std::string format_number(double value) {
  std::string text = json(value).dump();
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  return text;
}

std::optional<double> number_of(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

std::string describe(const json& value, size_t max_bytes) {
  return printable(value.dump(-1, ' ', false, json::error_handler_t::replace), max_bytes);
}

bool same_value(const json& a, const json& b) {
  const auto x = number_of(a), y = number_of(b);
  if (x && y && !a.is_boolean() && !b.is_boolean()) {
    if (std::isinf(*x) || std::isinf(*y)) return *x == *y;
    return std::fabs(*x - *y) <= 1e-9 * std::max({1e-300, std::fabs(*x), std::fabs(*y)});
  }
  return a == b;
}

ValueCheck ValueCheck::from_json(const json& spec, const std::string& where) {
  if (!spec.is_object()) fail(where, "a value check must be an object");
  ValueCheck check;
  for (const auto& [name, item] : spec.items()) {
    const std::string at = where + "." + name;
    if (name == "note") continue;
    if (name == "not_empty" && item.is_boolean())
      check.not_empty = item.get<bool>();
    else if (name == "integer" && item.is_boolean())
      check.integer = item.get<bool>();
    else if (name == "one_of" && item.is_array())
      check.one_of = item.get<std::vector<json>>();
    else if (name == "equals")
      check.equals = item;
    else if (name == "gt")
      check.greater_than = number_field(spec, "gt", at);
    else if (name == "ge")
      check.at_least = number_field(spec, "ge", at);
    else if (name == "lt")
      check.less_than = number_field(spec, "lt", at);
    else if (name == "le")
      check.at_most = number_field(spec, "le", at);
    else if (name == "power_of_two_times")
      check.power_of_two_times = number_field(spec, name.c_str(), at);
    else if (name == "length" && item.is_number_unsigned())
      check.length = item.get<size_t>();
    else if (name == "grid" && item.is_object()) {
      check.grid_step = number_field(item, "step", at);
      if (*check.grid_step <= 0) fail(at, "'step' must be positive");
      if (item.contains("origin")) check.grid_origin = number_field(item, "origin", at);
    } else if (name == "has_fields" && item.is_array()) {
      for (const auto& field : item) {
        if (!field.is_string()) fail(at, "field names must be strings");
        check.has_fields.push_back(field.get<std::string>());
      }
    } else if (name == "element" && item.is_object() && item.contains("index") && item["index"].is_number_unsigned()) {
      check.element_indices.push_back(item["index"].get<size_t>());
      check.element_checks.push_back(from_json(item.value("value", json::object()), at + ".value"));
    } else {
      fail(at, "unknown or malformed value check");
    }
  }
  return check;
}

std::optional<std::string> check_value(const ValueCheck& check, const json& value) {
  if (check.not_empty && (value.is_null() || (value.is_string() && value.get_ref<const std::string&>().empty())))
    return "value must not be empty";
  if (!check.one_of.empty()) {
    bool found = false;
    for (const auto& allowed : check.one_of) found = found || same_value(value, allowed);
    if (!found) return "value " + describe(value) + " is not one of " + describe(json(check.one_of));
  }
  if (check.equals && !same_value(value, *check.equals))
    return "value " + describe(value) + " must be " + describe(*check.equals);
  if (check.length && (!value.is_array() || value.size() != *check.length))
    return "value " + describe(value) + " must be a list of " + std::to_string(*check.length) + " items";
  if (!check.has_fields.empty()) {
    if (!value.is_object()) return "value " + describe(value) + " must be an object";
    for (const auto& field : check.has_fields)
      if (!value.contains(field)) return "value " + describe(value) + " has no field '" + field + "'";
  }
  for (size_t i = 0; i < check.element_checks.size(); ++i) {
    const size_t index = check.element_indices[i];
    if (!value.is_array() || value.size() <= index)
      return "value " + describe(value) + " must be a list with an element " + std::to_string(index);
    if (auto problem = check_value(check.element_checks[i], value[index]))
      return "element " + std::to_string(index) + ": " + *problem;
  }
  const bool numeric = check.greater_than || check.at_least || check.less_than || check.at_most || check.grid_step ||
                       check.power_of_two_times || check.integer;
  if (!numeric) return std::nullopt;
  const auto number = value.is_boolean() ? std::nullopt : number_of(value);
  if (!number || std::isnan(*number)) return "value " + describe(value) + " must be a number";
  const double x = *number;
  if (check.greater_than && !(x > *check.greater_than))
    return "value " + describe(value) + " must be > " + format_number(*check.greater_than);
  if (check.at_least && !(x >= *check.at_least))
    return "value " + describe(value) + " must be >= " + format_number(*check.at_least);
  if (check.less_than && !(x < *check.less_than))
    return "value " + describe(value) + " must be < " + format_number(*check.less_than);
  if (check.at_most && !(x <= *check.at_most))
    return "value " + describe(value) + " must be <= " + format_number(*check.at_most);
  if (check.integer && !near_integer(x)) return "value " + describe(value) + " must be an integer";
  if (check.grid_step && !near_integer((x - check.grid_origin) / *check.grid_step)) {
    std::string expected = check.grid_origin == 0
                               ? "a multiple of " + format_number(*check.grid_step)
                               : format_number(check.grid_origin) + " + k * " + format_number(*check.grid_step);
    return "value " + describe(value) + " must be " + expected + " for an integer k";
  }
  if (check.power_of_two_times && !(x > 0 && near_integer(std::log2(x / *check.power_of_two_times))))
    return "value " + describe(value) + " must be " + format_number(*check.power_of_two_times) +
           " * 2^N for an integer N";
  return std::nullopt;
}

}  // namespace trainbench::review
