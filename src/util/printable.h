#pragma once
#include <cstddef>
#include <string>

namespace trainbench {

// Text from outside (a log line, a file name with a newline and a forged `:::MLLOG` line in it) made safe to
// print: control characters and bytes that are not valid UTF-8 become \xNN, so it can always go to a terminal,
// into JSON or HTML, and never starts a line of its own. Longer text is cut at max_bytes.
std::string printable(const std::string& text, size_t max_bytes = 200);

}  // namespace trainbench
