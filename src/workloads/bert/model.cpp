#include "workloads/bert/model.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>

#include "parallel/tensor_parallel.h"
#include "util/error.h"
#include "workloads/bert/dense.h"
#include "workloads/checkpoint.h"

namespace trainbench::bert {

namespace {

constexpr const char* kWordEmbeddings = "bert.embeddings.word_embeddings.weight";
constexpr const char* kDecoderWeight = "cls.predictions.decoder.weight";
constexpr const char* kOutputBias = "cls.predictions.bias";

// NVIDIA's modeling.py users (run_pretraining.py, convert_tf_checkpoint.py) pad the vocabulary to a multiple
// of 8 before building the model.
int64_t padded_vocab_size(int64_t vocab) { return (vocab + 7) / 8 * 8; }

}  // namespace

namespace {

using torch::nn::Module;

// A named level of the module tree that holds no code of its own (e.g. "attention", "output"): it makes the
// parameter names match the reference's nesting without one C++ class per level.
std::shared_ptr<Module> level(Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<Module>());
}

torch::nn::Linear linear(Module& parent, const std::string& name, int64_t in, int64_t out) {
  return parent.register_module(name, torch::nn::Linear(in, out));
}

// GELU's tanh approximation, as both official implementations compute it: the MLPerf reference's
// language_model/tensorflow/bert/modeling.py (gelu) and NVIDIA's v1.1 model/layers/activations.py
// (ACT2FN["gelu"] = fast_gelu_impl).
torch::Tensor tanh_gelu(const torch::Tensor& x) { return torch::gelu(x, "tanh"); }

// A registered Linear's forward on bert::dense (oneDNN's sgemm where it is there).
torch::Tensor dense_layer(const torch::nn::Linear& layer, const torch::Tensor& input) {
  return dense(input, layer->weight, layer->bias);
}

torch::nn::LayerNorm layer_norm(Module& parent, const BertOptions& options) {
  return parent.register_module("LayerNorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.hidden()})
                                                                        .eps(options.layer_norm_eps())));
}

// Truncated normal(0, std) on [-2 std, 2 std], the TF reference's initializer, by inverting the normal CDF
// of a uniform draw over the kept range (exact, no resampling loop).
void truncated_normal_(torch::Tensor& tensor, double std, const c10::optional<at::Generator>& generator) {
  const double low = 0.5 * std::erfc(2.0 / std::sqrt(2.0));  // Phi(-2)
  tensor.uniform_(2 * low - 1, 1 - 2 * low, generator).erfinv_().mul_(std * std::sqrt(2.0));
}

// A 32-bit integer hash with good avalanche (Wellons' "lowbias32"); its multiplies vectorise, unlike a
// 64-bit generator's.
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// cross_entropy(linear(features, weight, bias), labels) averaged over rows. Autograd's cross_entropy would
// zero-fill a vocab-wide gradient, scatter into it and run log_softmax's backward over it: three passes over
// the step's largest tensor. Here the backward forms softmax - one_hot once (the exp of the saved
// log-probabilities, minus 1 at each label) and feeds it straight to the decoder's matrix products.
class DecoderCrossEntropy : public torch::autograd::Function<DecoderCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& features,
                               const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& labels) {
    const torch::Tensor log_probabilities = torch::log_softmax(affine(features, weight, bias), 1);
    context->save_for_backward({features, weight, labels});
    context->saved_data["log_probabilities"] = log_probabilities;
    return -log_probabilities.gather(1, labels.unsqueeze(1)).mean();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = context->get_saved_variables();
    const torch::Tensor &features = saved[0], &weight = saved[1], &labels = saved[2];
    const torch::Tensor log_probabilities = context->saved_data["log_probabilities"].toTensor();
    const int64_t rows = log_probabilities.size(0);
    torch::Tensor delta = log_probabilities.exp();  // d loss / d logits, before the scale: softmax - one_hot
    delta.scatter_add_(1, labels.unsqueeze(1), torch::full({rows, 1}, -1.0, delta.options()));
    // On a device the scale stays a tensor, so that the step needs no host synchronisation; on the CPU it
    // goes into the products' alpha, saving a pass over each gradient.
    const torch::Tensor scale = grad_outputs[0] / static_cast<double>(rows);
    const bool scale_on_host = scale.is_cpu();
    const double alpha = scale_on_host ? scale.item<double>() : 1.0;
    const auto scaled = [&](torch::Tensor gradient) { return scale_on_host ? gradient : gradient.mul_(scale); };
    torch::Tensor features_grad, weight_grad, bias_grad;
    if (context->needs_input_grad(0)) {
      features_grad = torch::empty_like(features);
      gemm_into(features_grad, delta, false, weight, false, alpha);
      features_grad = scaled(features_grad);
    }
    if (context->needs_input_grad(1)) {
      weight_grad = torch::empty_like(weight);
      gemm_into(weight_grad, delta, true, features, false, alpha);
      weight_grad = scaled(weight_grad);
    }
    if (context->needs_input_grad(2)) bias_grad = delta.sum(0).mul_(scale);
    return {features_grad, weight_grad, bias_grad, torch::Tensor()};
  }
};

}  // namespace

