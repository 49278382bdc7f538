#include "workloads/minigo/model.h"

#include <cstring>

#include "go/board.h"

namespace trainbench::minigo {

static_assert(go::Position::kPlanes == kMlperf07Planes, "the default input is what go::Position encodes");

namespace {

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel) {
  auto layer = torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).padding(kernel / 2).bias(false));
  torch::nn::init::xavier_uniform_(layer->weight);
  return layer;
}

// TF momentum 0.95 keeps 95% of the running statistics per step; PyTorch's momentum is the other 5%.
torch::nn::BatchNorm2d batch_norm(int64_t channels, bool affine, double epsilon) {
  return torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(channels).momentum(0.05).eps(epsilon).affine(affine));
}

torch::nn::Linear dense(int64_t in, int64_t out) {
  auto layer = torch::nn::Linear(in, out);
  torch::nn::init::xavier_uniform_(layer->weight);
  torch::nn::init::zeros_(layer->bias);
  return layer;
}

}  // namespace

MinigoNetImpl::MinigoNetImpl(MinigoNetOptions options) : options_(options) {
  const int64_t filters = options.filters(), points = options.board_size() * options.board_size();
  initial_conv_ = register_module("initial_conv", conv(options.input_planes(), filters, 3));
  initial_bn_ = register_module("initial_bn", batch_norm(filters, true, options.batch_norm_epsilon()));
  for (int64_t block = 1; block <= options.trunk_blocks(); ++block)
    for (int64_t layer = 1; layer <= 2; ++layer) {
      const std::string name = "block" + std::to_string(block) + "_" + std::to_string(layer);
      block_convs_.push_back(register_module(name + "_conv", conv(filters, filters, 3)));
      block_bns_.push_back(register_module(name + "_bn", batch_norm(filters, true, options.batch_norm_epsilon())));
    }
  policy_conv_ = register_module("policy_conv", conv(filters, 2, 1));
  policy_bn_ = register_module("policy_bn", batch_norm(2, false, options.batch_norm_epsilon()));
  policy_fc_ = register_module("policy_fc", dense(2 * points, points + 1));
  value_conv_ = register_module("value_conv", conv(filters, 1, 1));
  value_bn_ = register_module("value_bn", batch_norm(1, false, options.batch_norm_epsilon()));
  value_fc1_ = register_module("value_fc1", dense(points, options.fc_width()));
  value_fc2_ = register_module("value_fc2", dense(options.fc_width(), 1));
}

MinigoOutput MinigoNetImpl::forward(const torch::Tensor& planes) {
  auto x = torch::relu(initial_bn_(initial_conv_(planes)));
  for (size_t i = 0; i < block_convs_.size(); i += 2) {
    auto y = torch::relu(block_bns_[i](block_convs_[i](x)));
    y = block_bns_[i + 1](block_convs_[i + 1](y));
    x = torch::relu(x + y);
  }
  const auto policy = torch::relu(policy_bn_(policy_conv_(x))).flatten(1);
  const auto value = torch::relu(value_bn_(value_conv_(x))).flatten(1);
  return {policy_fc_(policy), torch::tanh(value_fc2_(torch::relu(value_fc1_(value)))).squeeze(1)};
}

namespace {

// conv -> eval-mode BN as one conv: weight w * s and bias beta - mean * s per output channel, s = gamma /
// sqrt(var + eps) (gamma 1 and beta 0 for a BN without them), computed in double and rounded once.
std::pair<torch::Tensor, torch::Tensor> fold_batch_norm(const torch::nn::Conv2d& conv, const torch::nn::BatchNorm2d& norm) {
  auto scale = torch::rsqrt(norm->running_var.to(torch::kFloat64) + norm->options.eps());
  auto shift = -norm->running_mean.to(torch::kFloat64) * scale;
  if (norm->options.affine()) {
    scale = scale * norm->weight.to(torch::kFloat64);
    shift = shift * norm->weight.to(torch::kFloat64) + norm->bias.to(torch::kFloat64);
  }
  const auto type = conv->weight.scalar_type();
  const auto weight = conv->weight.to(torch::kFloat64) * scale.view({-1, 1, 1, 1});
  return {weight.to(type).contiguous(torch::MemoryFormat::ChannelsLast), shift.to(type)};
}

}  // namespace

std::shared_ptr<const MinigoNetImpl::FoldedConvs> MinigoNetImpl::folded_convs() {
  std::vector<std::pair<const void*, int64_t>> sources;
  for (const auto& tensor : parameters()) sources.emplace_back(tensor.data_ptr(), tensor._version());
  for (const auto& tensor : buffers()) sources.emplace_back(tensor.data_ptr(), tensor._version());
  const std::lock_guard<std::mutex> lock(fold_mutex_);
  if (folded_ && sources == folded_from_) return folded_;
  auto convs = std::make_shared<FoldedConvs>();
  const auto add = [&](const torch::nn::Conv2d& conv, const torch::nn::BatchNorm2d& norm) {
    auto [weight, bias] = fold_batch_norm(conv, norm);
    convs->push_back({std::move(weight), std::move(bias)});
  };
  add(initial_conv_, initial_bn_);
  for (size_t i = 0; i < block_convs_.size(); ++i) add(block_convs_[i], block_bns_[i]);
  add(policy_conv_, policy_bn_);
  add(value_conv_, value_bn_);
  folded_ = std::move(convs);
  folded_from_ = std::move(sources);
  return folded_;
}

