// The kept corpora of the data layer's fuzz targets (fuzz/corpus/<target>/), replayed through the targets'
// own sources: Criteo day files, BERT shards, WordPiece text, image bytes and ImageNet's val labels.
#include <gtest/gtest.h>

#include "support/fuzz_replay.h"

extern "C" int fuzz_criteo(const uint8_t* data, size_t size);
extern "C" int fuzz_bert_shard(const uint8_t* data, size_t size);
extern "C" int fuzz_wordpiece(const uint8_t* data, size_t size);
extern "C" int fuzz_image_decode(const uint8_t* data, size_t size);
extern "C" int fuzz_imagenet_paths(const uint8_t* data, size_t size);

namespace trainbench::data {
namespace {

using testing::replay_fuzz_corpus;
const std::string corpus = FUZZ_CORPUS_DIR;

TEST(FuzzCorpus, CriteoDayFiles) { EXPECT_GT(replay_fuzz_corpus(corpus + "/criteo", fuzz_criteo), 10u); }
TEST(FuzzCorpus, BertShards) { EXPECT_GT(replay_fuzz_corpus(corpus + "/bert_shard", fuzz_bert_shard), 3u); }
TEST(FuzzCorpus, WordPieceText) { EXPECT_GT(replay_fuzz_corpus(corpus + "/wordpiece", fuzz_wordpiece), 10u); }
TEST(FuzzCorpus, ImageBytes) { EXPECT_GT(replay_fuzz_corpus(corpus + "/image_decode", fuzz_image_decode), 10u); }
TEST(FuzzCorpus, ImageNetValLabels) { EXPECT_GT(replay_fuzz_corpus(corpus + "/imagenet_paths", fuzz_imagenet_paths), 10u); }

}  // namespace
}  // namespace trainbench::data
