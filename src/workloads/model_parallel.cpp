#include "workloads/model_parallel.h"

#include "util/error.h"

namespace trainbench {

void require_divisible(int64_t size, int64_t parts, const std::string& where, const std::string& parts_name) {
  if (size % parts != 0)
    fail(where, std::to_string(size) + " is not divisible by " + parts_name + " " + std::to_string(parts));
}

parallel::ParallelPlan model_parallel_plan(const Config& config, const ModelParallelSettings& settings, int world) {
  const std::string where = config.name() + ": ";
  parallel::ParallelPlan plan =
      parallel::make_plan(world, static_cast<int>(settings.tensor_parallel),
                          static_cast<int>(settings.pipeline_parallel), where + "tensor_parallel x pipeline_parallel");
  plan.schedule = parallel::parse_pipeline_schedule(settings.pipeline_schedule, where + "pipeline_schedule");
  plan.virtual_stages = static_cast<int>(settings.virtual_pipeline_stages);
  if ((plan.schedule == parallel::PipelineSchedule::kInterleaved) != (plan.virtual_stages > 1))
    fail(where + "virtual_pipeline_stages",
         "the interleaved schedule needs 2 or more model chunks per rank, and only it takes them (got " +
             std::to_string(plan.virtual_stages) + " with " + schedule_name(plan.schedule) + ")");
  require_divisible(settings.layers, static_cast<int64_t>(plan.pipeline) * plan.virtual_stages, where + "layers",
                    "pipeline_parallel x virtual_pipeline_stages");
  const int64_t micro_batches = config.integer_at_least("gradient_accumulation_steps", 1);
  if (plan.schedule == parallel::PipelineSchedule::kInterleaved)
    require_divisible(micro_batches, plan.pipeline, where + "gradient_accumulation_steps (the micro-batches)",
                      "pipeline_parallel, as the interleaved schedule needs");
  return plan;
}

int64_t plan_micro_batches(const Config& config, int64_t batch_size, const parallel::ParallelPlan& plan) {
  const int64_t micro_batches = config.integer_at_least("gradient_accumulation_steps", 1);
  if (batch_size % (plan.data * micro_batches) != 0)
    fail(config.name() + ": batch_size", std::to_string(batch_size) + " does not divide into " +
                                             std::to_string(plan.data) + " data-parallel rank(s) x " +
                                             std::to_string(micro_batches) + " micro-batches");
  return micro_batches;
}

std::pair<int64_t, int64_t> chunk_layers(int64_t layers, const parallel::ParallelPlan& plan, int stage, int chunk) {
  const int64_t per_chunk = layers / (static_cast<int64_t>(plan.pipeline) * plan.virtual_stages);
  const int64_t virtual_stage = static_cast<int64_t>(chunk) * plan.pipeline + stage;
  return {virtual_stage * per_chunk, (virtual_stage + 1) * per_chunk};
}

void add_plan_hyperparameters(const parallel::ParallelPlan& plan, std::vector<HyperParameter>& hyperparameters) {
  if (!plan.model_parallel()) return;
  hyperparameters.push_back({"trainbench_tensor_parallel", plan.tensor});
  hyperparameters.push_back({"trainbench_pipeline_parallel", plan.pipeline});
  hyperparameters.push_back({"trainbench_data_parallel", plan.data});
  hyperparameters.push_back({"trainbench_pipeline_schedule", schedule_name(plan.schedule)});
  hyperparameters.push_back({"trainbench_virtual_pipeline_stages", plan.virtual_stages});
}

std::vector<int64_t> stage_layers(int64_t layers, const parallel::ParallelPlan& plan, int stage) {
  std::vector<int64_t> held;
  for (int chunk = 0; chunk < plan.virtual_stages; ++chunk) {
    const auto [first, last] = chunk_layers(layers, plan, stage, chunk);
    for (int64_t layer = first; layer < last; ++layer) held.push_back(layer);
  }
  return held;
}

optim::NormReduction norm_reduction(const parallel::ParallelContext& context) {
  optim::NormReduction reduction;
  parallel::Communicator& tensor = context.tensor_parallel();
  parallel::Communicator& pipeline = context.pipeline_parallel();
  reduction.over_tensor_shards = [&tensor](std::vector<double>& squares) { tensor.sum(squares); };
  reduction.over_model = [&tensor, &pipeline](std::vector<double>& squares) {
    tensor.sum(squares);
    pipeline.sum(squares);
  };
  return reduction;
}

}  // namespace trainbench
