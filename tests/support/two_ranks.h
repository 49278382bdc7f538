#pragma once
// Two ranks of one world in two threads of the test process, over Gloo on loopback.
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "parallel/communicator.h"

namespace trainbench::testing {

// Runs `body(communicator)` as ranks 0 and 1 of a world of two; returns each rank's failure ("" if none).
inline std::vector<std::string> run_two_ranks(const std::function<void(parallel::Communicator&)>& body) {
  // A port per call: the tests of one process connect one after another.
  static int calls = 0;
  const int port = 28000 + static_cast<int>(::getpid() % 500) * 2 + (calls++ % 2);
  std::vector<std::string> failures(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank)
    ranks.emplace_back([&, rank] {
      try {
        parallel::RankEnvironment environment;
        environment.rank = environment.local_rank = rank;
        environment.world = environment.local_world = 2;
        environment.master_port = port;
        auto communicator = parallel::Communicator::connect(environment);
        body(*communicator);
      } catch (const std::exception& error) {
        failures[static_cast<size_t>(rank)] = error.what();
      }
    });
  for (auto& rank : ranks) rank.join();
  return failures;
}

}  // namespace trainbench::testing
