#include "test_support.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace trainbench::review::testing {

namespace fs = std::filesystem;

const Ruleset& ruleset_1_1() {
  static const Ruleset ruleset = load_ruleset("1.1.0");
  return ruleset;
}

std::string test_path(const std::string& relative) { return std::string(REVIEW_TEST_DIR) + "/" + relative; }

std::string nvidia_path(const std::string& relative) {
  return relative.empty() ? std::string(REVIEW_NVIDIA_DIR) : std::string(REVIEW_NVIDIA_DIR) + "/" + relative;
}

bool nvidia_fixture_present() { return fs::is_directory(nvidia_path("results")); }

std::string v11_data_path(const std::string& relative) { return std::string(REVIEW_V11_DATA_DIR) + "/" + relative; }

void copy_nvidia_results(const std::string& root,
                         const std::vector<std::pair<std::string, std::string>>& results) {
  for (const auto& [system, benchmark] : results) {
    fs::create_directories(root + "/systems");
    fs::copy_file(nvidia_path("systems/" + system + ".json"), root + "/systems/" + system + ".json",
                  fs::copy_options::overwrite_existing);
    copy_tree(nvidia_path("results/" + system + "/" + benchmark), root + "/results/" + system + "/" + benchmark);
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

ScratchFolder::ScratchFolder() {
  std::string pattern = (fs::temp_directory_path() / "trainbench-review-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

ScratchFolder::~ScratchFolder() {
  std::error_code error;
  fs::remove_all(path_, error);
}

void copy_tree(const std::string& from, const std::string& to) {
  fs::create_directories(to);
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

const Finding* find_finding(const std::vector<Finding>& findings, Severity severity, const std::string& text) {
  for (const auto& finding : findings)
    if (finding.severity == severity && finding.message.find(text) != std::string::npos) return &finding;
  return nullptr;
}

std::string dump(const std::vector<Finding>& findings) {
  std::string text;
  for (const auto& finding : findings) text += "  " + format_finding(finding) + "\n";
  return text.empty() ? "  (no findings)\n" : text;
}

}  // namespace trainbench::review::testing
