#pragma once
// Each target's entry point is LLVMFuzzerTestOneInput in a fuzz build; the replay tests compile the same
// source under another name (TRAINBENCH_FUZZ_ENTRY) so one test binary can hold several targets and run
// their kept corpora (tests/*/fuzz_corpus_test.cpp). A target aborts on a bug; a trainbench::Error naming
// the bad input is the expected outcome for bad bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

#ifndef TRAINBENCH_FUZZ_ENTRY
#define TRAINBENCH_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

namespace trainbench::fuzz {

// A scratch folder of this process, for parsers that read paths; removed when the process exits.
inline std::filesystem::path scratch_dir() {
  struct Scratch {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("trainbench_fuzz_" + std::to_string(::getpid()));
    Scratch() { std::filesystem::create_directories(path); }
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Scratch scratch;
  return scratch.path;
}

// Writes the input to scratch_dir()/name and returns the path.
inline std::string write_scratch_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch_dir() / name).string();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, file) != size) std::abort();
  std::fclose(file);
  return path;
}

}  // namespace trainbench::fuzz
