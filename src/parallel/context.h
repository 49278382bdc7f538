#pragma once
// Where a rank trains and with whom: the device it computes on and the ranks of its job. Every benchmark's
// trainer is built from one (workloads/trainer.h); the data-parallel world is the only group today, and the
// tensor- and pipeline-parallel groups of a 3-D layout belong here beside it.
#include <memory>

#include <torch/types.h>

#include "parallel/communicator.h"

namespace trainbench::parallel {

struct ParallelContext {
  std::shared_ptr<Communicator> world;  // every rank of the job; a world of one for a process alone
  torch::Device device = torch::kCPU;

  int rank() const { return world->rank(); }
  int world_size() const { return world->world(); }
};

}  // namespace trainbench::parallel