uint64_t dropout_key(uint64_t update_key, uint64_t site) {
  // splitmix64's finaliser over the pair: nearby site numbers give unrelated keys.
  uint64_t z = update_key + 0x9e3779b97f4a7c15ULL * (site + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

torch::Tensor dropout(const torch::Tensor& input, double p, bool training, const DropoutSite& site) {
  if (!training || p == 0) return input;
  if (!input.device().is_cpu()) return torch::dropout(input, p, true);  // the device's own generator
  if (input.scalar_type() != torch::kFloat) {
    // A generator of the key's and shard's own: replicated tensors get one mask on every rank, shards their own.
    auto generator =
        at::make_generator<at::CPUGeneratorImpl>(dropout_key(site.key, static_cast<uint64_t>(site.shard_offset)));
    return input * torch::empty_like(input).bernoulli_(1 - p, generator).div_(1 - p);
  }
  const auto key_low = static_cast<uint32_t>(site.key), key_high = static_cast<uint32_t>(site.key >> 32);
  // Keep an element when its 24-bit uniform is at least p; p's threshold in those units, rounded up.
  const auto threshold = static_cast<uint32_t>(std::min(std::ceil(p * 16777216.0), 16777216.0));
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  // The input as [rows, local, inner]: rows are batch rows, dim 1 the split one (or 1 when whole).
  const int64_t rows = input.size(0), local = site.shard_full > 0 ? input.size(1) : 1;
  const int64_t full = site.shard_full > 0 ? site.shard_full : 1,
                inner = input.numel() / std::max<int64_t>(1, rows * local);
  torch::Tensor mask = torch::empty(input.sizes(), input.options().memory_format(torch::MemoryFormat::Contiguous));
  float* values = mask.data_ptr<float>();
  at::parallel_for(
      0, rows * local, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, inner)), [&](int64_t begin, int64_t end) {
        for (int64_t line = begin; line < end; ++line) {
          const int64_t row = line / local, column = line % local;
          const auto first =
              static_cast<uint64_t>(((site.first_row + row) * full + site.shard_offset + column) * inner);
          float* out = values + line * inner;
          for (int64_t i = 0; i < inner; ++i) {
            const uint64_t g = first + static_cast<uint64_t>(i);
            const uint32_t bits =
                mix32(mix32(static_cast<uint32_t>(g) ^ key_low) + (static_cast<uint32_t>(g >> 32) ^ key_high));
            out[i] = (bits >> 8) >= threshold ? scale : 0.0f;
          }
        }
      });
  return input * mask;
}

