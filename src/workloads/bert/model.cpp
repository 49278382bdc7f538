#include "workloads/bert/model.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>

#include "util/error.h"
#include "workloads/checkpoint.h"
#include "workloads/bert/dense.h"

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
void truncated_normal_(torch::Tensor& tensor, double std) {
  const double low = 0.5 * std::erfc(2.0 / std::sqrt(2.0));  // Phi(-2)
  tensor.uniform_(2 * low - 1, 1 - 2 * low).erfinv_().mul_(std * std::sqrt(2.0));
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

torch::Tensor dropout(const torch::Tensor& input, double p, bool training) {
  if (!training || p == 0 || !input.device().is_cpu() || input.scalar_type() != torch::kFloat) return torch::dropout(input, p, training);
  const auto key = static_cast<uint64_t>(torch::randint(std::numeric_limits<int64_t>::max(), {1}, torch::kLong).item<int64_t>());
  const auto key_low = static_cast<uint32_t>(key), key_high = static_cast<uint32_t>(key >> 32);
  // Keep an element when its 24-bit uniform is at least p; p's threshold in those units, rounded up.
  const auto threshold = static_cast<uint32_t>(std::min(std::ceil(p * 16777216.0), 16777216.0));
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  torch::Tensor mask = torch::empty(input.sizes(), input.options().memory_format(torch::MemoryFormat::Contiguous));
  float* values = mask.data_ptr<float>();
  at::parallel_for(0, mask.numel(), 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t bits = mix32(mix32(static_cast<uint32_t>(i) ^ key_low) + (static_cast<uint32_t>(i >> 32) ^ key_high));
      values[i] = (bits >> 8) >= threshold ? scale : 0.0f;
    }
  });
  return input * mask;
}

BertLayerImpl::BertLayerImpl(const BertOptions& options) : heads_(options.heads()), dropout_(options.dropout()) {
  if (options.hidden() % options.heads() != 0)
    fail("bert model", "hidden " + std::to_string(options.hidden()) + " is not divisible by heads " + std::to_string(options.heads()));
  const int64_t hidden = options.hidden();
  auto attention = level(*this, "attention");
  auto self = level(*attention, "self");
  query = linear(*self, "query", hidden, hidden);
  key = linear(*self, "key", hidden, hidden);
  value = linear(*self, "value", hidden, hidden);
  auto attention_output = level(*attention, "output");
  attention_dense = linear(*attention_output, "dense", hidden, hidden);
  attention_norm = layer_norm(*attention_output, options);
  intermediate = linear(*level(*this, "intermediate"), "dense", hidden, options.intermediate());
  auto output = level(*this, "output");
  output_dense = linear(*output, "dense", options.intermediate(), hidden);
  output_norm = layer_norm(*output, options);
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& hidden, const torch::Tensor& attention_bias) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1), width = hidden.size(2), head_width = width / heads_;
  // One matrix product for query, key and value: fewer, larger GEMMs are faster than three small ones.
  const torch::Tensor qkv =
      dense(hidden, torch::cat({query->weight, key->weight, value->weight}), torch::cat({query->bias, key->bias, value->bias}));
  // [B, S, 3, heads, d] -> three [B*heads, S, d]. unbind rather than three selects: its backward stacks the
  // three gradients once instead of zero-filling and summing three full-size buffers.
  const std::vector<torch::Tensor> split = qkv.view({batch, seq, 3, heads_, head_width}).permute({2, 0, 3, 1, 4}).unbind(0);
  const torch::Tensor q = split[0].reshape({batch * heads_, seq, head_width});
  const torch::Tensor k = split[1].reshape({batch * heads_, seq, head_width});
  const torch::Tensor v = split[2].reshape({batch * heads_, seq, head_width});
  const torch::Tensor bias = attention_bias.expand({batch, heads_, 1, seq}).reshape({batch * heads_, 1, seq});
  torch::Tensor probabilities =
      torch::baddbmm(bias, q, k.transpose(1, 2), 1.0, 1.0 / std::sqrt(static_cast<double>(head_width))).softmax(-1);
  probabilities = bert::dropout(probabilities, dropout_, is_training());
  const torch::Tensor context =
      torch::bmm(probabilities, v).view({batch, heads_, seq, head_width}).transpose(1, 2).reshape({batch, seq, width});
  const torch::Tensor attended =
      attention_norm(bert::dropout(dense_layer(attention_dense, context), dropout_, is_training()) + hidden);
  const torch::Tensor expanded = tanh_gelu(dense_layer(intermediate, attended));
  return output_norm(bert::dropout(dense_layer(output_dense, expanded), dropout_, is_training()) + attended);
}

