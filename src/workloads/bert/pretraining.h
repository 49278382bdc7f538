#pragma once
// One pre-training step and the masked-LM metric, shared by the workload, the bench and the tests.
#include <torch/torch.h>

#include "data/bert_shards.h"
#include "dist/gradient_sync.h"
#include "workloads/bert/lamb.h"
#include "workloads/bert/model.h"

namespace trainbench::bert {

// A batch as the model takes it. Only real predictions are kept: the shard format pads
// masked_lm_positions with zeros, and the first zero ends a sample's list.
struct PretrainingBatch {
  torch::Tensor input_ids, segment_ids, input_mask;  // [B, S]: int64, int64, int64
  torch::Tensor masked_positions;                    // int64 [P]: indices into the flattened [B*S]
  torch::Tensor masked_lm_ids;                       // int64 [P]
  torch::Tensor next_sentence_labels;                // int64 [B]
};

PretrainingBatch make_batch(const data::BertSamples& samples, torch::Device device);

// Masked-LM cross entropy (mean over predictions) plus next-sentence cross entropy, as the reference sums them.
torch::Tensor pretraining_loss(const BertForPreTraining& model, const BertOutputs& outputs, const PretrainingBatch& batch);

// zero_grad, forward, loss, backward (gradients averaged over the ranks as they are produced), LAMB step.
// Returns the loss.
torch::Tensor train_step(BertForPreTraining& model, Lamb& optimizer, dist::GradientSync& gradients,
                         const PretrainingBatch& batch, double learning_rate);

// Correctly predicted masked tokens of a batch (argmax), counted in eval mode without gradients.
int64_t masked_lm_correct(BertForPreTraining& model, const PretrainingBatch& batch);

}  // namespace trainbench::bert
