#pragma once
// One pre-training step and the masked-LM metric, shared by the workload, the bench and the tests.
#include <torch/torch.h>

#include "data/bert_shards.h"
#include "workloads/bert/lamb.h"
#include "workloads/bert/model.h"
#include "workloads/training_loop.h"

namespace trainbench::bert {

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
torch::Tensor pretraining_loss(const BertForPreTraining& model, const BertOutputs& outputs, const PretrainingBatch& batch);

// One update for the shared training loop: forward and the pre-training loss per micro-batch, then LAMB at
// `learning_rate`. The masked-LM loss is a mean over predictions: micro-batches weighted by their samples
// give the whole batch's gradient when samples carry equal numbers of predictions (NVIDIA divides each
// micro-batch's loss by the accumulation steps, the same weights for equal micro-batches).
TrainingStep training_step(BertForPreTraining model, Lamb& optimizer, PretrainingBatch batch, double learning_rate);

// Correctly predicted masked tokens of a batch (argmax), counted in eval mode without gradients.
int64_t masked_lm_correct(BertForPreTraining& model, const PretrainingBatch& batch);

}  // namespace trainbench::bert
