// What the DLRM workload refuses before a run starts (MLP widths the dot interaction cannot take), and
// `data make dlrm` failing on a full disk (a file size limit here) leaving nothing that a retry would refuse.
#include <csignal>
#include <filesystem>

#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/error_message.h"
#include "support/typed_settings.h"
#include "workloads/dlrm/settings.h"
#include "workloads/registry.h"

namespace trainbench::dlrm {
namespace {

namespace fs = std::filesystem;

TEST(DlrmSettings, MlpWidthsTheInteractionCannotTakeAreRefusedByNameWhenTheWorkloadIsMade) {
  const WorkloadEntry& entry = find_workload("dlrm");
  const auto refusal = [&](const std::string& setting) {
    WorkloadSettings settings;
    settings.config = Config::from_presets("dlrm", entry.presets_json, "tiny", {setting});
    settings.device = "cpu";
    return testing::error_message([&] { entry.create(settings); });
  };
  EXPECT_EQ(refusal("bottom_mlp=[32, 16]"),
            "dlrm/tiny: bottom_mlp: must end in embedding_dim (8) outputs, got [32,16]");
  EXPECT_EQ(refusal("top_mlp=[64, 32]"), "dlrm/tiny: top_mlp: must end in 1 output (the click logit), got [64,32]");
}

TEST(DlrmSettings, TheStructReadsEverySettingThatHasARule) {
  testing::expect_settings_struct_matches_rules<Settings>("dlrm");
}

// Restores the file size limit (and SIGXFSZ, which a write past the limit raises) when the test ends.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = SIG_DFL;
};

TEST(DlrmDataMake, AFailedWriteLeavesNoOutputSoThatTheRetrySucceeds) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_dlrm_make_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path out = dir / "dataset";
  const WorkloadEntry& entry = find_workload("dlrm");
  const Config config =
      Config::from_presets("dlrm", entry.presets_json, "tiny",
                           {"dataset.days=2", "dataset.samples_per_day=2000", "dataset.eval_samples=500"});
  std::string message;
  {
    const FileSizeLimit full_disk(64 * 1024);  // a day file of 2,000 samples is larger
    message = testing::error_message([&] { entry.make_dataset(config, out.string(), 1); });
  }
  EXPECT_NE(message.find("write failed"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));
  entry.make_dataset(config, out.string(), 1);
  EXPECT_TRUE(fs::exists(out / "train.bin"));
  EXPECT_TRUE(fs::exists(out / "eval.bin"));
  EXPECT_TRUE(fs::exists(out / "days" / "day_0"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainbench::dlrm
