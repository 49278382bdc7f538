#include "parallel/plan.h"

#include "util/error.h"

namespace trainbench::parallel {

std::string schedule_name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return "gpipe";
    case PipelineSchedule::kOneForwardOneBackward:
      return "1f1b";
    case PipelineSchedule::kInterleaved:
      return "interleaved";
  }
  return "?";
}

PipelineSchedule parse_pipeline_schedule(const std::string& name, const std::string& what) {
  for (const auto schedule :
       {PipelineSchedule::kGpipe, PipelineSchedule::kOneForwardOneBackward, PipelineSchedule::kInterleaved})
    if (schedule_name(schedule) == name) return schedule;
  fail(what, "'" + name + "' is not a pipeline schedule (expected gpipe, 1f1b or interleaved)");
}

std::string ParallelPlan::describe() const {
  std::string text = "tp=" + std::to_string(tensor) + " pp=" + std::to_string(pipeline) + " dp=" + std::to_string(data);
  if (pipeline > 1) text += " " + schedule_name(schedule);
  if (virtual_stages > 1) text += " v=" + std::to_string(virtual_stages);
  if (sequence_parallel) text += " sequence-parallel";
  return text;
}

PlanCoordinates coordinates_of(const ParallelPlan& plan, int world_rank) {
  PlanCoordinates at;
  at.tensor = world_rank % plan.tensor;
  at.data = (world_rank / plan.tensor) % plan.data;
  at.pipeline = world_rank / (plan.tensor * plan.data);
  return at;
}

int world_rank_of(const ParallelPlan& plan, const PlanCoordinates& at) {
  return at.tensor + plan.tensor * (at.data + plan.data * at.pipeline);
}

std::vector<int> group_members(const ParallelPlan& plan, GroupKind kind, int world_rank) {
  const PlanCoordinates self = coordinates_of(plan, world_rank);
  if (kind == GroupKind::kEmbedding) {
    if (self.pipeline != 0 && self.pipeline != plan.pipeline - 1) return {};
    PlanCoordinates first = self, last = self;
    first.pipeline = 0;
    last.pipeline = plan.pipeline - 1;
    if (plan.pipeline == 1) return {world_rank};
    return {world_rank_of(plan, first), world_rank_of(plan, last)};
  }
  const int size = kind == GroupKind::kTensor ? plan.tensor : kind == GroupKind::kData ? plan.data : plan.pipeline;
  std::vector<int> members;
  for (int index = 0; index < size; ++index) {
    PlanCoordinates member = self;
    (kind == GroupKind::kTensor ? member.tensor : kind == GroupKind::kData ? member.data : member.pipeline) = index;
    members.push_back(world_rank_of(plan, member));
  }
  return members;
}

std::string group_name(const ParallelPlan& plan, GroupKind kind, int world_rank) {
  const PlanCoordinates at = coordinates_of(plan, world_rank);
  // A group is identified by the coordinates its members share.
  switch (kind) {
    case GroupKind::kTensor:
      return "tp" + std::to_string(at.data + plan.data * at.pipeline);
    case GroupKind::kData:
      return "dp" + std::to_string(at.tensor + plan.tensor * at.pipeline);
    case GroupKind::kPipeline:
      return "pp" + std::to_string(at.tensor + plan.tensor * at.data);
    case GroupKind::kEmbedding:
      return "embedding" + std::to_string(at.tensor + plan.tensor * at.data);
  }
  return "?";
}

ParallelPlan make_plan(int world, int tensor, int pipeline, const std::string& source) {
  if (tensor < 1 || pipeline < 1)
    fail(source, "tensor_parallel " + std::to_string(tensor) + " and pipeline_parallel " + std::to_string(pipeline) +
                     " must be at least 1");
  if (world % (tensor * pipeline) != 0)
    fail(source, "the world of " + std::to_string(world) + " ranks is not divisible by tensor_parallel " +
                     std::to_string(tensor) + " x pipeline_parallel " + std::to_string(pipeline));
  ParallelPlan plan;
  plan.tensor = tensor;
  plan.pipeline = pipeline;
  plan.data = world / (tensor * pipeline);
  return plan;
}

}  // namespace trainbench::parallel
