// The kept corpora of the speech fuzz targets (fuzz/corpus/<target>/), replayed through the targets' own
// sources: manifests, transcripts and audio files, and sentencepiece models.
#include <gtest/gtest.h>

#include "support/fuzz_replay.h"

extern "C" int fuzz_librispeech(const uint8_t* data, size_t size);
extern "C" int fuzz_sentencepiece(const uint8_t* data, size_t size);

namespace trainbench::speech {
namespace {

using testing::replay_fuzz_corpus;
const std::string corpus = FUZZ_CORPUS_DIR;

TEST(FuzzCorpus, ManifestsTranscriptsAndAudio) {
  EXPECT_GT(replay_fuzz_corpus(corpus + "/librispeech", fuzz_librispeech), 4u);
}
TEST(FuzzCorpus, SentencepieceModels) { EXPECT_GT(replay_fuzz_corpus(corpus + "/sentencepiece", fuzz_sentencepiece), 0u); }

}  // namespace
}  // namespace trainbench::speech
