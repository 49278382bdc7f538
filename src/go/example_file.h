#pragma once
// A generation's training examples on disk: what `trainbench data make minigo` writes for the prepared
// bootstrap (the reference starts its timed run from prepared games, ml_perf/README.md "Bootstrapping is not
// considered part of the benchmark") and a run reads back in its init. A small binary file: a header naming
// the format, board size, game and example counts, then the ExampleSet's three arrays as they are in memory.
#include <cstdint>
#include <string>
#include <vector>

#include "go/mcts.h"

namespace trainbench::go {

struct ExampleFile {
  ExampleSet examples;
  int games = 0;  // the games the examples were recorded from
};

// The file's bytes, which is also how ranks exchange a generation's examples (the general gather).
std::vector<uint8_t> serialize_examples(const ExampleFile& file);
// Fails naming `where` when the bytes are not such a file, are cut short, or hold another board size than `size`.
ExampleFile parse_examples(const uint8_t* bytes, size_t length, int size, const std::string& where);

void write_example_file(const std::string& path, const ExampleFile& file);
// Fails naming `path` when it is not such a file, is cut short, or holds another board size than `size`.
ExampleFile read_example_file(const std::string& path, int size);

}  // namespace trainbench::go