int64_t tensor_parallel_dim(const std::string& name) {
  const auto ends_with = [&name](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (const char* column :
       {"attention.self.query.", "attention.self.key.", "attention.self.value.", "intermediate.dense."})
    if (name.find(column) != std::string::npos) return 0;
  if (name.find(".layer.") != std::string::npos && ends_with("output.dense.weight")) return 1;  // row-parallel
  if (name == kWordEmbeddings || name == kOutputBias) return 0;
  return -1;
}

BertLayerImpl::BertLayerImpl(const BertOptions& options, int64_t index, const BertPartition& partition)
    : index_(index),
      heads_(options.heads() / partition.tensor_size()),
      all_heads_(options.heads()),
      dropout_(options.dropout()),
      partition_(partition) {
  if (options.hidden() % options.heads() != 0)
    fail("bert model", "hidden " + std::to_string(options.hidden()) + " is not divisible by heads " + std::to_string(options.heads()));
  const int64_t hidden = options.hidden(), parts = partition.tensor_size();
  // Split over tensor-parallel ranks as Megatron splits a transformer layer: query, key, value and the first
  // feed-forward matrix by output rows (column-parallel: whole heads, a slice of the width), the two output
  // matrices by input columns (row-parallel), their biases and the LayerNorms whole.
  auto attention = level(*this, "attention");
  auto self = level(*attention, "self");
  query = linear(*self, "query", hidden, hidden / parts);
  key = linear(*self, "key", hidden, hidden / parts);
  value = linear(*self, "value", hidden, hidden / parts);
  auto attention_output = level(*attention, "output");
  attention_dense = linear(*attention_output, "dense", hidden / parts, hidden);
  attention_norm = layer_norm(*attention_output, options);
  intermediate = linear(*level(*this, "intermediate"), "dense", hidden, options.intermediate() / parts);
  auto output = level(*this, "output");
  output_dense = linear(*output, "dense", options.intermediate() / parts, hidden);
  output_norm = layer_norm(*output, options);
}

DropoutSite BertLayerImpl::site(const ForwardPass& pass, int64_t number, int64_t shard_offset,
                                int64_t shard_full) const {
  return {dropout_key(pass.dropout_key, static_cast<uint64_t>(1 + 3 * index_ + number)), pass.first_row, shard_offset,
          shard_full};
}

// input · weightᵀ + bias for this rank's output columns; the input's gradient is summed over the
// tensor-parallel ranks (Megatron's f).
torch::Tensor BertLayerImpl::column_parallel(const torch::Tensor& input, const torch::Tensor& weight,
                                             const torch::Tensor& bias) {
  if (!partition_.split()) return dense(input, weight, bias);
  return dense(parallel::copy_to_tensor_parallel(input, *partition_.tensor_group), weight, bias);
}

// The partial products of this rank's input columns summed over the tensor-parallel ranks (Megatron's g), then
// the whole bias once.
torch::Tensor BertLayerImpl::row_parallel(const torch::nn::Linear& layer, const torch::Tensor& input) {
  if (!partition_.split()) return dense_layer(layer, input);
  const torch::Tensor partial = dense(input, layer->weight, torch::zeros_like(layer->bias));
  return parallel::reduce_from_tensor_parallel(partial, *partition_.tensor_group) + layer->bias;
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& hidden, const torch::Tensor& attention_bias,
                                     const ForwardPass& pass) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1), head_width = hidden.size(2) / all_heads_;
  const int64_t width = heads_ * head_width;  // this rank's heads
  // One matrix product for query, key and value: fewer, larger GEMMs are faster than three small ones.
  const torch::Tensor qkv = column_parallel(hidden, torch::cat({query->weight, key->weight, value->weight}),
                                            torch::cat({query->bias, key->bias, value->bias}));
  // [B, S, 3, heads, d] -> three [B*heads, S, d]. unbind rather than three selects: its backward stacks the
  // three gradients once instead of zero-filling and summing three full-size buffers.
  const std::vector<torch::Tensor> split = qkv.view({batch, seq, 3, heads_, head_width}).permute({2, 0, 3, 1, 4}).unbind(0);
  const torch::Tensor q = split[0].reshape({batch * heads_, seq, head_width});
  const torch::Tensor k = split[1].reshape({batch * heads_, seq, head_width});
  const torch::Tensor v = split[2].reshape({batch * heads_, seq, head_width});
  const torch::Tensor bias = attention_bias.expand({batch, heads_, 1, seq}).reshape({batch * heads_, 1, seq});
  torch::Tensor probabilities =
      torch::baddbmm(bias, q, k.transpose(1, 2), 1.0, 1.0 / std::sqrt(static_cast<double>(head_width))).softmax(-1);
  // The mask of this rank's heads within all heads: [B, heads, S, S] viewed with the heads as dim 1.
  probabilities = bert::dropout(probabilities.view({batch, heads_, seq, seq}), dropout_, is_training(),
                                site(pass, 0, partition_.tensor_rank() * heads_, all_heads_))
                      .view({batch * heads_, seq, seq});
  const torch::Tensor context =
      torch::bmm(probabilities, v).view({batch, heads_, seq, head_width}).transpose(1, 2).reshape({batch, seq, width});
  const torch::Tensor attended = attention_norm(
      bert::dropout(row_parallel(attention_dense, context), dropout_, is_training(), site(pass, 1)) + hidden);
  const torch::Tensor expanded = tanh_gelu(column_parallel(attended, intermediate->weight, intermediate->bias));
  return output_norm(bert::dropout(row_parallel(output_dense, expanded), dropout_, is_training(), site(pass, 2)) +
                     attended);
}

