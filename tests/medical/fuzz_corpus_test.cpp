// The kept corpora of the medical fuzz targets (fuzz/corpus/<target>/), replayed through the targets' own
// sources: .npy files (issue 32's overflowing, negative and 20-digit shapes among them) and NIfTI files.
#include <gtest/gtest.h>

#include "support/fuzz_replay.h"

extern "C" int fuzz_npy(const uint8_t* data, size_t size);
extern "C" int fuzz_nifti(const uint8_t* data, size_t size);

namespace trainbench::medical {
namespace {

using testing::replay_fuzz_corpus;
const std::string corpus = FUZZ_CORPUS_DIR;

TEST(FuzzCorpus, NpyFiles) { EXPECT_GT(replay_fuzz_corpus(corpus + "/npy", fuzz_npy), 5u); }
TEST(FuzzCorpus, NiftiFiles) { EXPECT_GT(replay_fuzz_corpus(corpus + "/nifti", fuzz_nifti), 2u); }

}  // namespace
}  // namespace trainbench::medical
