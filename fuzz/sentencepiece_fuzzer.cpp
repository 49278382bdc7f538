// libFuzzer target: any bytes as a sentencepiece model (DIR/sentencepieces/librispeech<N>.model), read by the
// hand-written protobuf reader and then used to encode and decode a transcript. Every outcome must be a
// tokenizer whose ids stay inside its vocabulary, or an Error naming the file or the text.
#include <cstdlib>
#include <optional>

#include "fuzz_entry.h"
#include "speech/text.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string path = trainbench::fuzz::write_scratch_file("librispeech.model", data, size);
  std::optional<trainbench::speech::Tokenizer> tokenizer;
  try {
    tokenizer.emplace(path);
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind(path + ":", 0) != 0) std::abort();  // every error names the file
    return 0;
  }
  try {
    const std::vector<int> ids = tokenizer->encode("the quick brown fox");
    for (const int id : ids)
      if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
    (void)tokenizer->decode(ids);
  } catch (const trainbench::Error&) {
    // a model without the pieces this text needs refuses it by name, as the reference asserts
  }
  return 0;
}