BertForPreTrainingImpl::BertForPreTrainingImpl(const BertOptions& options) : options_(options) {
  register_modules();
  reset_parameters();
}

BertForPreTrainingImpl::BertForPreTrainingImpl(const BertOptions& options, const BertPartition& partition)
    : options_(options), partition_(partition) {
  register_modules();
}

void BertForPreTrainingImpl::register_modules() {
  const int64_t parts = partition_.tensor_size();
  const int64_t vocab_rows = (partition_.padded_vocab > 0 ? partition_.padded_vocab : options_.vocab_size()) / parts;
  auto bert = level(*this, "bert");
  auto embeddings = level(*bert, "embeddings");
  // A sparse gradient from the lookup: the tied MLM decoder's dense gradient of the same weight arrives first
  // and the lookup's rows are added into it, instead of a zero-filled vocab x hidden buffer summed with it.
  // A stage without the decoder gets a dense one (the data-parallel exchange and LAMB take dense gradients).
  const bool sparse_lookup = partition_.embeddings && partition_.heads;
  if (partition_.embeddings || partition_.heads)
    word_embeddings = embeddings->register_module(
        "word_embeddings",
        torch::nn::Embedding(torch::nn::EmbeddingOptions(vocab_rows, options_.hidden()).sparse(sparse_lookup)));
  if (partition_.embeddings) {
    position_embeddings = embeddings->register_module(
        "position_embeddings", torch::nn::Embedding(options_.max_positions(), options_.hidden()));
    token_type_embeddings = embeddings->register_module(
        "token_type_embeddings", torch::nn::Embedding(options_.type_vocab_size(), options_.hidden()));
    embeddings_norm = layer_norm(*embeddings, options_);
  }
  auto encoder_layers = level(*level(*bert, "encoder"), "layer");
  for (int64_t i = 0; i < options_.layers(); ++i)
    if (partition_.layers.empty() || std::count(partition_.layers.begin(), partition_.layers.end(), i))
      layers_.emplace(i, encoder_layers->register_module(std::to_string(i), BertLayer(options_, i, partition_)));
  if (!partition_.heads) return;
  pooler = linear(*level(*bert, "pooler"), "dense", options_.hidden(), options_.hidden());
  auto cls = level(*this, "cls");
  auto predictions = level(*cls, "predictions");
  auto transform_level = level(*predictions, "transform");
  transform = linear(*transform_level, "dense", options_.hidden(), options_.hidden());
  transform_norm = layer_norm(*transform_level, options_);
  output_bias = predictions->register_parameter("bias", torch::zeros({vocab_rows}));
  seq_relationship = linear(*cls, "seq_relationship", options_.hidden(), 2);
}

void BertForPreTrainingImpl::reset_parameters(c10::optional<at::Generator> generator) {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    torch::Tensor& parameter = item.value();
    const std::string& name = item.key();
    if (name.find("LayerNorm.weight") != std::string::npos)
      parameter.fill_(1);
    else if (parameter.dim() == 1)
      parameter.zero_();
    else
      truncated_normal_(parameter, options_.initializer_range(), generator);
  }
}

