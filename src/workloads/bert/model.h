#pragma once
// BERT for pre-training (Devlin et al.; the MLPerf "bert" model): embeddings, post-LayerNorm transformer
// encoder layers, pooler, and the two pre-training heads. BertOptions{} is BERT-Large; the mini preset
// shrinks it on the same code. Submodule names follow the MLPerf/NVIDIA PyTorch BERT (and Hugging Face),
// e.g. bert.encoder.layer.3.attention.self.query.weight, so converted checkpoints load by name.
#include <map>
#include <memory>
#include <optional>

#include <torch/torch.h>

#include "optim/parameters.h"
#include "parallel/communicator.h"

namespace trainbench::bert {

// Which mask a dropout draws: a key per update and dropout site, and where the input's elements sit in the
// tensor the unsplit model on one rank would hold — its first row among the global batch's rows, and for a
// tensor split over tensor-parallel ranks (attention heads) which slice [offset, offset + local) of `full`
// along dim 1 it holds. Element g of that whole tensor is kept or dropped by a hash of g and the key alone, so
// a model split by data, tensor or pipeline parallelism drops exactly what the one-rank model drops, while
// the heads of different tensor-parallel ranks still get different masks (what Megatron's model-parallel RNG
// tracker is for).
struct DropoutSite {
  uint64_t key = 0;
  int64_t first_row = 0;
  int64_t shard_offset = 0, shard_full = 0;  // shard_full 0: not split (dim 1 is whole)
};

// Inverted dropout (zero with probability p, else scale by 1 / (1 - p)) with the mask of `site`. For float32 on
// the CPU each element's 24-bit uniform is a hash of its index in the whole tensor and the key (which also
// fills in parallel and vectorised, where ATen's bernoulli_ runs one element at a time on one thread: about 5%
// of the mini step). Other types and devices get torch::dropout with a generator seeded from the key and the
// shard: reproducible, but not the same mask as the unsplit model's.
torch::Tensor dropout(const torch::Tensor& input, double p, bool training, const DropoutSite& site);
// A site's key: the update's key mixed with the site's number (e.g. 1 + 3 · layer + 1 for a layer's attention).
uint64_t dropout_key(uint64_t update_key, uint64_t site);

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

// How a BERT model is split over ranks (parallel/context.h): the tensor-parallel group its attention heads,
// feed-forward width and vocabulary are split over (Megatron's column- and row-parallel layers), and the part
// of the layer stack a pipeline rank holds. The default is the whole model on one rank.
struct BertPartition {
  std::shared_ptr<parallel::Communicator> tensor_group;  // null or a group of one: not split
  int64_t padded_vocab = 0;     // vocabulary rows over all tensor-parallel ranks; 0: vocab_size
  std::vector<int64_t> layers;  // the encoder layers held here (global indices); empty: all of them
  bool embeddings = true;       // holds the embeddings (the first pipeline stage)
  bool heads = true;            // holds the pooler, the heads and the tied decoder (the last stage)

  int tensor_size() const { return tensor_group ? tensor_group->world() : 1; }
  int tensor_rank() const { return tensor_group ? tensor_group->rank() : 0; }
  bool split() const { return tensor_size() > 1; }
};

// The dimension a parameter of BertForPreTraining is split along over tensor-parallel ranks (0 for
// column-parallel weights and biases and the vocabulary's rows, 1 for row-parallel weights), or -1 where it is
// replicated.
int64_t tensor_parallel_dim(const std::string& parameter_name);

// The state of one forward pass: dropout's key for the update and the first row of the micro-batch among the
// global batch's rows (DropoutSite).
struct ForwardPass {
  uint64_t dropout_key = 0;
  int64_t first_row = 0;
};

class BertLayerImpl : public torch::nn::Module {
 public:
  BertLayerImpl(const BertOptions& options, int64_t index, const BertPartition& partition = {});
  // `attention_bias`: [B, 1, 1, S], 0 for real tokens and -10000 for padding (the reference's additive mask).
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& attention_bias, const ForwardPass& pass);

 private:
  torch::Tensor column_parallel(const torch::Tensor& input, const torch::Tensor& weight, const torch::Tensor& bias);
  torch::Tensor row_parallel(const torch::nn::Linear& layer, const torch::Tensor& input);
  DropoutSite site(const ForwardPass& pass, int64_t number, int64_t shard_offset = 0, int64_t shard_full = 0) const;

