#include "parallel/context.h"

#include "util/error.h"

namespace trainbench::parallel {

namespace {

// A world of one, for the groups a rank forms with itself alone.
std::shared_ptr<Communicator> alone() {
  static const std::shared_ptr<Communicator> single = Communicator::connect(RankEnvironment{});
  return single;
}

}  // namespace

Communicator& ParallelContext::tensor_parallel() const { return tensor_group ? *tensor_group : *alone(); }

Communicator& ParallelContext::pipeline_parallel() const { return pipeline_group ? *pipeline_group : *alone(); }

ParallelContext with_plan(const ParallelContext& context, const ParallelPlan& plan) {
  if (plan.world() != context.world_size())
    fail("parallel plan " + plan.describe(),
         "needs " + std::to_string(plan.world()) + " ranks, but the world has " + std::to_string(context.world_size()));
  ParallelContext planned = context;
  planned.plan = plan;
  const int rank = context.rank();
  // Formed in one order on every rank (tp, dp, pp): a group's rendezvous waits for all its members.
  planned.tensor_group = context.world->subgroup(group_name(plan, GroupKind::kTensor, rank),
                                                 group_members(plan, GroupKind::kTensor, rank));
  planned.data_group =
      context.world->subgroup(group_name(plan, GroupKind::kData, rank), group_members(plan, GroupKind::kData, rank));
  planned.pipeline_group = context.world->subgroup(group_name(plan, GroupKind::kPipeline, rank),
                                                   group_members(plan, GroupKind::kPipeline, rank));
  const std::vector<int> embedding = group_members(plan, GroupKind::kEmbedding, rank);
  if (!embedding.empty())
    planned.embedding_group = context.world->subgroup(group_name(plan, GroupKind::kEmbedding, rank), embedding);
  return planned;
}

}  // namespace trainbench::parallel