void BertForPreTrainingImpl::take_shards(const BertForPreTrainingImpl& whole) {
  torch::NoGradGuard no_grad;
  const auto sources = whole.named_parameters();
  const int parts = partition_.tensor_size(), rank = partition_.tensor_rank();
  for (auto& item : named_parameters()) {
    torch::Tensor source = sources[item.key()];
    const int64_t dim = tensor_parallel_dim(item.key());
    if (dim == 0 && source.size(0) < item.value().size(0) * parts) {  // Megatron's vocabulary padding: zero rows
      std::vector<int64_t> padding = source.sizes().vec();
      padding[0] = item.value().size(0) * parts - source.size(0);
      source = torch::cat({source, torch::zeros(padding, source.options())});
    }
    if (dim >= 0 && parts > 1) source = source.chunk(parts, dim)[static_cast<size_t>(rank)];
    item.value().copy_(source);
  }
}

torch::Tensor BertForPreTrainingImpl::embed(const torch::Tensor& input_ids, const torch::Tensor& segment_ids,
                                            const ForwardPass& pass) {
  const int64_t seq = input_ids.size(1);
  const torch::Tensor positions = torch::arange(seq, input_ids.options());
  torch::Tensor words;
  if (!partition_.split()) {
    words = word_embeddings(input_ids);
  } else {
    // Megatron's vocab-parallel embedding: each rank looks up the ids in its rows, the rest give zeros, and the
    // ranks' lookups are summed.
    const int64_t rows = word_embeddings->weight.size(0), first = rows * partition_.tensor_rank();
    const torch::Tensor mine = (input_ids >= first).logical_and(input_ids < first + rows);
    const torch::Tensor local = torch::embedding(word_embeddings->weight, (input_ids - first) * mine) *
                                mine.unsqueeze(-1).to(word_embeddings->weight.scalar_type());
    words = parallel::reduce_from_tensor_parallel(local, *partition_.tensor_group);
  }
  const torch::Tensor hidden = words + position_embeddings(positions) + token_type_embeddings(segment_ids);
  return bert::dropout(embeddings_norm(hidden), options_.dropout(), is_training(),
                       {dropout_key(pass.dropout_key, 0), pass.first_row});
}

torch::Tensor BertForPreTrainingImpl::encode(torch::Tensor hidden, const torch::Tensor& input_mask, int64_t first,
                                             int64_t last, const ForwardPass& pass) {
  const int64_t batch = input_mask.size(0), seq = input_mask.size(1);
  // Padding gets -10000 before the softmax, as in the reference (exp underflows to 0 in float32).
  const torch::Tensor attention_bias =
      ((1.0 - input_mask.to(hidden.scalar_type())) * -10000.0).view({batch, 1, 1, seq});
  for (int64_t i = first; i < last; ++i) {
    const auto layer = layers_.find(i);
    if (layer == layers_.end()) fail("bert model", "layer " + std::to_string(i) + " is not held by this rank");
    hidden = layer->second(hidden, attention_bias, pass);
  }
  return hidden;
}

BertOutputs BertForPreTrainingImpl::predict(const torch::Tensor& hidden, const torch::Tensor& masked_positions) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1);
  BertOutputs outputs;
  const torch::Tensor first_token = hidden.select(1, 0);
  outputs.next_sentence_logits = dense_layer(seq_relationship, torch::tanh(dense_layer(pooler, first_token)));
  const torch::Tensor masked = hidden.reshape({batch * seq, options_.hidden()}).index_select(0, masked_positions);
  outputs.masked_lm_features = transform_norm(tanh_gelu(dense_layer(transform, masked)));
  return outputs;
}

BertOutputs BertForPreTrainingImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& segment_ids,
                                            const torch::Tensor& input_mask, const torch::Tensor& masked_positions,
                                            const ForwardPass& pass) {
  const torch::Tensor hidden = encode(embed(input_ids, segment_ids, pass), input_mask, 0, options_.layers(), pass);
  return predict(hidden, masked_positions);
}

