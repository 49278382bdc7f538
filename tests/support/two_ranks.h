#pragma once
// Ranks of one world in threads of the test process, over Gloo on loopback.
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "parallel/communicator.h"

namespace trainbench::testing {

// Runs `body(communicator)` as ranks 0 … ranks-1 of one world; returns each rank's failure ("" if none).
inline std::vector<std::string> run_ranks(int ranks, const std::function<void(parallel::Communicator&)>& body) {
  // A port per call: the tests of one process connect one after another, and a port just closed may linger.
  static int calls = 0;
  const int port = 28000 + static_cast<int>(::getpid() % 500) * 2 + (calls++ % 2) + 1000 * (ranks > 2);
  std::vector<std::string> failures(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank)
    threads.emplace_back([&, rank] {
      try {
        // Rank 0 hosts the store: the others come a moment later, since a client that finds no server yet
        // retries only after a second.
        if (rank > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
        parallel::RankEnvironment environment;
        environment.rank = environment.local_rank = rank;
        environment.world = environment.local_world = ranks;
        environment.master_port = port;
        auto communicator = parallel::Communicator::connect(environment);
        body(*communicator);
      } catch (const std::exception& error) {
        failures[static_cast<size_t>(rank)] = error.what();
      }
    });
  for (auto& thread : threads) thread.join();
  return failures;
}

// Ranks 0 and 1 of a world of two.
inline std::vector<std::string> run_two_ranks(const std::function<void(parallel::Communicator&)>& body) {
  return run_ranks(2, body);
}

}  // namespace trainbench::testing
