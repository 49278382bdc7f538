#pragma once
// GPT-3 as MLPerf's reference builds it (Megatron-LM's GPTModel, run_gpt3.sh): learned word and position
// embeddings, pre-LayerNorm decoder layers with causal self-attention and a 4h GeLU MLP, a final LayerNorm, and
// the output projection tied to the word embeddings. Dropout is 0 in the reference, so there is none here; the
// attention scores are scaled by 1/sqrt(head width) alone (no query-key layer scaling). Tensors are Megatron's
// [sequence, batch, hidden], so that a layer's input splits along the sequence as sequence parallelism splits
// it. Parameter names are the reference's (language_model.encoder.layers.3.self_attention.query_key_value.weight),
// so the distributed checkpoint's arrays map onto them by name. Under a plan (parallel/plan.h) a rank holds its
// tensor-parallel slice (heads, MLP width, vocabulary rows) of its pipeline stage's layers.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "parallel/communicator.h"

namespace trainbench::gpt3 {

struct GptOptions {
  TORCH_ARG(int64_t, vocab_size) = 50257;
  TORCH_ARG(int64_t, hidden) = 12288;
  TORCH_ARG(int64_t, layers) = 96;
  TORCH_ARG(int64_t, heads) = 96;
  TORCH_ARG(int64_t, ffn_hidden) = 4 * 12288;
  TORCH_ARG(int64_t, max_positions) = 2048;
  TORCH_ARG(double, init_std) = 0.006;  // every weight and embedding ~ N(0, init_std); --no-scaled-init
  TORCH_ARG(double, layer_norm_eps) = 1e-5;
  // The core attention (scores, softmax, context: the activations that grow with s²) is recomputed in backward
  // instead of kept, as the reference's --recompute-activations does (Megatron's selective granularity).
  TORCH_ARG(bool, recompute) = false;
};

// What one rank holds of the model: the tensor-parallel group its heads, MLP width and vocabulary rows are split
// over, and the layers of its pipeline stage. The default is the whole model.
struct GptPartition {
  std::shared_ptr<parallel::Communicator> tensor_group;  // null or a group of one: not split
  // Vocabulary rows over all tensor ranks, padded as Megatron pads them (a multiple of make_vocab_size_divisible_by
  // x tensor ranks; the padding rows are drawn, trained and softmaxed like the rest); 0: vocab_size.
  int64_t padded_vocab = 0;
  std::vector<int64_t> layers;  // global indices held; empty: all
  bool embeddings = true;       // the first stage: word and position embeddings
  bool head = true;             // the last stage: final LayerNorm and the output projection (the tied word embeddings)

  int tensor_size() const { return tensor_group ? tensor_group->world() : 1; }
  int tensor_rank() const { return tensor_group ? tensor_group->rank() : 0; }
  bool split() const { return tensor_size() > 1; }
};

// The reference's parameter names: the word embeddings of the first stage, and their copy on the last stage
// when the two differ (Megatron's word_embeddings_for_head).
constexpr const char* kWordEmbeddings = "language_model.embedding.word_embeddings.weight";
constexpr const char* kHeadWordEmbeddings = "word_embeddings.weight";

// The dimension a parameter is split along over tensor-parallel ranks (0: column-parallel weights and biases
// and the vocabulary's rows; 1: row-parallel weights), or -1 where every rank holds it whole.
int64_t tensor_parallel_dim(const std::string& parameter_name);

// The reference's LayerNorm (megatron/model/__init__.py exports MixedFusedLayerNorm1P as LayerNorm): the weight is
// the gain minus 1, drawn as 0 and applied as weight + 1, so that weight decay pulls the gain towards 1 and the
// checkpoint's arrays hold the gain's offset.
struct LayerNorm1POptions {
  explicit LayerNorm1POptions(int64_t width) : width_(width) {}
  TORCH_ARG(int64_t, width);
  TORCH_ARG(double, eps) = 1e-5;
};

class LayerNorm1PImpl : public torch::nn::Cloneable<LayerNorm1PImpl> {
 public:
  explicit LayerNorm1PImpl(const LayerNorm1POptions& options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& input);

