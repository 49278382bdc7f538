// The kept corpus of the numpy pickle fuzz target (fuzz/corpus/numpy_pickle/), replayed through the target's own
// source: pickles of Caffe2-named arrays from Python 2 and 3 (protocols 2 to 4), and the inputs it refuses.
#include <gtest/gtest.h>

#include "support/fuzz_replay.h"

extern "C" int fuzz_numpy_pickle(const uint8_t* data, size_t size);

namespace trainbench {
namespace {

TEST(FuzzCorpus, NumpyPickleFiles) {
  EXPECT_GT(testing::replay_fuzz_corpus(std::string(FUZZ_CORPUS_DIR) + "/numpy_pickle", fuzz_numpy_pickle), 5u);
}

}  // namespace
}  // namespace trainbench