torch::Tensor BertForPreTrainingImpl::masked_lm_logits(const torch::Tensor& features) const {
  if (partition_.split()) fail("bert model", "masked_lm_logits of a tensor-parallel model: each rank has a slice");
  return dense(features, word_embeddings->weight, output_bias);
}

torch::Tensor BertForPreTrainingImpl::masked_lm_loss(const torch::Tensor& features, const torch::Tensor& labels) const {
  if (!partition_.split()) return DecoderCrossEntropy::apply(features, word_embeddings->weight, output_bias, labels);
  // Megatron's vocab-parallel loss over this rank's slice of the logits; the padding rows take no part.
  const torch::Tensor local_logits = dense(parallel::copy_to_tensor_parallel(features, *partition_.tensor_group),
                                           word_embeddings->weight, output_bias);
  return parallel::vocab_parallel_cross_entropy(local_logits, labels, *partition_.tensor_group, options_.vocab_size())
      .mean();
}

torch::Tensor BertForPreTrainingImpl::masked_lm_predictions(const torch::Tensor& features) const {
  if (!partition_.split()) return masked_lm_logits(features).argmax(1);
  const torch::Tensor local_logits = dense(features, word_embeddings->weight, output_bias);
  return parallel::vocab_parallel_argmax(local_logits, *partition_.tensor_group, options_.vocab_size());
}

double BertForPreTrainingImpl::forward_macs(int64_t sequences, int64_t seq_length, int64_t predictions) const {
  const double h = static_cast<double>(options_.hidden()), tokens = static_cast<double>(sequences * seq_length);
  const double per_layer = tokens * (4 * h * h + 2 * h * static_cast<double>(options_.intermediate())) +
                           2 * tokens * static_cast<double>(seq_length) * h;  // scores and context
  return static_cast<double>(options_.layers()) * per_layer + static_cast<double>(sequences) * (h * h + 2 * h) +
         static_cast<double>(predictions) * (h * h + h * static_cast<double>(options_.vocab_size()));
}

