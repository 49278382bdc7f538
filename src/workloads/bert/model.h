#pragma once
// BERT for pre-training (Devlin et al.; the MLPerf "bert" model): embeddings, post-LayerNorm transformer
// encoder layers, pooler, and the two pre-training heads. BertOptions{} is BERT-Large; the mini preset
// shrinks it on the same code. Submodule names follow the MLPerf/NVIDIA PyTorch BERT (and Hugging Face),
// e.g. bert.encoder.layer.3.attention.self.query.weight, so converted checkpoints load by name.
#include <torch/torch.h>

#include "optim/parameters.h"

namespace trainbench::bert {

// Inverted dropout (zero with probability p, else scale by 1 / (1 - p)), as torch::dropout, with the mask
// drawn differently for float32 on the CPU: ATen fills it with bernoulli_ one element at a time on one thread
// (about 5% of the mini step, which nothing overlaps). Here element i's 24-bit uniform is a hash of i and a
// 64-bit key drawn from the default generator per call, so the mask is reproducible under torch::manual_seed
// and fills in parallel, vectorised. Other types and devices get torch::dropout.
torch::Tensor dropout(const torch::Tensor& input, double p, bool training);

struct BertOptions {
  TORCH_ARG(int64_t, vocab_size) = 30522;
  TORCH_ARG(int64_t, hidden) = 1024;
  TORCH_ARG(int64_t, layers) = 24;
  TORCH_ARG(int64_t, heads) = 16;
  TORCH_ARG(int64_t, intermediate) = 4096;
  TORCH_ARG(int64_t, max_positions) = 512;
  TORCH_ARG(int64_t, type_vocab_size) = 2;
  TORCH_ARG(double, dropout) = 0.1;            // hidden and attention-probability dropout
  TORCH_ARG(double, layer_norm_eps) = 1e-12;
  TORCH_ARG(double, initializer_range) = 0.02;  // truncated normal std, as the reference initialises
};

class BertLayerImpl : public torch::nn::Module {
 public:
  explicit BertLayerImpl(const BertOptions& options);
  // `attention_bias`: [B, 1, 1, S], 0 for real tokens and -10000 for padding (the reference's additive mask).
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& attention_bias);

 private:
  int64_t heads_;
  double dropout_;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, attention_dense{nullptr}, intermediate{nullptr},
      output_dense{nullptr};
  torch::nn::LayerNorm attention_norm{nullptr}, output_norm{nullptr};
};
TORCH_MODULE(BertLayer);

struct BertOutputs {
  torch::Tensor masked_lm_features;      // [predictions, hidden]: the MLM head's transform, only at the masked positions
  torch::Tensor next_sentence_logits;    // [batch, 2]
};

class BertForPreTrainingImpl : public torch::nn::Module {
 public:
  explicit BertForPreTrainingImpl(const BertOptions& options = {});
  // input_ids, segment_ids: int64 [B, S]; input_mask: [B, S], nonzero for real tokens; masked_positions:
  // int64 [P], indices into the flattened [B*S] tokens whose original ids are to be predicted.
  BertOutputs forward(const torch::Tensor& input_ids, const torch::Tensor& segment_ids, const torch::Tensor& input_mask,
                      const torch::Tensor& masked_positions);

  // The MLM decoder (its weight tied to the word embeddings) over BertOutputs::masked_lm_features:
  // [predictions, vocab] logits.
  torch::Tensor masked_lm_logits(const torch::Tensor& features) const;
  // The masked-LM loss: cross_entropy(masked_lm_logits(features), labels), the mean over predictions, with a
  // fused backward (one pass over the [predictions, vocab] probabilities instead of four). labels: int64
  // [predictions], each in [0, vocab).
  torch::Tensor masked_lm_loss(const torch::Tensor& features, const torch::Tensor& labels) const;

  // Re-draws all weights as the reference does: truncated normal(0, initializer_range) for matrices and
  // embeddings, zero biases, LayerNorm gamma 1 / beta 0.
  void reset_parameters();
  // Multiply-accumulates of one forward pass for a batch of `sequences` of `seq_length` with `predictions`
  // masked positions in all (matrix products only).
  double forward_macs(int64_t sequences, int64_t seq_length, int64_t predictions) const;
  const BertOptions& options() const { return options_; }

 private:
  BertOptions options_;
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm embeddings_norm{nullptr};
  std::vector<BertLayer> layers_;
  torch::nn::Linear pooler{nullptr}, transform{nullptr}, seq_relationship{nullptr};
  torch::nn::LayerNorm transform_norm{nullptr};
  torch::Tensor output_bias;  // the MLM decoder's bias; its weight is word_embeddings' (tied)
};
TORCH_MODULE(BertForPreTraining);

// The MLPerf (TF checkpoint) name of a parameter, as the v1.1 rules list them for weights_initialization:
// bert.encoder.layer.3.attention.self.query.weight -> bert/encoder/layer_3/attention/self/query/kernel,
// *.LayerNorm.weight -> .../LayerNorm/gamma, cls.predictions.bias -> cls/predictions/output_bias,
// cls.seq_relationship.weight -> cls/seq_relationship/output_weights.
std::string mlperf_tensor_name(const std::string& parameter_name);

// Parameters LAMB does not decay: biases and LayerNorm, as the reference excludes them.
bool excluded_from_weight_decay(const std::string& parameter_name);
// The model's parameters for LAMB, each flagged by excluded_from_weight_decay.
std::vector<optim::Parameter> optimizer_parameters(const BertForPreTraining& model);

// Loads a checkpoint in the documented format (docs/bert-checkpoint.md): a pickled dict {name: tensor} with
// these parameter names, as torch.save writes it, or such a dict under "model" (as NVIDIA's
// convert_tf_checkpoint.py saves one). The layout of NVIDIA's BertForPretraining is read too: a vocabulary
// padded to a multiple of 8 (the padding rows are dropped) and the tied decoder's weight
// (cls.predictions.decoder.weight, which must equal the word embeddings). Every parameter must be present
// with its shape; extra entries are an error naming them. Throws Error naming the file.
void load_checkpoint(BertForPreTraining& model, const std::string& path);

// Writes the model as the state dict of NVIDIA's v1.1 BertForPretraining (modeling.py, built with the
// unfused layers convert_tf_checkpoint.py sets): these names, the tied decoder's weight as its own entry, and
// the vocabulary padded with zero rows to a multiple of 8, as that class pads its config's vocab_size.
void save_official_checkpoint(const BertForPreTraining& model, const std::string& path);

}  // namespace trainbench::bert
