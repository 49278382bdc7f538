#pragma once
// One pre-training step and the masked-LM metric, shared by the trainer, the workload and the tests.
#include <torch/torch.h>

#include "data/bert_shards.h"
#include "optim/lamb.h"
#include "workloads/bert/model.h"
#include "workloads/training_loop.h"

namespace trainbench::bert {

using optim::Lamb;
using optim::LambOptions;

// The reference's learning rate (TF run_pretraining / NVIDIA PolyWarmUpScheduler): linear warmup from 0
// over warmup_steps counted from start_warmup_step, otherwise polynomial decay to 0 over total_steps
// counted from step 0.
struct BertLrSchedule {
  double base_lr = 0;
  int64_t warmup_steps = 0;
  int64_t start_warmup_step = 0;
  int64_t total_steps = 1;
  double power = 1;

  double at(int64_t step) const;
};

// A batch as the model takes it. Only real predictions are kept: the shard format pads
// masked_lm_positions with zeros, and the first zero ends a sample's list.
struct PretrainingBatch {
  torch::Tensor input_ids, segment_ids, input_mask;  // [B, S]: int64, int64, int64
  torch::Tensor masked_positions;                    // int64 [P]: indices into the flattened [B*S]
  torch::Tensor masked_lm_ids;                       // int64 [P]
  torch::Tensor next_sentence_labels;                // int64 [B]
  std::vector<int64_t> masked_offsets;               // [B + 1]: sample n's predictions are [offsets[n], offsets[n + 1])

  // Samples [slice.begin, slice.begin + slice.size) with their predictions: one micro-batch.
  PretrainingBatch rows(const BatchSlice& slice) const;
};

PretrainingBatch make_batch(const data::BertSamples& samples, torch::Device device);

// Masked-LM cross entropy (mean over predictions) plus next-sentence cross entropy, as the reference sums them.
torch::Tensor pretraining_loss(const BertForPreTraining& model, const BertOutputs& outputs,
                               const PretrainingBatch& batch);

// One update for the shared training loop: forward and the pre-training loss per micro-batch, then LAMB at
// `learning_rate`. The masked-LM loss is a mean over predictions: micro-batches weighted by their samples
// give the whole batch's gradient when samples carry equal numbers of predictions (NVIDIA divides each
// micro-batch's loss by the accumulation steps, the same weights for equal micro-batches).
// `pass`: the update's dropout key and the batch's first row among the global batch's rows (this data-parallel
// rank's offset), so that dropout drops what the one-rank step drops (DropoutSite).
TrainingStep training_step(BertForPreTraining model, Lamb& optimizer, PretrainingBatch batch, double learning_rate,
                           const ForwardPass& pass = {});
// The key of one update's dropout masks.
uint64_t draw_dropout_key(at::Generator& generator);

}  // namespace trainbench::bert
