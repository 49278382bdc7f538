#pragma once
// Where a rank trains and with whom: the device it computes on, the ranks of its job, and the layout of a
// 3-D parallel run (parallel/plan.h) with the groups it forms. Every benchmark's trainer is built from one
// (workloads/trainer.h). Without a plan the whole world is the data-parallel group.
#include <memory>

#include <torch/types.h>

#include "parallel/communicator.h"
#include "parallel/plan.h"

namespace trainbench::parallel {

struct ParallelContext {
  std::shared_ptr<Communicator> world;  // every rank of the job; a world of one for a process alone
  torch::Device device = torch::kCPU;
  // Set by with_plan(); without one, dp is the world and tp and pp are this rank alone (and `plan` says 1, 1, 1).
  ParallelPlan plan;
  std::shared_ptr<Communicator> tensor_group, data_group, pipeline_group;
  std::shared_ptr<Communicator> embedding_group;  // the first and last stage (GroupKind::kEmbedding); else null

  int rank() const { return world->rank(); }
  int world_size() const { return world->world(); }
  // The groups of the plan, or of data parallelism alone when none was formed.
  Communicator& tensor_parallel() const;
  Communicator& data_parallel() const { return data_group ? *data_group : *world; }
  Communicator& pipeline_parallel() const;
  PlanCoordinates coordinates() const {
    return data_group ? coordinates_of(plan, rank()) : PlanCoordinates{0, rank(), 0};
  }
  bool first_stage() const { return coordinates().pipeline == 0; }
  bool last_stage() const { return coordinates().pipeline == plan.pipeline - 1; }
};

// `context` with `plan` (plan.world() must equal the world's size) and its tp, dp and pp groups formed: every
// rank calls it, and each joins its own three groups.
ParallelContext with_plan(const ParallelContext& context, const ParallelPlan& plan);

}  // namespace trainbench::parallel
