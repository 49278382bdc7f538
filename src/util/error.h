#pragma once
// One exception type for every user-facing failure: bad flags, bad files, bad config. Its message is the
// whole explanation a user sees (what was wrong, where, and what was expected), so callers never need to
// add context-free "error:" prefixes of their own.
#include <stdexcept>
#include <string>

namespace trainbench {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Formats "<where>: <what>" for errors about a file, field or flag.
[[noreturn]] void fail(const std::string& where, const std::string& what);

}  // namespace trainbench
