#pragma once
// Replays a kept libFuzzer corpus (fuzz/corpus/<target>/) through the fuzz target's own source, compiled into
// the test under another entry name (fuzz/fuzz_entry.h). A target aborts on a bug, so a regression fails the
// test run; each input is named in the output when it is replayed.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace trainbench::testing {

using FuzzTarget = int (*)(const uint8_t* data, size_t size);

// Returns how many inputs were replayed.
inline size_t replay_fuzz_corpus(const std::string& corpus_dir, FuzzTarget target) {
  size_t inputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().string());
    target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++inputs;
  }
  return inputs;
}

}  // namespace trainbench::testing
