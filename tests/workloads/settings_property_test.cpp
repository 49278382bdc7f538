// Every numeric setting of every benchmark's tiny preset, set to 0, -1, a huge value and NaN, is either refused
// by name before anything is written (what `trainbench run` reports as rc 2) or trains without failing: never
// an exception the CLI would call an unexpected failure (rc 3), a crash or a hang, and never a refusal after
// the log was committed. An accepted value trains for a few seconds and is then interrupted, as SIGTERM
// would: enough to build the model, open the data and take steps, not to converge.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <thread>
#include <unistd.h>

#include <gtest/gtest.h>

#include "harness/interrupt.h"
#include "harness/runner.h"
#include "util/error.h"
#include "workloads/registry.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// An accepted value trains this long before the test interrupts it (1 s: enough to build, open the data and
// start training; the nine benchmarks' probes are a large part of the CI budget).
constexpr auto kTrainingBudget = std::chrono::seconds(1);

struct Assignment {
  std::string key;  // dotted, as --set takes it
  std::string text;
};

// "key=value" overrides that put each numeric leaf of the preset at each probe value: top-level numbers,
// numbers inside objects, and the first element of numeric lists.
std::vector<Assignment> probe_assignments(const json& values, const std::string& prefix = "") {
  std::vector<Assignment> assignments;
  for (const auto& [key, value] : values.items()) {
    const std::string path = prefix + key;
    if (value.is_object()) {
      const auto nested = probe_assignments(value, path + ".");
      assignments.insert(assignments.end(), nested.begin(), nested.end());
      continue;
    }
    const bool list = value.is_array() && !value.empty() && value[0].is_number();
    if (!value.is_number() && !list) continue;
    const json sample = list ? value[0] : value;
    const std::string huge = sample.is_number_integer() ? "4611686018427387904" : "1e300";  // 2^62
    for (const std::string& probe : {std::string("0"), std::string("-1"), huge, std::string("nan")}) {
      if (!list) {
        assignments.push_back({path, probe});
        continue;
      }
      if (probe == "nan") continue;  // not JSON inside a list; the top-level probes cover a string for a number
      json changed = value;
      changed[0] = json::parse(probe);
      assignments.push_back({path, changed.dump()});
    }
  }
  return assignments;
}

// Interrupts the run, as SIGTERM would, once the budget has passed; cancelled when the run ends first.
class Deadline {
 public:
  explicit Deadline(std::chrono::seconds budget)
      : thread_([this, budget] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!ended_.wait_for(lock, budget, [this] { return done_; })) request_interrupt(SIGTERM);
        }) {}
  ~Deadline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    ended_.notify_one();
    thread_.join();
    clear_interrupt();
  }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable ended_;
  bool done_ = false;
  std::thread thread_;
};

class SettingsProperty : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_settings_" + GetParam() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The preset's own dataset, generated once; a probe of a dataset setting generates its own.
  std::string dataset_for(const WorkloadEntry& entry, const Config& config, const Assignment& assignment, int index) {
    if (!entry.make_dataset) return "";
    const bool own = assignment.key.rfind("dataset.", 0) == 0;
    const fs::path dir = dir_ / (own ? "data_" + std::to_string(index) : "data");
    if (!fs::exists(dir)) entry.make_dataset(config, dir.string(), 1);
    return dir.string();
  }

  fs::path dir_;
};

TEST_P(SettingsProperty, EveryNumericSettingAtZeroMinusOneHugeOrNanIsRefusedByNameOrTrains) {
  const WorkloadEntry& entry = find_workload(GetParam());
  const Config preset = preset_config(entry, "tiny", {});
  const std::vector<Assignment> assignments = probe_assignments(preset.values());
  ASSERT_FALSE(assignments.empty());
  int refused = 0, trained = 0;
  for (size_t i = 0; i < assignments.size(); ++i) {
    const std::string set = assignments[i].key + "=" + assignments[i].text;
    SCOPED_TRACE("--set " + set);
    WorkloadSettings settings;
    try {
      settings.config = preset_config(entry, "tiny", {set});
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()).rfind("--set " + assignments[i].key, 0), 0u) << error.what();
      ++refused;
      continue;
    }
    ++trained;
    const fs::path result = dir_ / ("result_" + std::to_string(i) + ".txt");
    try {
      settings.data_dir = dataset_for(entry, settings.config, assignments[i], static_cast<int>(i));
      settings.threads = 1;
      settings.seed = 1;
      RunOptions options;
      options.seed = 1;
      options.result_path = result.string();
      options.show_progress = false;
      auto workload = entry.create(settings);
      const Deadline deadline(kTrainingBudget);
      run_benchmark(*workload, options);
    } catch (const Error& error) {
      // A refusal by the workload or its data is fine before the log exists, not after.
      EXPECT_FALSE(fs::exists(result)) << "refused after its log was written: " << error.what();
      EXPECT_FALSE(fs::exists(result.string() + ".partial")) << error.what();
    } catch (const std::exception& error) {
      const std::string message = error.what();  // LibTorch's errors carry a stack trace after the first line
      ADD_FAILURE() << "an unexpected failure (rc 3): " << message.substr(0, message.find('\n'));
    }
  }
  std::printf("%s tiny: %zu probes, %d refused by their rules, %d accepted and trained\n", GetParam().c_str(),
              assignments.size(), refused, trained);
}

INSTANTIATE_TEST_SUITE_P(Benchmarks, SettingsProperty,
                         ::testing::Values("resnet", "ssd", "maskrcnn", "unet3d", "rnnt", "bert", "dlrm", "minigo",
                                           "gpt3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace trainbench
