#pragma once
// BERT under a 3-D parallel plan (parallel/plan.h, docs/parallelism.md): the plan a preset asks for, checked
// against the model; which part of the model a rank holds; the optimizer's view of a split model; the tied
// embeddings of the first and last stage; gathering the whole model back; and evaluation through the stages.
#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "harness/config.h"
#include "optim/parameters.h"
#include "parallel/context.h"
#include "workloads/bert/model.h"
#include "workloads/bert/pretraining.h"
#include "workloads/bert/settings.h"

namespace trainbench::bert {

// The preset's tensor_parallel, pipeline_parallel, pipeline_schedule and virtual_pipeline_stages over `world`
// ranks. An Error names the setting when the world, the heads, the widths, the layers or the micro-batches
// (gradient_accumulation_steps) do not divide as the plan needs.
parallel::ParallelPlan plan_for(const Config& config, const Settings& preset, int world);

// What this rank holds of the model under `context`'s plan.
BertPartition partition_for(const Settings& preset, const parallel::ParallelContext& context);
// The encoder layers [first, last) of model chunk `chunk` on pipeline stage `stage` (chunk c of stage s is
// virtual stage c·P + s, as Megatron's interleaved schedule numbers them).
std::pair<int64_t, int64_t> chunk_layers(int64_t layers, const parallel::ParallelPlan& plan, int stage, int chunk);

// The parameters for LAMB, each flagged as decaying, sharded over tensor-parallel ranks, and counted once in
// the global gradient norm; and how LAMB sums its norms over the ranks holding the model.
std::vector<optim::Parameter> optimizer_parameters(const BertForPreTraining& model,
                                                   const parallel::ParallelContext& context);
optim::NormReduction norm_reduction(const parallel::ParallelContext& context);

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

}  // namespace trainbench::bert
