#pragma once
// Text for the RNN-T benchmark: the reference's sentencepiece unigram tokenizer and the corpus word error
// rate.
//
// Training runs Debian's `spm_train` (package sentencepiece) as scripts/create_sentencepieces.sh does.
// Encoding and decoding are written here from the model file: Debian's libsentencepiece carries its own copy
// of protobuf-lite and exports its symbols, which take the place of LibTorch's libprotobuf in one process
// and crash it while it loads. The model is a protobuf ModelProto whose pieces (field 1: piece, score,
// type) are all the unigram encoder needs; text is normalised as the reference's models are trained
// (whitespace collapsed and trimmed, a "▁" before every word) and segmented by Viterbi over piece scores,
// sentencepiece's unigram encoding. The tests hold the result to `spm_encode`.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace trainbench::speech {

// Trains a unigram model on `transcripts` as the reference does (character_coverage 1.0, no bos/eos) and
// writes <model_prefix>.model and <model_prefix>.vocab. An Error names the prefix when sentencepiece refuses
// (e.g. a vocabulary larger than the text allows).
void train_sentencepiece(const std::vector<std::string>& transcripts, int vocab_size, const std::string& model_prefix);

class Tokenizer {
 public:
  // An Error names the file when it is not a sentencepiece unigram model.
  explicit Tokenizer(const std::string& model_path);

  // Token ids; an Error names the text when it would need <unk> (the reference asserts the same).
  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  int vocab_size() const { return static_cast<int>(pieces_.size()); }  // <unk> included; the RNN-T blank is this index

 private:
  struct Piece {
    std::string text;
    float score = 0;
    int type = 1;  // sentencepiece's ModelProto.SentencePiece.Type: 1 normal, 2 unknown, 3 control, 4 user defined
  };
  std::string model_path_;
  std::vector<Piece> pieces_;
  std::unordered_map<std::string, int> ids_;  // normal and user-defined pieces
  size_t longest_piece_ = 0;
};

struct WordErrors {
  int64_t errors = 0;  // substitutions + insertions + deletions
  int64_t words = 0;   // reference words
  WordErrors& operator+=(const WordErrors& other) {
    errors += other.errors;
    words += other.words;
    return *this;
  }
};

// Word-level Levenshtein distance of a hypothesis against a reference (words split on whitespace).
WordErrors word_errors(const std::string& hypothesis, const std::string& reference);

}  // namespace trainbench::speech
