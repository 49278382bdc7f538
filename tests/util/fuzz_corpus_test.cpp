// The kept corpus of the numpy pickle fuzz target (fuzz/corpus/numpy_pickle/), replayed through the target's own
// source: pickles of Caffe2-named arrays from Python 2 and 3 (protocols 2 to 4), and the inputs it refuses; and
// the torch file target's generated seeds.
#include <gtest/gtest.h>

#include "data/test_files.h"
#include "support/fuzz_replay.h"
#include "support/python_script.h"

extern "C" int fuzz_numpy_pickle(const uint8_t* data, size_t size);
extern "C" int fuzz_torch_file(const uint8_t* data, size_t size);

namespace trainbench {
namespace {

TEST(FuzzCorpus, NumpyPickleFiles) {
  EXPECT_GT(testing::replay_fuzz_corpus(std::string(FUZZ_CORPUS_DIR) + "/numpy_pickle", fuzz_numpy_pickle), 5u);
}

// The torch file target keeps no corpus: its seeds are the state dicts fuzz/torch_file_seeds.py writes with
// python3-torch, replayed here through the target (each read as it is and as an archive's pickle).
TEST(FuzzCorpus, TorchFileSeeds) {
  if (!testing::python_has("torch")) GTEST_SKIP() << "python3-torch is not installed";
  const data::testing::TempDir seeds;
  ASSERT_TRUE(
      testing::succeeded(testing::run_python_script(TRAINBENCH_TORCH_FILE_SEEDS_SCRIPT, seeds.path().string())));
  EXPECT_EQ(testing::replay_fuzz_corpus(seeds.path().string(), fuzz_torch_file), 16u);
}

}  // namespace
}  // namespace trainbench
