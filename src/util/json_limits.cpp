#include "util/json_limits.h"

#include <algorithm>

#include "util/error.h"

namespace trainbench {

bool JsonStringState::consume(char c) {
  if (in_string_) {
    if (escaped_)
      escaped_ = false;
    else if (c == '\\')
      escaped_ = true;
    else if (c == '"')
      in_string_ = false;
    return true;
  }
  in_string_ = c == '"';
  return in_string_;
}

int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  JsonStringState strings;
  for (const char c : text) {
    if (strings.consume(c)) continue;
    if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

void check_json_nesting(std::string_view text, const std::string& source, int limit) {
  if (json_nesting_depth(text, limit) > limit)
    fail(source, "JSON nested deeper than " + std::to_string(limit) + " levels");
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  // Values come from documents that passed check_json_nesting, so dump() recurses at most that deep.
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace trainbench
