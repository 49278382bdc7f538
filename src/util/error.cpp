#include "util/error.h"

namespace trainbench {

void fail(const std::string& where, const std::string& what) { throw Error(where + ": " + what); }

}  // namespace trainbench