BertForPreTrainingImpl::BertForPreTrainingImpl(const BertOptions& options) : options_(options) {
  auto bert = level(*this, "bert");
  auto embeddings = level(*bert, "embeddings");
  // A sparse gradient from the lookup: the tied MLM decoder's dense gradient of the same weight arrives first
  // and the lookup's rows are added into it, instead of a zero-filled vocab x hidden buffer summed with it.
  word_embeddings = embeddings->register_module(
      "word_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(options.vocab_size(), options.hidden()).sparse(true)));
  position_embeddings =
      embeddings->register_module("position_embeddings", torch::nn::Embedding(options.max_positions(), options.hidden()));
  token_type_embeddings =
      embeddings->register_module("token_type_embeddings", torch::nn::Embedding(options.type_vocab_size(), options.hidden()));
  embeddings_norm = layer_norm(*embeddings, options);
  auto encoder_layers = level(*level(*bert, "encoder"), "layer");
  for (int64_t i = 0; i < options.layers(); ++i)
    layers_.push_back(encoder_layers->register_module(std::to_string(i), BertLayer(options)));
  pooler = linear(*level(*bert, "pooler"), "dense", options.hidden(), options.hidden());
  auto cls = level(*this, "cls");
  auto predictions = level(*cls, "predictions");
  auto transform_level = level(*predictions, "transform");
  transform = linear(*transform_level, "dense", options.hidden(), options.hidden());
  transform_norm = layer_norm(*transform_level, options);
  output_bias = predictions->register_parameter("bias", torch::zeros({options.vocab_size()}));
  seq_relationship = linear(*cls, "seq_relationship", options.hidden(), 2);
  reset_parameters();
}

void BertForPreTrainingImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    torch::Tensor& parameter = item.value();
    const std::string& name = item.key();
    if (name.find("LayerNorm.weight") != std::string::npos)
      parameter.fill_(1);
    else if (parameter.dim() == 1)
      parameter.zero_();
    else
      truncated_normal_(parameter, options_.initializer_range());
  }
}

BertOutputs BertForPreTrainingImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& segment_ids,
                                            const torch::Tensor& input_mask, const torch::Tensor& masked_positions) {
  const int64_t batch = input_ids.size(0), seq = input_ids.size(1);
  const torch::Tensor positions = torch::arange(seq, input_ids.options());
  torch::Tensor hidden = word_embeddings(input_ids) + position_embeddings(positions) + token_type_embeddings(segment_ids);
  hidden = bert::dropout(embeddings_norm(hidden), options_.dropout(), is_training());
  // Padding gets -10000 before the softmax, as in the reference (exp underflows to 0 in float32).
  const torch::Tensor attention_bias =
      ((1.0 - input_mask.to(hidden.scalar_type())) * -10000.0).view({batch, 1, 1, seq});
  for (auto& layer : layers_) hidden = layer(hidden, attention_bias);

  BertOutputs outputs;
  const torch::Tensor first_token = hidden.select(1, 0);
  outputs.next_sentence_logits = dense_layer(seq_relationship, torch::tanh(dense_layer(pooler, first_token)));
  const torch::Tensor masked = hidden.reshape({batch * seq, options_.hidden()}).index_select(0, masked_positions);
  outputs.masked_lm_features = transform_norm(tanh_gelu(dense_layer(transform, masked)));
  return outputs;
}

torch::Tensor BertForPreTrainingImpl::masked_lm_logits(const torch::Tensor& features) const {
  return dense(features, word_embeddings->weight, output_bias);
}

torch::Tensor BertForPreTrainingImpl::masked_lm_loss(const torch::Tensor& features, const torch::Tensor& labels) const {
  return DecoderCrossEntropy::apply(features, word_embeddings->weight, output_bias, labels);
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

void load_checkpoint(BertForPreTraining& model, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the BERT checkpoint");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue loaded;
  try {
    loaded = torch::pickle_load(bytes);
  } catch (const c10::Error& error) {
    fail(path, std::string("is not a torch.save'd dict of tensors: ") + error.what_without_backtrace());
  }
  if (loaded.isGenericDict() && loaded.toGenericDict().size() == 1 && loaded.toGenericDict().contains("model"))
    loaded = loaded.toGenericDict().at("model");  // {"model": state_dict}, as NVIDIA's converter saves it
  if (!loaded.isGenericDict()) fail(path, "expected a dict {parameter name: tensor} (see docs/bert-checkpoint.md)");
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& entry : loaded.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor())
      fail(path, "expected a dict of string names to tensors (see docs/bert-checkpoint.md)");
    tensors[entry.key().toStringRef()] = entry.value().toTensor();
  }
  // NVIDIA's layout: the vocabulary rows past vocab_size, up to the next multiple of 8, are padding.
  const int64_t vocab = model->options().vocab_size(), padded = padded_vocab_size(vocab);
  for (const char* name : {kWordEmbeddings, kDecoderWeight, kOutputBias}) {
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
