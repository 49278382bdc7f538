#include "workloads/gpt3/model.h"

#include <algorithm>
#include <cmath>

#include "parallel/tensor_parallel.h"
#include "util/error.h"

namespace trainbench::gpt3 {

namespace {

torch::nn::Module& level(torch::nn::Module& parent, const std::string& name) {
  return *parent.register_module(name, std::make_shared<torch::nn::Module>());
}

LayerNorm1P layer_norm(torch::nn::Module& parent, const std::string& name, const GptOptions& options) {
  return parent.register_module(name, LayerNorm1P(LayerNorm1POptions(options.hidden()).eps(options.layer_norm_eps())));
}

// The reference's fused bias-GeLU (megatron/model/fused_bias_gelu.py) is GeLU's tanh approximation.
torch::Tensor tanh_gelu(const torch::Tensor& x) {
  return 0.5 * x * (1.0 + torch::tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
}

// A function whose activations are recomputed in backward: forward runs it without recording, backward runs it
// again with recording and back-propagates through that (Megatron's checkpointing of the core attention; LibTorch
// has no torch.utils.checkpoint). Dropout is 0 here, so the second forward equals the first.
struct LayerClosure : torch::CustomClassHolder {
  std::function<torch::Tensor(const torch::Tensor&)> run;
};

struct Recomputed : torch::autograd::Function<Recomputed> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& input,
                               c10::intrusive_ptr<LayerClosure> layer) {
    context->save_for_backward({input});
    context->saved_data["layer"] = c10::IValue::make_capsule(layer);
    torch::NoGradGuard no_grad;
    return layer->run(input);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list output_gradients) {
    const auto layer = context->saved_data["layer"].toCapsule();
    const torch::Tensor input = context->get_saved_variables()[0].detach().requires_grad_(true);
    torch::AutoGradMode recording(true);
    const torch::Tensor output = static_cast<LayerClosure*>(layer.get())->run(input);
    torch::autograd::backward({output}, {output_gradients[0]});
    return {input.grad(), torch::Tensor()};
  }
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

LayerNorm1PImpl::LayerNorm1PImpl(const LayerNorm1POptions& options) : options(options) { reset(); }

void LayerNorm1PImpl::reset() {
  weight = register_parameter("weight", torch::zeros({options.width()}));
  bias = register_parameter("bias", torch::zeros({options.width()}));
}

torch::Tensor LayerNorm1PImpl::forward(const torch::Tensor& input) {
  return torch::layer_norm(input, {options.width()}, weight + 1, bias, options.eps());
}

int64_t tensor_parallel_dim(const std::string& name) {
  if (name == kWordEmbeddings || name == kHeadWordEmbeddings) return 0;
  for (const char* column : {".query_key_value.", ".dense_h_to_4h."})
    if (name.find(column) != std::string::npos) return 0;
  if (ends_with(name, ".self_attention.dense.weight") || ends_with(name, ".dense_4h_to_h.weight")) return 1;
  return -1;
}

torch::Tensor causal_bias(int64_t seq_length, const torch::TensorOptions& options) {
  return torch::full({seq_length, seq_length}, -10000.0, options).triu(1);
}

GptLayerImpl::GptLayerImpl(const GptOptions& options, const GptPartition& partition)
    : heads_(options.heads() / partition.tensor_size()),
      head_width_(options.hidden() / options.heads()),
      partition_(partition),
      recompute_(options.recompute()) {
  const int64_t parts = partition.tensor_size(), hidden = options.hidden(), ffn = options.ffn_hidden() / parts;
  input_layernorm = layer_norm(*this, "input_layernorm", options);
  auto& attention = level(*this, "self_attention");
  auto& qkv = level(attention, "query_key_value");
  query_key_value_weight = qkv.register_parameter("weight", torch::empty({3 * hidden / parts, hidden}));
  query_key_value_bias = qkv.register_parameter("bias", torch::empty({3 * hidden / parts}));
  auto& dense = level(attention, "dense");
  dense_weight = dense.register_parameter("weight", torch::empty({hidden, hidden / parts}));
  dense_bias = dense.register_parameter("bias", torch::empty({hidden}));
  post_attention_layernorm = layer_norm(*this, "post_attention_layernorm", options);
  auto& mlp = level(*this, "mlp");
  auto& up = level(mlp, "dense_h_to_4h");
  dense_h_to_4h_weight = up.register_parameter("weight", torch::empty({ffn, hidden}));
  dense_h_to_4h_bias = up.register_parameter("bias", torch::empty({ffn}));
  auto& down = level(mlp, "dense_4h_to_h");
  dense_4h_to_h_weight = down.register_parameter("weight", torch::empty({hidden, ffn}));
  dense_4h_to_h_bias = down.register_parameter("bias", torch::empty({hidden}));
}

torch::Tensor GptLayerImpl::column_parallel(const torch::Tensor& input, const torch::Tensor& weight,
                                            const torch::Tensor& bias) {
  if (!partition_.split()) return torch::nn::functional::linear(input, weight, bias);
  return torch::nn::functional::linear(parallel::copy_to_tensor_parallel(input, *partition_.tensor_group), weight,
                                       bias);
}

torch::Tensor GptLayerImpl::row_parallel(const torch::Tensor& input, const torch::Tensor& weight,
                                         const torch::Tensor& bias) {
  if (!partition_.split()) return torch::nn::functional::linear(input, weight, bias);
  return parallel::reduce_from_tensor_parallel(torch::nn::functional::linear(input, weight), *partition_.tensor_group) +
         bias;
}

// Megatron's ParallelAttention: one product gives each head's query, key and value side by side ([s, b, heads,
// 3·d], the layout of the checkpoint's query_key_value rows), then the core attention, then the output projection.
torch::Tensor GptLayerImpl::attention(const torch::Tensor& normed, const torch::Tensor& causal_bias) {
  const int64_t seq = normed.size(0), batch = normed.size(1);
  const torch::Tensor mixed =
      column_parallel(normed, query_key_value_weight, query_key_value_bias).view({seq, batch, heads_, 3 * head_width_});
  torch::Tensor context;
  if (recompute_ && mixed.requires_grad() && torch::GradMode::is_enabled()) {
    auto closure = c10::make_intrusive<LayerClosure>();
    closure->run = [this, causal_bias](const torch::Tensor& input) { return core_attention(input, causal_bias); };
    context = Recomputed::apply(mixed, closure);
  } else {
    context = core_attention(mixed, causal_bias);
  }
  return row_parallel(context, dense_weight, dense_bias);
}

// Scaled, causally masked scores, softmax and the context, joined back to [s, b, heads·d].
torch::Tensor GptLayerImpl::core_attention(const torch::Tensor& mixed, const torch::Tensor& causal_bias) const {
  const int64_t seq = mixed.size(0), batch = mixed.size(1);
  const std::vector<torch::Tensor> qkv = mixed.split(head_width_, -1);
  // [s, b, heads, d] -> [b·heads, s, d]
  const auto batched = [&](const torch::Tensor& x) {
    return x.permute({1, 2, 0, 3}).reshape({batch * heads_, seq, head_width_});
  };
  const torch::Tensor scores =
      torch::baddbmm(causal_bias.unsqueeze(0), batched(qkv[0]), batched(qkv[1]).transpose(1, 2), 1.0,
                     1.0 / std::sqrt(static_cast<double>(head_width_)));
  return torch::bmm(scores.softmax(-1), batched(qkv[2]))
      .view({batch, heads_, seq, head_width_})
      .permute({2, 0, 1, 3})
      .reshape({seq, batch, heads_ * head_width_});
}

torch::Tensor GptLayerImpl::mlp(const torch::Tensor& normed) {
  return row_parallel(tanh_gelu(column_parallel(normed, dense_h_to_4h_weight, dense_h_to_4h_bias)),
                      dense_4h_to_h_weight, dense_4h_to_h_bias);
}

// Pre-LayerNorm residual blocks (apply_residual_connection_post_layernorm off).
torch::Tensor GptLayerImpl::forward(const torch::Tensor& hidden, const torch::Tensor& causal_bias) {
  const torch::Tensor attended = hidden + attention(input_layernorm(hidden), causal_bias);
  return attended + mlp(post_attention_layernorm(attended));
}

GptModelImpl::GptModelImpl(const GptOptions& options, const GptPartition& partition)
    : options_(options), partition_(partition) {
  const int64_t rows = vocab_rows() / partition_.tensor_size();
  auto& language_model = level(*this, "language_model");
  if (partition_.embeddings) {
    auto& embedding = level(language_model, "embedding");
    word_embeddings = embedding.register_module("word_embeddings", torch::nn::Embedding(rows, options_.hidden()));
    position_embeddings = embedding.register_module("position_embeddings",
                                                    torch::nn::Embedding(options_.max_positions(), options_.hidden()));
  }
  auto& encoder = level(language_model, "encoder");
  auto& layers = level(encoder, "layers");
  for (int64_t i = 0; i < options_.layers(); ++i)
    if (partition_.layers.empty() || std::count(partition_.layers.begin(), partition_.layers.end(), i))
      layers_.emplace(i, layers.register_module(std::to_string(i), GptLayer(options_, partition_)));
  if (!partition_.head) return;
  final_layernorm = layer_norm(encoder, "final_layernorm", options_);
  head_weight_ =
      partition_.embeddings
          ? word_embeddings->weight
          : level(*this, "word_embeddings").register_parameter("weight", torch::empty({rows, options_.hidden()}));
}

int64_t GptModelImpl::vocab_rows() const {
  return partition_.padded_vocab > 0 ? partition_.padded_vocab : options_.vocab_size();
}

void GptModelImpl::reset_parameters(at::Generator& generator) {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    torch::Tensor& parameter = item.value();
    if (parameter.dim() == 1)
      parameter.zero_();
    else
      parameter.normal_(0.0, options_.init_std(), generator);
  }
}

void GptModelImpl::take_shards(GptModelImpl& whole) {
  torch::NoGradGuard no_grad;
  const auto sources = whole.named_parameters();
  const int parts = partition_.tensor_size(), rank = partition_.tensor_rank();
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor source = sources[name == kHeadWordEmbeddings ? kWordEmbeddings : name];
    const int64_t dim = tensor_parallel_dim(name);
    if (dim >= 0 && parts > 1) source = source.chunk(parts, dim)[static_cast<size_t>(rank)];
    if (!source.sizes().equals(item.value().sizes()))
      fail("gpt3 model", name + " of the whole model does not split into this rank's shape");
    item.value().copy_(source);
  }
}

