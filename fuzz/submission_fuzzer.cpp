// libFuzzer target: any bytes as a submission tree (`trainbench review <org>`: systems/, results/, benchmarks/),
// reviewed against the v1.1 rules. The input is a little archive: each line "=== <path>" starts a file, the
// lines after it are its content (a path is cut to [A-Za-z0-9._-] components, at most 8 deep, without "." or
// ".."; at most 64 files). The review must never crash or hang; it throws only an Error naming the tree (one
// without results), and every finding must stay printable.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_entry.h"
#include "review/finding.h"
#include "review/ruleset.h"
#include "review/submission.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using namespace trainbench::review;

// The archive's path as a relative path of safe components; empty when nothing is left of it.
fs::path safe_path(std::string_view text) {
  fs::path path;
  int depth = 0;
  size_t start = 0;
  while (start <= text.size() && depth < 8) {
    const size_t slash = std::min(text.find('/', start), text.size());
    std::string component;
    for (const char c : text.substr(start, slash - start))
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') component += c;
    if (!component.empty() && component != "." && component != "..") {
      path /= component;
      ++depth;
    }
    start = slash + 1;
  }
  return path;
}

void write_tree(const fs::path& root, std::string_view archive) {
  std::ofstream file;
  int files = 0;
  size_t start = 0;
  while (start < archive.size()) {
    const size_t end = std::min(archive.find('\n', start), archive.size());
    const std::string_view line = archive.substr(start, end - start);
    if (line.substr(0, 4) == "=== ") {
      file.close();
      const fs::path path = safe_path(line.substr(4));
      if (!path.empty() && files < 64) {
        std::error_code ignored;
        fs::create_directories((root / path).parent_path(), ignored);
        file.open(root / path, std::ios::binary | std::ios::app);
        ++files;
      }
    } else if (file.is_open()) {
      file << line << '\n';
    }
    start = end + 1;
  }
}

}  // namespace

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  static const Ruleset ruleset = load_ruleset("1.1.0", TRAINBENCH_RULES_DIR);
  const fs::path root = trainbench::fuzz::scratch_dir() / "org";
  fs::remove_all(root);
  fs::create_directories(root);
  write_tree(root, std::string_view(reinterpret_cast<const char*>(data), size));
  SubmissionReview review;
  try {
    review = review_submission(root.string(), ruleset);
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind(root.string(), 0) != 0) std::abort();  // e.g. a tree without results
    return 0;
  }
  const auto check = [](const std::vector<Finding>& findings) {
    for (const auto& finding : findings)
      if (printable(finding.message, 1 << 20) != finding.message) std::abort();
  };
  check(review.findings);
  for (const auto& system : review.systems) {
    check(system.findings);
    for (const auto& benchmark : system.benchmarks) check(benchmark.findings);
  }
  (void)verdict_name(review.verdict());
  return 0;
}
