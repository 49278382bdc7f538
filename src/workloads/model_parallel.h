#pragma once
// What every benchmark trained under a 3-D parallel plan (parallel/plan.h, docs/parallelism.md) needs alike: the
// plan its preset asks for, which layers a pipeline stage's chunks hold, and how an optimizer's norms span the
// ranks that hold the model. The benchmark checks its own widths against the plan.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/config.h"
#include "harness/workload.h"
#include "optim/parameters.h"
#include "parallel/context.h"

namespace trainbench {

// The settings of a preset that lay out its model.
struct ModelParallelSettings {
  int64_t tensor_parallel = 1, pipeline_parallel = 1, virtual_pipeline_stages = 1, layers = 1;
  std::string pipeline_schedule;
};

// The plan over `world` ranks. An Error names the setting when the world, the layers or the micro-batches
// (gradient_accumulation_steps) do not divide as the plan needs, or the schedule and its chunks disagree.
parallel::ParallelPlan model_parallel_plan(const Config& config, const ModelParallelSettings& settings, int world);

// The micro-batches per step (gradient_accumulation_steps) of a dry plan; an Error names batch_size when the global
// batch does not divide into the plan's data-parallel ranks x them.
int64_t plan_micro_batches(const Config& config, int64_t batch_size, const parallel::ParallelPlan& plan);

// An Error "<where>: <size> is not divisible by <parts_name> <parts>" unless it is.
void require_divisible(int64_t size, int64_t parts, const std::string& where, const std::string& parts_name);

// The layers [first, last) of model chunk `chunk` on pipeline stage `stage` (chunk c of stage s is virtual stage
// c·P + s, as Megatron's interleaved schedule numbers them).
std::pair<int64_t, int64_t> chunk_layers(int64_t layers, const parallel::ParallelPlan& plan, int stage, int chunk);

// The layout, logged beside the MLPerf keys when the plan splits the model (trainbench_tensor_parallel,
// _pipeline_parallel, _data_parallel, _pipeline_schedule, _virtual_pipeline_stages; docs/parallelism.md).
void add_plan_hyperparameters(const parallel::ParallelPlan& plan, std::vector<HyperParameter>& hyperparameters);

// The layers of every chunk a pipeline stage holds, in order.
std::vector<int64_t> stage_layers(int64_t layers, const parallel::ParallelPlan& plan, int stage);

// An optimizer's squared norms summed over the tensor-parallel group (a sharded tensor's norm), and over every
// rank holding part of the model (the global gradient norm).
optim::NormReduction norm_reduction(const parallel::ParallelContext& context);

}  // namespace trainbench
