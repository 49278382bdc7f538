#pragma once
// BERT under a 3-D parallel plan (parallel/plan.h, docs/parallelism.md): the plan a preset asks for, checked
// against the model; which part of the model a rank holds; the optimizer's view of a split model; the tied
// embeddings of the first and last stage; gathering the whole model back; and evaluation through the stages.
#include <cstdint>
#include <ostream>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "harness/config.h"
#include "optim/parameters.h"
#include "parallel/context.h"
#include "workloads/bert/model.h"
#include "workloads/bert/pretraining.h"
#include "workloads/bert/settings.h"
#include "workloads/model_parallel.h"

namespace trainbench::bert {

// The preset's tensor_parallel, pipeline_parallel, pipeline_schedule and virtual_pipeline_stages over `world`
// ranks. An Error names the setting when the world, the heads, the widths, the layers or the micro-batches
// (gradient_accumulation_steps) do not divide as the plan needs.
parallel::ParallelPlan plan_for(const Config& config, const Settings& preset, int world);

// What this rank holds of the model under `context`'s plan.
BertPartition partition_for(const Settings& preset, const parallel::ParallelContext& context);
// The parameters for LAMB, each flagged as decaying, sharded over tensor-parallel ranks, and counted once in
// the global gradient norm (LAMB sums its norms over the ranks as workloads/model_parallel.h's norm_reduction says).
std::vector<optim::Parameter> optimizer_parameters(const BertForPreTraining& model,
                                                   const parallel::ParallelContext& context);

// The tied word embeddings' gradient summed over the first and the last pipeline stage (the lookup's part and
// the decoder's), so that both copies take the same update. Nothing without pipeline stages.
void sum_tied_embedding_gradients(const BertForPreTraining& model, const parallel::ParallelContext& context);

// The whole model gathered from every rank's part (every rank calls it): on world rank 0 a model with the
// unsplit options, elsewhere an empty holder.
BertForPreTraining gather_whole_model(const BertForPreTraining& part, const BertOptions& options,
                                      const parallel::ParallelContext& context);

// Correct masked-LM predictions of `batch` and the predictions, through the stages and without gradients: on
// the last stage's first tensor-parallel rank the counts, elsewhere 0 and 0 (so that sums over the world count
// each prediction once).
std::pair<int64_t, int64_t> masked_lm_counts(BertForPreTraining& model, const PretrainingBatch& batch,
                                             const parallel::ParallelContext& context);

// What one rank of a plan holds and moves in one step, from the settings alone (nothing is allocated): the dry
// plan `bench bert --shard-plan N` prints, and what docs/parallelism.md holds the measured figures to.
struct RankFootprint {
  int64_t parameters = 0;  // elements held: a slice of each split tensor, every replicated one
  double parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
  double bucket_bytes = 0;  // the data-parallel exchange's flat copy of the gradients (parallel/gradient_sync.h)
  // Activations kept for backward at the schedule's peak: Megatron's per-layer count (Korthikanti et al.,
  // "Reducing activation recomputation", 2022: s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes at 2-byte activations and
  // 1-byte masks), scaled to this precision's activations and float masks. An estimate.
  double activation_bytes = 0;
  // Payload bytes this rank passes to each group's collectives per step, by the formulas: tensor
  // parallel 4 all-reduces of b·s·h per layer per micro-batch (forward and backward) plus the embedding's and
  // decoder's; pipeline b·s·h per boundary per micro-batch each way; data parallel the shard's gradients once;
  // the tied embeddings' gradient between the first and last stage.
  double tensor_bytes = 0, pipeline_bytes = 0, data_bytes = 0, embedding_bytes = 0;
};
RankFootprint footprint(const Settings& preset, const parallel::ParallelPlan& plan, int stage, int64_t micro_batches,
                        int activation_element_bytes);

// bench --shard-plan N: the plan over N ranks, each (tensor, stage) position's footprint.
void print_plan(const Config& config, int ranks, std::ostream& out);

}  // namespace trainbench::bert
