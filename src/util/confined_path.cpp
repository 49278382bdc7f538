#include "util/confined_path.h"

#include <filesystem>

#include "util/error.h"

namespace trainbench {

std::string path_inside(const std::string& root, const std::string& relative, const std::string& where,
                        bool allow_outside_root) {
  const std::filesystem::path path(relative);
  if (!allow_outside_root) {
    if (path.has_root_name() || path.has_root_directory())
      fail(where, "\"" + relative + "\" is an absolute path; expected a path relative to " + root);
    const std::filesystem::path normal = path.lexically_normal();
    if (normal.empty() || *normal.begin() == "..")
      fail(where, "\"" + relative + "\" leads out of " + root + "; expected a path inside it");
  }
  return (std::filesystem::path(root) / path).string();
}

}  // namespace trainbench