void MinigoNetImpl::evaluate(const uint8_t* features, int batch, float* policy, float* values) {
  TORCH_CHECK(!is_training(), "MinigoNet::evaluate needs eval mode (it may run on several threads at once)");
  c10::InferenceMode inference;
  const int64_t size = options_.board_size(), points = size * size;
  const auto device = initial_conv_->weight.device();
  const auto planes = torch::from_blob(const_cast<uint8_t*>(features), {batch, options_.input_planes(), size, size}, torch::kUInt8)
                          .to(device, torch::kFloat32, false, false, torch::MemoryFormat::ChannelsLast);
  const auto folded = folded_convs();
  const auto conv = [&](const torch::Tensor& x, size_t index, int64_t padding) {
    return torch::conv2d(x, (*folded)[index].weight, (*folded)[index].bias, 1, padding);
  };
  // forward() with the folded convs, channels-last (NHWC: oneDNN's convs then need no reorder of their input
  // and output per call); the in-place ReLUs and add reuse buffers this call owns. Flattening a head's
  // output copies it back to NCHW order, which the dense layers' weights expect.
  const size_t trunk = block_convs_.size();
  auto x = conv(planes, 0, 1).relu_();
  for (size_t i = 1; i <= trunk; i += 2) x = conv(conv(x, i, 1).relu_(), i + 1, 1).add_(x).relu_();
  const auto policy_features = conv(x, trunk + 1, 0).relu_().flatten(1);
  const auto value_features = conv(x, trunk + 2, 0).relu_().flatten(1);
  const auto logits = policy_fc_(policy_features);
  const auto value = torch::tanh(value_fc2_(torch::relu(value_fc1_(value_features)))).squeeze(1).to(torch::kCPU).contiguous();
  const auto probabilities = torch::softmax(logits, 1).to(torch::kCPU).contiguous();
  std::memcpy(policy, probabilities.data_ptr<float>(), sizeof(float) * static_cast<size_t>(batch * (points + 1)));
  std::memcpy(values, value.data_ptr<float>(), sizeof(float) * static_cast<size_t>(batch));
}

std::vector<torch::Tensor> MinigoNetImpl::l2_parameters() const {
  std::vector<torch::Tensor> weights = {initial_conv_->weight, initial_bn_->weight};
  for (size_t i = 0; i < block_convs_.size(); ++i) {
    weights.push_back(block_convs_[i]->weight);
    weights.push_back(block_bns_[i]->weight);
  }
  for (const auto* layer : {&policy_conv_, &value_conv_}) weights.push_back((*layer)->weight);
  for (const auto* layer : {&policy_fc_, &value_fc1_, &value_fc2_}) weights.push_back((*layer)->weight);
  return weights;
}

// TF numbers layers in creation order: the trunk's convs and BNs first, then the policy head (conv2d_13,
// dense), then the value head (conv2d_14, dense_1, dense_2). The heads' BNs have no variables.
std::vector<std::string> MinigoNetImpl::initialized_tensor_names() const {
  const auto suffix = [](int64_t index) { return index == 0 ? std::string() : "_" + std::to_string(index); };
  std::vector<std::string> names;
  const int64_t trunk_convs = 1 + 2 * options_.trunk_blocks();
  for (int64_t i = 0; i < trunk_convs; ++i) {
    names.push_back("conv2d" + suffix(i) + "/kernel");
    names.push_back("batch_normalization" + suffix(i) + "/gamma");
    names.push_back("batch_normalization" + suffix(i) + "/beta");
  }
  names.push_back("conv2d" + suffix(trunk_convs) + "/kernel");
  names.push_back("dense/kernel");
  names.push_back("dense/bias");
  names.push_back("conv2d" + suffix(trunk_convs + 1) + "/kernel");
  for (const int64_t i : {1, 2}) {
    names.push_back("dense" + suffix(i) + "/kernel");
    names.push_back("dense" + suffix(i) + "/bias");
  }
  names.push_back("global_step");
  return names;
}

int64_t MinigoNetImpl::forward_macs() const {
  const int64_t points = options_.board_size() * options_.board_size(), filters = options_.filters();
  const int64_t trunk = points * 9 * filters * (options_.input_planes() + 2 * options_.trunk_blocks() * filters);
  const int64_t heads = points * filters * 3 + 2 * points * (points + 1) + points * options_.fc_width() + options_.fc_width();
  return trunk + heads;
}

double PiecewiseLr::at(int64_t step) const {
  size_t index = 0;
  while (index < boundaries.size() && step > boundaries[index]) ++index;
  return rates[std::min(index, rates.size() - 1)];
}

MinigoLoss minigo_loss(MinigoNet& net, const torch::Tensor& planes, const torch::Tensor& pi, const torch::Tensor& outcome,
                       double value_weight, double l2_strength) {
  const MinigoOutput out = net->forward(planes);
  MinigoLoss loss;
  loss.policy = -(pi * torch::log_softmax(out.policy_logits, 1)).sum(1).mean();
  loss.value = value_weight * (out.value - outcome).pow(2).mean();
  torch::Tensor squares = torch::zeros({}, planes.options());
  for (const auto& weight : net->l2_parameters()) squares = squares + weight.pow(2).sum();
  loss.l2 = l2_strength * 0.5 * squares;
  loss.total = loss.policy + loss.value + loss.l2;
  return loss;
}

TrainingStep training_step(MinigoNet net, torch::optim::SGD& optimizer, double learning_rate, torch::Tensor planes,
                           torch::Tensor pi, torch::Tensor outcome, double value_weight, double l2_strength) {
  TrainingStep step;
  step.samples = planes.size(0);
  step.loss = [=](const BatchSlice& slice) mutable {
    return minigo_loss(net, slice.of(planes), slice.of(pi), slice.of(outcome), value_weight, l2_strength).total;
  };
  step.update = [&optimizer, learning_rate] {
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(learning_rate);
    optimizer.step();
  };
  return step;
}

}  // namespace trainbench::minigo
