// The kept corpora of the COCO fuzz targets (fuzz/corpus/<target>/), replayed through the targets' own sources:
// instances files, results files and compressed RLE strings, among them issue 32's deep nesting and huge images.
#include <gtest/gtest.h>

#include "support/fuzz_replay.h"

extern "C" int fuzz_coco_instances(const uint8_t* data, size_t size);
extern "C" int fuzz_coco_results(const uint8_t* data, size_t size);
extern "C" int fuzz_rle(const uint8_t* data, size_t size);

namespace trainbench::coco {
namespace {

using testing::replay_fuzz_corpus;
const std::string corpus = FUZZ_CORPUS_DIR;

TEST(FuzzCorpus, InstancesFiles) { EXPECT_GT(replay_fuzz_corpus(corpus + "/coco_instances", fuzz_coco_instances), 5u); }
TEST(FuzzCorpus, ResultsFiles) { EXPECT_GT(replay_fuzz_corpus(corpus + "/coco_results", fuzz_coco_results), 5u); }
TEST(FuzzCorpus, RleStrings) { EXPECT_GT(replay_fuzz_corpus(corpus + "/rle", fuzz_rle), 5u); }

}  // namespace
}  // namespace trainbench::coco
