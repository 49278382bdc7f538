#pragma once
// For tests of user-facing errors: the message of the trainbench::Error an action throws.
#include <functional>
#include <string>

#include "util/error.h"

namespace trainbench::testing {

inline std::string error_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no Error thrown)";
}

}  // namespace trainbench::testing
