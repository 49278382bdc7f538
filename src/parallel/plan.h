#pragma once
// A 3-D parallel layout: tensor × pipeline × data parallelism over one world of ranks (Megatron-LM's
// layout, megatron/mpu/initialize.py): the tensor-parallel index varies fastest, then the data-parallel one,
// then the pipeline stage, so a tensor-parallel group is T neighbouring ranks (one node's devices while
// T <= devices per node) and a stage is T·D neighbouring ranks.
//
//   world rank = tensor + T · (data + D · pipeline)
//
// Plain C++: plans are checked and printed before any tensor exists.
#include <string>
#include <vector>

namespace trainbench::parallel {

enum class PipelineSchedule { kGpipe, kOneForwardOneBackward, kInterleaved };
// "gpipe", "1f1b", "interleaved"; parse_pipeline_schedule throws Error naming `what` for anything else.
std::string schedule_name(PipelineSchedule schedule);
PipelineSchedule parse_pipeline_schedule(const std::string& name, const std::string& what);

struct ParallelPlan {
  int tensor = 1;
  int pipeline = 1;
  int data = 1;
  int virtual_stages = 1;  // model chunks per pipeline rank (the interleaved schedule's v)
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  bool sequence_parallel = false;

  int world() const { return tensor * pipeline * data; }
  bool model_parallel() const { return tensor > 1 || pipeline > 1; }
  // "tp=2 pp=2 dp=1" (and the schedule and v when they matter).
  std::string describe() const;
};

// Where a rank sits in the plan.
struct PlanCoordinates {
  int tensor = 0, data = 0, pipeline = 0;
};

PlanCoordinates coordinates_of(const ParallelPlan& plan, int world_rank);
int world_rank_of(const ParallelPlan& plan, const PlanCoordinates& at);

// kEmbedding: the first and the last pipeline stage of one pipeline, which both hold the tied word
// embeddings (input lookup and output decoder) and sum their gradients (Megatron's embedding group).
enum class GroupKind { kTensor, kData, kPipeline, kEmbedding };
// The world ranks of the group of `kind` that `world_rank` belongs to, in group-rank order, and a name for it
// that is unique in the job ("tp3": the tensor-parallel group with index 3). A rank of a middle stage has no
// embedding group (no members).
std::vector<int> group_members(const ParallelPlan& plan, GroupKind kind, int world_rank);
std::string group_name(const ParallelPlan& plan, GroupKind kind, int world_rank);

// The plan for `world` ranks at tensor × pipeline: data = world / (tensor · pipeline). Throws Error naming
// `source` (e.g. "--set tensor_parallel") when the sizes are not positive or do not divide the world.
ParallelPlan make_plan(int world, int tensor, int pipeline, const std::string& source);

}  // namespace trainbench::parallel
