// Weights files from someone else (issue 45): `--weights` reads a state dict through the safe reader
// (util/torch_file.h). Files crafted to crash LibTorch's unpickler or to read heap memory into the model exit 2
// naming the file and the cause and write nothing; a NaN weight is refused naming the tensor; and the files
// Python writes of every benchmark's exported state dict (an OrderedDict, the legacy format) load as they are,
// giving back the exported file bit for bit.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/test_files.h"
#include "support/crafted_torch_file.h"
#include "support/python_script.h"
#include "support/trainbench_binary.h"
#include "util/atomic_file.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;
using testing::archive;
using testing::floats;
using testing::state_dict_pickle;
using testing::str;

class WeightsFilesTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return directory_ / name; }

  // `checkpoint export resnet --preset tiny --weights <weights> --out <out>`.
  testing::BinaryResult export_from(const std::string& weights, const std::string& out) const {
    return testing::run_trainbench("checkpoint export resnet --preset tiny --weights " + weights + " --out " + out);
  }

  data::testing::TempDir directory_;
};

TEST_F(WeightsFilesTest, CraftedFilesExitTwoNamingTheFileAndTheCauseAndWriteNothing) {
  const std::string six = floats({1, 2, 3, 4, 5, 6});
  std::string deep = "\x80\x02";
  for (int i = 0; i < 150000; ++i) deep += "]";
  for (int i = 0; i < 149999; ++i) deep += "a";
  const std::vector<std::pair<std::string, std::string>> attacks = {
      {archive(state_dict_pickle({{"conv1.weight", "0", 6, 0, {2, 3}, {3, 2}}}), {{"0", six}}),
       "conv1.weight: reaches element 7 of a storage of 6"},
      {archive(state_dict_pickle({{"conv1.weight", "0", 6, 5, {2}, {1}}}), {{"0", six}}),
       "conv1.weight: reaches element 6 of a storage of 6 (storage offset 5"},
      {archive(state_dict_pickle({{"conv1.weight", "0", 6, 0, {6}, {1}}}), {{"0", floats({1, 2})}}),
       "storage 0: holds 8 bytes, its 6 float32 elements need 24"},
      {archive(deep + ".", {}), "holds a list, not a dict of tensors"},
      {archive(std::string("\x80\x02}j\xff\xff\xff\x7f.", 8), {}), "memo entry 2147483647 was never stored"},
      {archive("\x80\x02\x63os\nsystem\n" + str("true") + "\x85R.", {}), "global os.system is not one"}};
  for (size_t i = 0; i < attacks.size(); ++i) {
    const std::string weights = path("attack" + std::to_string(i) + ".pt"), out = path("out.pt");
    write_file_atomically(weights, attacks[i].first);
    const testing::BinaryResult result = export_from(weights, out);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find(weights + ": "), std::string::npos) << result.output;
    EXPECT_NE(result.output.find(attacks[i].second), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(out));
  }
}

// Every benchmark whose --weights takes a state dict (MiniGo's takes a .minigo, GPT-3's a Megatron directory).
TEST_F(WeightsFilesTest, PythonsOwnFilesOfEveryBenchmarksExportedStateDictLoadAsTheyAre) {
  if (!testing::python_has("torch")) GTEST_SKIP() << "python3-torch is not installed";
  const std::vector<std::string> benchmarks = {"resnet", "ssd", "maskrcnn", "unet3d", "rnnt", "bert", "dlrm"};
  std::string exported;
  for (const std::string& benchmark : benchmarks) {
    const testing::BinaryResult result = testing::run_trainbench(
        "checkpoint export " + benchmark + " --preset tiny --seed 3 --out " + path(benchmark + ".pt"));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    exported += " " + path(benchmark + ".pt");
  }
  ASSERT_TRUE(testing::succeeded(
      testing::run_python_script(TRAINBENCH_WEIGHTS_FILES_SCRIPT, "resave " + directory_.path().string() + exported)));
  for (const std::string& benchmark : benchmarks) {
    for (const char* form : {"_ordered.pt", "_legacy.pt"}) {
      SCOPED_TRACE(benchmark + form);
      const testing::BinaryResult reloaded =
          testing::run_trainbench("checkpoint export " + benchmark + " --preset tiny --weights " +
                                  path(benchmark + form) + " --out " + path("again.pt"));
      ASSERT_EQ(reloaded.exit_code, 0) << reloaded.output;
      EXPECT_EQ(read_file(path("again.pt")), read_file(path(benchmark + ".pt")));
      fs::remove(path("again.pt"));
    }
  }
}

TEST_F(WeightsFilesTest, ANonFiniteWeightIsRefusedNamingTheFileAndTheTensor) {
  if (!testing::python_has("torch")) GTEST_SKIP() << "python3-torch is not installed";
  ASSERT_EQ(testing::run_trainbench("checkpoint export resnet --preset tiny --out " + path("exported.pt")).exit_code,
            0);
  ASSERT_TRUE(testing::succeeded(testing::run_python_script(
      TRAINBENCH_WEIGHTS_FILES_SCRIPT, "nan " + path("exported.pt") + " " + path("nan.pt") + " fc.bias")));
  const testing::BinaryResult refused = export_from(path("nan.pt"), path("again.pt"));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find(path("nan.pt") + ": fc.bias: element 0 is NaN or infinite"), std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(path("again.pt")));
}

}  // namespace
}  // namespace trainbench