std::string mlperf_tensor_name(const std::string& parameter_name) {
  std::string name = parameter_name;
  const auto replace = [&name](const std::string& from, const std::string& to) {
    for (size_t at = name.find(from); at != std::string::npos; at = name.find(from, at + to.size())) name.replace(at, from.size(), to);
  };
  const auto ends_with = [&name](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (name == "cls.predictions.bias") return "cls/predictions/output_bias";
  if (name == "cls.seq_relationship.weight") return "cls/seq_relationship/output_weights";
  if (name == "cls.seq_relationship.bias") return "cls/seq_relationship/output_bias";
  replace("encoder.layer.", "encoder/layer_");
  replace(".", "/");
  if (ends_with("LayerNorm/weight")) return name.substr(0, name.size() - 6) + "gamma";
  if (ends_with("LayerNorm/bias")) return name.substr(0, name.size() - 4) + "beta";
  if (ends_with("_embeddings/weight")) return name.substr(0, name.size() - 7);
  if (ends_with("/weight")) return name.substr(0, name.size() - 6) + "kernel";
  return name;
}

bool excluded_from_weight_decay(const std::string& parameter_name) {
  return parameter_name.find("LayerNorm") != std::string::npos ||
         (parameter_name.size() >= 4 && parameter_name.compare(parameter_name.size() - 4, 4, "bias") == 0);
}

std::vector<optim::Parameter> optimizer_parameters(const BertForPreTraining& model) {
  std::vector<optim::Parameter> parameters;
  for (const auto& item : model->named_parameters())
    parameters.push_back({item.value(), !excluded_from_weight_decay(item.key())});
  return parameters;
}

namespace {

constexpr const char* kDecoderBias = "cls.predictions.decoder.bias";

// The names other BERT code saves under, as trainbench's: DDP's "module." prefix and TensorFlow's LayerNorm
// gamma / beta (older converters keep them). Hugging Face's position_ids buffer holds only 0, 1, 2, ... and is
// dropped.
std::map<std::string, torch::Tensor> with_trainbench_names(std::map<std::string, torch::Tensor> file,
                                                           const std::string& path) {
  std::map<std::string, torch::Tensor> tensors;
  for (auto& [stored_name, tensor] : file) {
    std::string name = stored_name.rfind("module.", 0) == 0 ? stored_name.substr(7) : stored_name;
    for (const auto& [tensorflow, torch_name] :
         {std::pair{"LayerNorm.gamma", "LayerNorm.weight"}, std::pair{"LayerNorm.beta", "LayerNorm.bias"}})
      if (const size_t at = name.find(tensorflow); at != std::string::npos)
        name.replace(at, std::strlen(tensorflow), torch_name);
    if (name == "bert.embeddings.position_ids") continue;
    if (!tensors.emplace(name, std::move(tensor)).second) fail(path, "holds " + name + " under two names");
  }
  return tensors;
}

}  // namespace

void load_checkpoint(BertForPreTraining& model, const std::string& path) {
  // A {"model": ...} is unwrapped by the reader.
  std::map<std::string, torch::Tensor> tensors = with_trainbench_names(read_state_dict_file(path), path);
  // NVIDIA's layout: the vocabulary rows past vocab_size, up to the next multiple of 8, are padding.
  const int64_t vocab = model->options().vocab_size(), padded = padded_vocab_size(vocab);
  for (const char* name : {kWordEmbeddings, kDecoderWeight, kOutputBias, kDecoderBias}) {
    const auto found = tensors.find(name);
    if (found != tensors.end() && found->second.dim() >= 1 && found->second.size(0) == padded && padded != vocab)
      found->second = found->second.narrow(0, 0, vocab);
  }
  if (const auto decoder = tensors.find(kDecoderWeight); decoder != tensors.end()) {
    const auto embeddings = tensors.find(kWordEmbeddings);
    if (embeddings == tensors.end() || !torch::equal(decoder->second, embeddings->second))
      fail(path, std::string(kDecoderWeight) + " differs from " + kWordEmbeddings + ": trainbench ties the decoder to the word embeddings");
    tensors.erase(decoder);
  }
  if (const auto decoder_bias = tensors.find(kDecoderBias); decoder_bias != tensors.end()) {
    const auto bias = tensors.find(kOutputBias);
    if (bias == tensors.end() || !torch::equal(decoder_bias->second, bias->second))
      fail(path, std::string(kDecoderBias) + " differs from " + kOutputBias + ", the one output bias trainbench has");
    tensors.erase(decoder_bias);
  }
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const auto found = tensors.find(item.key());
    if (found == tensors.end()) fail(path, "has no tensor '" + item.key() + "'");
    if (found->second.sizes() != item.value().sizes())
      fail(path + ": " + item.key(), "shape " + c10::str(found->second.sizes()) + " does not match the model's " +
                                         c10::str(item.value().sizes()));
    item.value().copy_(found->second);
    tensors.erase(found);
  }
  if (!tensors.empty()) {
    std::string extra;
    for (const auto& entry : tensors) extra += (extra.empty() ? "" : ", ") + entry.first;
    fail(path, "has tensors the model does not: " + extra.substr(0, 400));
  }
}

void save_official_checkpoint(const BertForPreTraining& model, const std::string& path) {
  const int64_t vocab = model->options().vocab_size(), padding = padded_vocab_size(vocab) - vocab;
  const auto padded = [&](const torch::Tensor& rows) {
    std::vector<int64_t> shape = rows.sizes().vec();
    shape[0] = padding;
    return torch::cat({rows.detach(), torch::zeros(shape, rows.options())});
  };
  StateDict state;
  for (const auto& item : model->named_parameters()) {
    const bool vocabulary_rows = item.key() == kWordEmbeddings || item.key() == kOutputBias;
    state.push_back({item.key(), vocabulary_rows ? padded(item.value()) : item.value()});
    if (item.key() == kWordEmbeddings) state.push_back({kDecoderWeight, state.back().tensor});
  }
  save_state_dict(state, path);
}

}  // namespace trainbench::bert
