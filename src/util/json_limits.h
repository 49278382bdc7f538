#pragma once
// Limits every reader of user JSON applies before it builds or walks a document: nlohmann's dump() and the
// readers' own walks recurse once per level, so a file of 100,000 nested brackets would overflow the stack, and
// an error message that quotes a value must not echo megabytes of it.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace trainbench {

// Deeper than any real COCO, manifest, preset, rules or result-log document (those nest at most 6 levels).
constexpr int kMaxJsonNesting = 64;

// Follows JSON string literals one character at a time, so scanners can skip their contents.
class JsonStringState {
 public:
  // Consumes `c`; true when it belongs to a string literal, quotes included.
  bool consume(char c);

 private:
  bool in_string_ = false, escaped_ = false;
};

// Deepest {}/[] nesting outside strings; stops counting once past `limit`.
int json_nesting_depth(std::string_view text, int limit);

// Throws Error "<source>: JSON nested deeper than 64 levels" before any parser sees such text.
void check_json_nesting(std::string_view text, const std::string& source, int limit = kMaxJsonNesting);

// value.dump(), cut to `max_chars` with "..." so that a message quoting a bad value stays one line.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 80);

}  // namespace trainbench
