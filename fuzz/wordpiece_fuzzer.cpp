// libFuzzer target: any bytes as text for BERT's WordPiece tokenizer (invalid UTF-8, control and CJK
// characters, accents, very long words). Every id must be in the vocabulary.
#include <cstdlib>

#include "data/wordpiece.h"
#include "fuzz_entry.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  // The special tokens where bert-base-uncased has them (the tokenizer checks), then a few real pieces.
  static const trainbench::data::WordPieceTokenizer tokenizer([] {
    std::vector<std::string> vocab{"[PAD]"};
    for (int i = 1; i < 100; ++i) vocab.push_back("[unused" + std::to_string(i) + "]");
    for (const char* token : {"[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##aff", "##able", "a", "##b", "##c", ".",
                              ",", "!", "\xe4\xb8\xad", "e", "##e", "##s", "cafe"})
      vocab.push_back(token);
    return vocab;
  }());
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const int32_t id : tokenizer.encode(text))
      if (id < 0 || id >= tokenizer.size()) std::abort();
    (void)tokenizer.basic_tokens(text);
  } catch (const trainbench::Error&) {
  }
  return 0;
}
