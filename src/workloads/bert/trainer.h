#pragma once
// BERT's model, LAMB, gradient exchange and loop, as a run, a bench and an export build them (workloads/trainer.h);
// under a plan that splits the model (tensor_parallel, pipeline_parallel: docs/parallelism.md), this rank's part of
// each. Public for the tests that hold a split step to the one-rank step.
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/context.h"
#include "parallel/gradient_sync.h"
#include "parallel/pipeline.h"
#include "workloads/bert/model.h"
#include "workloads/bert/pretraining.h"
#include "workloads/bert/settings.h"
#include "workloads/trainer.h"
#include "workloads/training_loop.h"

namespace trainbench::bert {

class BertTrainer : public TrainerOf<Settings> {
 public:
  BertTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose purpose);

  // One update on this data-parallel rank's rows of the batch at `learning_rate`; `first_row` is their first row
  // in the global batch.
  TrainingStep step(PretrainingBatch batch, double learning_rate, int64_t first_row);
  BertForPreTraining& model() { return model_; }
  TrainingLoop& loop() { return loop_; }
  // The context with the plan's groups (tensor, data, pipeline, embedding), or the one it was built from.
  const parallel::ParallelContext& context() const { return planned_; }
  const parallel::PipelineExecutor& pipeline() const { return pipeline_; }
  parallel::GradientSync* gradient_exchange() override { return &gradients_; }
  bool model_is_split() const override { return planned_.plan.model_parallel(); }

  std::vector<std::string> initialized_tensors() const override;
  // As NVIDIA's BertForPretraining state dict; a split model is gathered to world rank 0, which writes it.
  void save_model(const std::string& path) const override;
  SyntheticStep synthetic_step(BenchRun& run) override;
  // Under a plan that splits the model: one more step with each group's traffic counted, beside the dry plan's
  // formulas (footprint()), and the pipeline's idle time in receives beside (p-1)/(v·m).
  void bench_after_training(BenchRun& run, std::ostream& out, double step_seconds) override;

 private:
  // The micro-batches go through the pipeline's schedule (parallel/pipeline.h) instead of the loop's accumulation.
  TrainingStep pipelined_step(PretrainingBatch batch, const ForwardPass& pass);
  double run_pipeline(const PretrainingBatch& batch, const ForwardPass& pass, const std::vector<BatchSlice>& slices,
                      double loss_scale);

  parallel::ParallelContext planned_;
  at::Generator generator_;  // the model's initial weights, then each update's dropout key
  BertForPreTraining model_;
  Lamb optimizer_;
  parallel::GradientSync gradients_;
  TrainingLoop loop_;
  parallel::PipelineExecutor pipeline_;
};

}  // namespace trainbench::bert
