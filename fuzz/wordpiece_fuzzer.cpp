// libFuzzer target: any bytes as text for BERT's WordPiece tokenizer (invalid UTF-8, control and CJK
// characters, accents, very long words). Every id must be in the vocabulary.
#include <cstdlib>

#include "data/wordpiece.h"
#include "fuzz_entry.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  static const trainbench::data::WordPieceTokenizer tokenizer(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##aff", "##able", "a", "##b", "##c", ".", ",", "!",
       "\xe4\xb8\xad", "e", "##e", "##s", "cafe"});
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const int32_t id : tokenizer.encode(text))
      if (id < 0 || id >= tokenizer.size()) std::abort();
    (void)tokenizer.basic_tokens(text);
  } catch (const trainbench::Error&) {
  }
  return 0;
}