torch::Tensor GptModelImpl::embed(const torch::Tensor& tokens) {
  if (!partition_.embeddings) fail("gpt3 model", "embed() on a stage without the embeddings");
  const int64_t seq = tokens.size(1);
  torch::Tensor words;
  if (!partition_.split()) {
    words = word_embeddings(tokens);
  } else {
    // The vocab-parallel lookup: each rank looks up the ids in its rows, the rest give zeros, and the ranks'
    // lookups are summed.
    const int64_t rows = word_embeddings->weight.size(0), first = rows * partition_.tensor_rank();
    const torch::Tensor mine = (tokens >= first).logical_and(tokens < first + rows);
    const torch::Tensor local = torch::embedding(word_embeddings->weight, (tokens - first) * mine) *
                                mine.unsqueeze(-1).to(word_embeddings->weight.scalar_type());
    words = parallel::reduce_from_tensor_parallel(local, *partition_.tensor_group);
  }
  const torch::Tensor positions = position_embeddings(torch::arange(seq, tokens.options()));
  return (words + positions).transpose(0, 1).contiguous();  // [b, s, h] -> [s, b, h]
}

torch::Tensor GptModelImpl::encode(torch::Tensor hidden, int64_t first, int64_t last) {
  const torch::Tensor bias = causal_bias(hidden.size(0), hidden.options());
  for (int64_t i = first; i < last; ++i) {
    const auto layer = layers_.find(i);
    if (layer == layers_.end()) fail("gpt3 model", "layer " + std::to_string(i) + " is not held by this rank");
    hidden = layer->second(hidden, bias);
  }
  return hidden;
}

