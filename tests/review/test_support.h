#pragma once
// Helpers shared by the review tests: fixture paths, scratch folders and finding lookups.
#include <string>
#include <vector>

#include "review/finding.h"
#include "review/ruleset.h"

namespace trainbench::review::testing {

// The embedded v1.1 ruleset, parsed once.
const Ruleset& ruleset_1_1();

std::string test_path(const std::string& relative);    // below tests/review
std::string nvidia_path(const std::string& relative);  // below shared/.../NVIDIA
bool nvidia_fixture_present();
std::string v11_data_path(const std::string& relative);  // below shared/data/mlperf-training-v1.1

// A submission tree in `root` holding NVIDIA's single-node (8x A100) system descriptions and the results of
// the given systems' benchmarks, e.g. {"dgxa100_ngc21.09_mxnet", "resnet"}: a small copy to break.
void copy_nvidia_results(const std::string& root, const std::vector<std::pair<std::string, std::string>>& results);

std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);

// A fresh folder under the system temp dir, removed with everything in it when the object dies.
class ScratchFolder {
 public:
  ScratchFolder();
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& relative) const { return path_ + "/" + relative; }

 private:
  std::string path_;
};

// A copy of the NVIDIA submission in a scratch folder, for making broken variants.
void copy_tree(const std::string& from, const std::string& to);

// The first finding of this severity whose message contains `text`, or nullptr.
const Finding* find_finding(const std::vector<Finding>& findings, Severity severity, const std::string& text);

// All findings, one per line, for failure messages.
std::string dump(const std::vector<Finding>& findings);

}  // namespace trainbench::review::testing