  int64_t index_;
  int64_t heads_;  // held here: heads / tensor-parallel ranks
  int64_t all_heads_;
  double dropout_;
  BertPartition partition_;
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
  // The whole model, initialised from LibTorch's default generator (reset_parameters).
  explicit BertForPreTrainingImpl(const BertOptions& options = {});
  // This rank's part of a split model (with BertPartition{}: the whole model), its parameters not yet drawn:
  // take_shards() fills them from the whole model, so that every split starts from the same weights.
  BertForPreTrainingImpl(const BertOptions& options, const BertPartition& partition);
  // input_ids, segment_ids: int64 [B, S]; input_mask: [B, S], nonzero for real tokens; masked_positions:
  // int64 [P], indices into the flattened [B*S] tokens whose original ids are to be predicted.
  BertOutputs forward(const torch::Tensor& input_ids, const torch::Tensor& segment_ids, const torch::Tensor& input_mask,
                      const torch::Tensor& masked_positions, const ForwardPass& pass = {});

  // forward's parts, for pipeline stages: the embeddings (first stage), the layers [first, last) (held here),
  // and the heads (last stage).
  torch::Tensor embed(const torch::Tensor& input_ids, const torch::Tensor& segment_ids, const ForwardPass& pass);
  torch::Tensor encode(torch::Tensor hidden, const torch::Tensor& input_mask, int64_t first, int64_t last,
                       const ForwardPass& pass);
  BertOutputs predict(const torch::Tensor& hidden, const torch::Tensor& masked_positions);

  // This rank's slices of the whole model's parameters (a model built with BertForPreTrainingImpl(options)).
  void take_shards(const BertForPreTrainingImpl& whole);
  const BertPartition& partition() const { return partition_; }

  // The MLM decoder (its weight tied to the word embeddings) over BertOutputs::masked_lm_features:
  // [predictions, vocab] logits.
  torch::Tensor masked_lm_logits(const torch::Tensor& features) const;
  // The masked-LM loss: cross_entropy(masked_lm_logits(features), labels), the mean over predictions, with a
  // fused backward (one pass over the [predictions, vocab] probabilities instead of four). labels: int64
  // [predictions], each in [0, vocab).
  torch::Tensor masked_lm_loss(const torch::Tensor& features, const torch::Tensor& labels) const;
  // The argmax over the vocabulary of masked_lm_logits(features), for the accuracy metric.
  torch::Tensor masked_lm_predictions(const torch::Tensor& features) const;

  // Re-draws all weights as the reference does: truncated normal(0, initializer_range) for matrices and
  // embeddings, zero biases, LayerNorm gamma 1 / beta 0; from `generator`, or LibTorch's default one.
  void reset_parameters(c10::optional<at::Generator> generator = c10::nullopt);
  // Multiply-accumulates of one forward pass for a batch of `sequences` of `seq_length` with `predictions`
  // masked positions in all (matrix products only).
  double forward_macs(int64_t sequences, int64_t seq_length, int64_t predictions) const;
  const BertOptions& options() const { return options_; }

 private:
  void register_modules();

  BertOptions options_;
  BertPartition partition_;
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm embeddings_norm{nullptr};
  std::map<int64_t, BertLayer> layers_;  // by global index
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
// (cls.predictions.decoder.weight, which must equal the word embeddings), and the names other code saves: a
// "module." prefix, LayerNorm gamma / beta, position_ids (dropped), a decoder bias equal to cls.predictions.bias.
// The file is read by read_state_dict_file (util/torch_file.h): Python's own files, zip or legacy, dict or
// OrderedDict. Every parameter must be present with its shape; extra entries are an error naming them. Throws
// Error naming the file.
void load_checkpoint(BertForPreTraining& model, const std::string& path);

// Writes the model as the state dict of NVIDIA's v1.1 BertForPretraining (modeling.py, built with the
// unfused layers convert_tf_checkpoint.py sets): these names, the tied decoder's weight as its own entry, and
// the vocabulary padded with zero rows to a multiple of 8, as that class pads its config's vocab_size.
void save_official_checkpoint(const BertForPreTraining& model, const std::string& path);

}  // namespace trainbench::bert