torch::Tensor GptModelImpl::token_losses(const torch::Tensor& hidden, const torch::Tensor& labels) {
  if (!partition_.head) fail("gpt3 model", "token_losses() on a stage without the output layer");
  const torch::Tensor normed = final_layernorm(hidden).transpose(0, 1);  // [b, s, h]
  const int64_t batch = normed.size(0), seq = normed.size(1);
  const torch::Tensor rows = normed.reshape({batch * seq, options_.hidden()});
  if (!partition_.split()) {
    const torch::Tensor logits = torch::nn::functional::linear(rows, head_weight_);
    return torch::nn::functional::cross_entropy(
               logits, labels.reshape({-1}), torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
        .view({batch, seq});
  }
  // Megatron's parallel_lm_logits and vocab-parallel cross-entropy over each rank's rows of the logits. The
  // padding rows take part in the softmax, as in the reference, whose padded table is drawn and trained whole.
  const torch::Tensor local_logits =
      torch::nn::functional::linear(parallel::copy_to_tensor_parallel(rows, *partition_.tensor_group), head_weight_);
  return parallel::vocab_parallel_cross_entropy(local_logits, labels.reshape({-1}), *partition_.tensor_group,
                                                vocab_rows())
      .view({batch, seq});
}

torch::Tensor GptModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& labels,
                                    const torch::Tensor& loss_mask) {
  const torch::Tensor losses = token_losses(encode(embed(tokens), 0, options_.layers()), labels);
  return (losses * loss_mask).sum() / loss_mask.sum();
}

double GptModelImpl::step_flops(int64_t sequences, int64_t seq_length) const {
  const double b = static_cast<double>(sequences), s = static_cast<double>(seq_length);
  const double h = static_cast<double>(options_.hidden()), ffn = static_cast<double>(options_.ffn_hidden());
  const double layer_forward = 2 * b * s * (4 * h * h + 2 * h * ffn) + 4 * b * s * s * h;
  const double recomputed = options_.recompute() ? 4 * b * s * s * h : 0;  // scores and context once more
  return static_cast<double>(options_.layers()) * (3 * layer_forward + recomputed) +
         3 * 2 * b * s * h * static_cast<double>(options_.vocab_size());
}

}  // namespace trainbench::gpt3
