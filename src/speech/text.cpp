#include "speech/text.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "util/error.h"

namespace trainbench::speech {

void train_sentencepiece(const std::vector<std::string>& transcripts, int vocab_size, const std::string& model_prefix) {
  const std::filesystem::path prefix(model_prefix);
  if (prefix.has_parent_path()) std::filesystem::create_directories(prefix.parent_path());
  const std::string input = model_prefix + ".transcripts.txt";
  {
    std::ofstream out(input);
    if (!out) fail(input, "cannot write the sentencepiece training text");
    for (const std::string& line : transcripts) out << line << '\n';
  }
  const std::vector<std::string> arguments = {
      "spm_train", "--input=" + input, "--model_prefix=" + model_prefix, "--vocab_size=" + std::to_string(vocab_size),
      "--character_coverage=1.0", "--bos_id=-1", "--eos_id=-1", "--model_type=unigram", "--minloglevel=2"};
  const pid_t child = fork();
  if (child < 0) fail("spm_train", "cannot start a process");
  if (child == 0) {
    std::vector<char*> argv;
    for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    execvp("spm_train", argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::filesystem::remove(input);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail(model_prefix, "sentencepiece training failed (spm_train exited with " +
                           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                           "; is the Debian package sentencepiece installed?)");
}

namespace {

constexpr const char* kWordBoundary = "\xe2\x96\x81";  // U+2581 "▁"

// A minimal protobuf wire-format reader: varints and length-delimited fields are all a ModelProto's pieces use.
class WireReader {
 public:
  WireReader(const char* begin, const char* end, const std::string& where) : at_(begin), end_(end), where_(where) {}
  bool done() const { return at_ >= end_; }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= end_) fail(where_, "truncated sentencepiece model");
      const auto byte = static_cast<uint8_t>(*at_++);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    fail(where_, "malformed sentencepiece model (varint too long)");
  }
  // Reads one field's key; returns (field number, wire type).
  std::pair<uint64_t, int> key() {
    const uint64_t key = varint();
    return {key >> 3, static_cast<int>(key & 7)};
  }
  std::pair<const char*, const char*> bytes() {
    const uint64_t size = varint();
    if (size > static_cast<uint64_t>(end_ - at_)) fail(where_, "truncated sentencepiece model");
    const char* begin = at_;
    at_ += size;
    return {begin, at_};
  }
  float fixed32() {
    if (end_ - at_ < 4) fail(where_, "truncated sentencepiece model");
    float value;
    std::memcpy(&value, at_, 4);
    at_ += 4;
    return value;
  }
  void skip(int wire_type) {
    if (wire_type == 0) varint();
    else if (wire_type == 1) at_ += 8;
    else if (wire_type == 2) bytes();
    else if (wire_type == 5) at_ += 4;
    else fail(where_, "malformed sentencepiece model (wire type " + std::to_string(wire_type) + ")");
  }

 private:
  const char* at_;
  const char* end_;
  std::string where_;
};

}  // namespace

Tokenizer::Tokenizer(const std::string& model_path) : model_path_(model_path) {
  std::ifstream in(model_path, std::ios::binary);
  if (!in) fail(model_path, "cannot open the sentencepiece model");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  WireReader model(bytes.data(), bytes.data() + bytes.size(), model_path);
  while (!model.done()) {
    const auto [field, wire_type] = model.key();
    if (field != 1 || wire_type != 2) {
      model.skip(wire_type);
      continue;
    }
    const auto [begin, end] = model.bytes();
    WireReader piece_reader(begin, end, model_path);
    Piece piece;
    while (!piece_reader.done()) {
      const auto [piece_field, piece_wire] = piece_reader.key();
      if (piece_field == 1 && piece_wire == 2) {
        const auto [text_begin, text_end] = piece_reader.bytes();
        piece.text.assign(text_begin, text_end);
      } else if (piece_field == 2 && piece_wire == 5) {
        piece.score = piece_reader.fixed32();
      } else if (piece_field == 3 && piece_wire == 0) {
        piece.type = static_cast<int>(piece_reader.varint());
      } else {
        piece_reader.skip(piece_wire);
      }
    }
    if (piece.type == 1 || piece.type == 4) {
      ids_.emplace(piece.text, static_cast<int>(pieces_.size()));
      longest_piece_ = std::max(longest_piece_, piece.text.size());
    }
    pieces_.push_back(std::move(piece));
  }
  if (ids_.empty()) fail(model_path, "holds no sentencepiece pieces (not a sentencepiece model?)");
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  // sentencepiece's default normalisation for these transcripts: extra whitespace removed, "▁" before each word.
  std::string normalized;
  std::istringstream words(text);
  for (std::string word; words >> word;) normalized += kWordBoundary + word;
  // Viterbi: best[i] is the highest total score of a segmentation of the first i bytes.
  const size_t n = normalized.size();
  std::vector<double> best(n + 1, -std::numeric_limits<double>::infinity());
  std::vector<int> piece_ending(n + 1, -1);
  best[0] = 0;
  for (size_t begin = 0; begin < n; ++begin) {
    if (best[begin] == -std::numeric_limits<double>::infinity()) continue;
    for (size_t length = 1; length <= longest_piece_ && begin + length <= n; ++length) {
      const auto found = ids_.find(normalized.substr(begin, length));
      if (found == ids_.end()) continue;
      const double score = best[begin] + pieces_[static_cast<size_t>(found->second)].score;
      if (score > best[begin + length]) {
        best[begin + length] = score;
        piece_ending[begin + length] = found->second;
      }
    }
  }
  if (n > 0 && piece_ending[n] < 0)
    fail(model_path_, "'" + text + "' needs <unk>: the tokenizer was not trained on these characters");
  std::vector<int> ids;
  for (size_t end = n; end > 0; end -= pieces_[static_cast<size_t>(piece_ending[end])].text.size())
    ids.push_back(piece_ending[end]);
  std::reverse(ids.begin(), ids.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string joined;
  for (const int id : ids) {
    if (id < 0 || id >= vocab_size()) fail(model_path_, "token id " + std::to_string(id) + " is outside the vocabulary");
    const Piece& piece = pieces_[static_cast<size_t>(id)];
    if (piece.type == 3) continue;  // control pieces print nothing
    joined += piece.type == 2 ? std::string(" \xe2\x81\x87 ") : piece.text;  // <unk> prints " ⁇ " as sentencepiece does
  }
  std::string text;
  for (size_t i = 0; i < joined.size();) {
    if (joined.compare(i, 3, kWordBoundary) == 0) {
      if (!text.empty()) text += ' ';
      i += 3;
    } else {
      text += joined[i++];
    }
  }
  return text;
}

namespace {

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

}  // namespace

WordErrors word_errors(const std::string& hypothesis, const std::string& reference) {
  const std::vector<std::string> hyp = split_words(hypothesis), ref = split_words(reference);
  // One row of the edit-distance table at a time.
  std::vector<int64_t> previous(hyp.size() + 1), current(hyp.size() + 1);
  for (size_t j = 0; j <= hyp.size(); ++j) previous[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= ref.size(); ++i) {
    current[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= hyp.size(); ++j)
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref[i - 1] == hyp[j - 1] ? 0 : 1)});
    std::swap(previous, current);
  }
  return {previous[hyp.size()], static_cast<int64_t>(ref.size())};
}

}  // namespace trainbench::speech
