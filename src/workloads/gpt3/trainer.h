#pragma once
// GPT-3's model, Adam, gradient exchange and loop, as a run, a bench and an export build them (workloads/trainer.h);
// under a plan that splits the model (tensor_parallel, pipeline_parallel: docs/parallelism.md), this rank's part of
// each. Public for the tests that hold a split step to the one-rank step.
#include <cstdint>
#include <string>
#include <vector>

#include "optim/adam.h"
#include "parallel/context.h"
#include "parallel/gradient_sync.h"
#include "parallel/pipeline.h"
#include "parallel/transformer_cost.h"
#include "workloads/gpt3/model.h"
#include "workloads/gpt3/settings.h"
#include "workloads/trainer.h"
#include "workloads/training_loop.h"

namespace trainbench::gpt3 {

// Sequences of the batch this rank reads: tokens, the next token of each (the reference's
// --no-seq-len-plus-one-tokens: tokens rolled left by one, the last label masked), and which labels count.
struct TokenBatch {
  torch::Tensor tokens, labels, loss_mask;  // [b, s]: int64, int64, float32

  // Rows of `sequences` [b, s] (int64), labels and mask as the reference's get_batch makes them.
  static TokenBatch of(const torch::Tensor& sequences);
  TokenBatch rows(const BatchSlice& slice) const;
  int64_t size() const { return tokens.size(0); }
};

// The learning rate at schedule step t (init_checkpoint_step + updates before this one), as Megatron's
// OptimizerParamScheduler gives it: linear from 0 over warmup_steps, then cosine from base to end until
// decay_steps, then end.
struct GptLrSchedule {
  double base = 0, end = 0;
  int64_t warmup_steps = 0, decay_steps = 1, init_checkpoint_step = 0;
  double at(int64_t updates) const;
};
// The schedule the preset sets, with the rules' values for its global batch where it leaves them out.
GptLrSchedule lr_schedule(const Settings& preset);

// The plan the preset asks for over `world` ranks; an Error names the setting that does not divide.
parallel::ParallelPlan plan_for(const Config& config, const Settings& preset, int world);
// What this rank holds under `context`'s plan.
GptPartition partition_for(const Settings& preset, const parallel::ParallelContext& context);
GptOptions model_options(const Settings& preset);

// What one rank of a plan holds and moves in one step, from the settings alone (nothing is allocated): the dry plan
// `bench gpt3 --plan tp=T,pp=P,dp=D` prints, counted by parallel/transformer_cost.h. Bytes are this
// implementation's: fp32 weights and gradients (the master copy under bf16 autocast too) and Adam's two fp32
// moments on every data-parallel rank.
using GptFootprint = parallel::StageFootprint;
GptFootprint footprint(const Settings& preset, const parallel::ParallelPlan& plan, int stage, int64_t micro_batches,
                       int activation_element_bytes);
// The preset's shape, as transformer_cost.h counts it.
parallel::TransformerShape transformer_shape(const Settings& preset);
// Floating-point operations of one step of the preset's global batch (transformer_cost.h's step_flops), the
// core attention recomputed when the preset recomputes activations.
using StepFlops = parallel::StepFlops;
StepFlops step_flops(const Settings& preset, int64_t padded_vocab);
// The dry plan over `ranks` ranks: per pipeline stage the footprint, and the step's FLOPs.
void print_plan(const Config& config, int ranks, std::ostream& out);

class GptTrainer : public TrainerOf<Settings> {
 public:
  GptTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose purpose);

  // One update on this data-parallel rank's rows of the batch at `learning_rate`.
  TrainingStep step(TokenBatch batch, double learning_rate);
  // The summed token losses and the tokens counted, of `batch` through the stages, without gradients: on the
  // last stage's first tensor-parallel rank; elsewhere 0 and 0, so that sums over the world count each once.
  std::pair<double, double> evaluation_sums(const TokenBatch& batch);

  GptModel& model() { return model_; }
  TrainingLoop& loop() { return loop_; }
  const parallel::ParallelContext& context() const { return planned_; }
  double last_gradient_norm() const { return last_gradient_norm_; }
  parallel::GradientSync* gradient_exchange() override { return &gradients_; }
  bool model_is_split() const override { return planned_.plan.model_parallel(); }

  std::vector<std::string> initialized_tensors() const override;
  void save_model(const std::string& path) const override;
  SyntheticStep synthetic_step(BenchRun& run) override;

 private:
  double run_pipeline(const TokenBatch& batch, const std::vector<BatchSlice>& slices, double loss_scale);
  void update(double learning_rate);

  parallel::ParallelContext planned_;
  at::Generator generator_;  // the model's initial weights
  GptModel model_;
  std::vector<optim::Parameter> parameters_;
  optim::Adam optimizer_;
  parallel::GradientSync gradients_;
  TrainingLoop loop_;
  parallel::PipelineExecutor pipeline_;
  double last_gradient_norm_ = 0;
};

}  // namespace trainbench::gpt3