  LayerNorm1POptions options;
  torch::Tensor weight, bias;
};
TORCH_MODULE(LayerNorm1P);

class GptLayerImpl : public torch::nn::Module {
 public:
  GptLayerImpl(const GptOptions& options, const GptPartition& partition);
  // hidden: [s, b, h]; causal_bias: [s, s], 0 on and below the diagonal and -10000 above it.
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& causal_bias);

 private:
  torch::Tensor attention(const torch::Tensor& normed, const torch::Tensor& causal_bias);
  // Scores, causal softmax and context of [s, b, heads, 3·d] mixed query-key-value: [s, b, heads·d].
  torch::Tensor core_attention(const torch::Tensor& mixed, const torch::Tensor& causal_bias) const;
  torch::Tensor mlp(const torch::Tensor& normed);
  // Megatron's column- and row-parallel products: f (identity, gradient summed) before a column split, g (sum)
  // after a row split, the row-parallel bias added once after the sum.
  torch::Tensor column_parallel(const torch::Tensor& input, const torch::Tensor& weight, const torch::Tensor& bias);
  torch::Tensor row_parallel(const torch::Tensor& input, const torch::Tensor& weight, const torch::Tensor& bias);

  int64_t heads_;  // held here: heads / tensor ranks
  int64_t head_width_;
  GptPartition partition_;
  LayerNorm1P input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  bool recompute_;
  torch::Tensor query_key_value_weight, query_key_value_bias, dense_weight, dense_bias;
  torch::Tensor dense_h_to_4h_weight, dense_h_to_4h_bias, dense_4h_to_h_weight, dense_4h_to_h_bias;
};
TORCH_MODULE(GptLayer);

class GptModelImpl : public torch::nn::Module {
 public:
  // This rank's part (the whole model with GptPartition{}), its parameters drawn by reset_parameters().
  GptModelImpl(const GptOptions& options, const GptPartition& partition = {});

  // The pieces a pipeline stage runs. tokens: int64 [b, s] -> [s, b, h].
  torch::Tensor embed(const torch::Tensor& tokens);
  // Layers [first, last), which this rank must hold.
  torch::Tensor encode(torch::Tensor hidden, int64_t first, int64_t last);
  // Per-token cross-entropy of the next token, [b, s], from the last layer's [s, b, h]; labels: int64 [b, s].
  torch::Tensor token_losses(const torch::Tensor& hidden, const torch::Tensor& labels);
  // The whole model on one stage: the mean of token_losses over the tokens whose mask is 1.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& labels, const torch::Tensor& loss_mask);

  // Draws every weight as the reference: N(0, init_std) for matrices and embeddings, zero biases and LayerNorm
  // parameters (LayerNorm1P: gain 1).
  void reset_parameters(at::Generator& generator);
  // This rank's slices of the whole model's parameters (a model built with no tensor group, no stages and the
  // same padded_vocab).
  void take_shards(GptModelImpl& whole);
  const GptOptions& options() const { return options_; }
  const GptPartition& partition() const { return partition_; }
  // The vocabulary rows over all tensor ranks (padded as Megatron pads them under tensor parallelism).
  int64_t vocab_rows() const;
  // Floating-point operations of one training step on `sequences` of `seq_length` tokens: forward and backward
  // of the matrix products (the Megatron paper's 72·B·s·l·h²(1 + s/6h + V/12lh) at ffn 4h), and with recompute
  // the core attention's second forward, 4·B·s²·h per layer.
  double step_flops(int64_t sequences, int64_t seq_length) const;

 private:
  GptOptions options_;
  GptPartition partition_;
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr};
  std::map<int64_t, GptLayer> layers_;  // by global index
  LayerNorm1P final_layernorm{nullptr};
  torch::Tensor head_weight_;  // the output projection: the word embeddings, or their copy on the last stage
};
TORCH_MODULE(GptModel);

// The causal mask as an additive bias: [s, s], 0 where a position may attend, -10000 where it may not (Megatron
// fills the masked scores with -10000 before the softmax; exp underflows to 0 either way).
torch::Tensor causal_bias(int64_t seq_length, const torch::TensorOptions& options);

}  // namespace trainbench::gpt3
