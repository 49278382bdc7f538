#include "workloads/resnet/model.h"

namespace trainbench::resnet {

namespace {

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

torch::nn::BatchNorm2d batch_norm(int64_t channels) {
  // MLPerf ResNet uses momentum 0.9 in TF terms, i.e. 0.1 in PyTorch terms, and epsilon 1e-5.
  return torch::nn::BatchNorm2d(torch::nn::BatchNormOptions(channels).momentum(0.1).eps(1e-5));
}

int64_t conv_output_size(int64_t size, int64_t kernel, int64_t stride) {
  return (size + 2 * (kernel / 2) - kernel) / stride + 1;
}

}  // namespace

BottleneckImpl::BottleneckImpl(const BottleneckOptions& o) {
  const int64_t out_channels = o.width() * o.expansion();
  conv1 = register_module("conv1", conv(o.in_channels(), o.width(), 1, 1));
  bn1 = register_module("bn1", batch_norm(o.width()));
  conv2 = register_module("conv2", conv(o.width(), o.width(), 3, o.stride()));
  bn2 = register_module("bn2", batch_norm(o.width()));
  conv3 = register_module("conv3", conv(o.width(), out_channels, 1, 1));
  bn3 = register_module("bn3", batch_norm(out_channels));
  if (o.stride() != 1 || o.in_channels() != out_channels) {
    downsample = register_module(
        "downsample", torch::nn::Sequential(conv(o.in_channels(), out_channels, 1, o.stride()), batch_norm(out_channels)));
  }
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& input) {
  auto out = torch::relu(bn1(conv1(input)));
  out = torch::relu(bn2(conv2(out)));
  out = bn3(conv3(out));
  out += downsample ? downsample->forward(input) : input;
  return torch::relu(out);
}

ResNetImpl::ResNetImpl(const ResNetOptions& options) : options_(options) {
  const auto& o = options_;
  TORCH_CHECK(o.blocks_per_stage().size() == o.stage_widths().size() && !o.stage_widths().empty(),
              "ResNet needs one block count per stage width");
  conv1 = register_module("conv1", conv(3, o.stem_width(), o.stem_kernel(), o.stem_stride()));
  bn1 = register_module("bn1", batch_norm(o.stem_width()));
  int64_t channels = o.stem_width();
  for (size_t stage = 0; stage < o.stage_widths().size(); ++stage) {
    torch::nn::Sequential blocks;
    for (int64_t block = 0; block < o.blocks_per_stage()[stage]; ++block) {
      const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
      blocks->push_back(Bottleneck(BottleneckOptions(channels, o.stage_widths()[stage], stride, o.expansion())));
      channels = o.stage_widths()[stage] * o.expansion();
    }
    stages_.push_back(register_module("layer" + std::to_string(stage + 1), blocks));
  }
  fc = register_module("fc", torch::nn::Linear(channels, o.num_classes()));

  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* convolution = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(convolution->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* norm = module->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(norm->weight);
      torch::nn::init::zeros_(norm->bias);
    }
  }
  if (o.zero_init_residual()) {
    for (auto& stage : stages_)
      for (const auto& block : stage->children()) torch::nn::init::zeros_(block->as<BottleneckImpl>()->bn3->weight);
  }
}

torch::Tensor ResNetImpl::forward(torch::Tensor input) {
  auto out = torch::relu(bn1(conv1(input)));
  if (options_.stem_max_pool()) out = torch::max_pool2d(out, 3, 2, 1);
  for (auto& stage : stages_) out = stage->forward(out);
  out = torch::adaptive_avg_pool2d(out, {1, 1}).flatten(1);
  return fc(out);
}

int64_t ResNetImpl::forward_macs(int64_t image_size) const {
  const auto& o = options_;
  int64_t size = conv_output_size(image_size, o.stem_kernel(), o.stem_stride());
  int64_t macs = size * size * o.stem_kernel() * o.stem_kernel() * 3 * o.stem_width();
  if (o.stem_max_pool()) size = conv_output_size(size, 3, 2);
  int64_t channels = o.stem_width();
  for (size_t stage = 0; stage < o.stage_widths().size(); ++stage) {
    const int64_t width = o.stage_widths()[stage], out_channels = width * o.expansion();
    for (int64_t block = 0; block < o.blocks_per_stage()[stage]; ++block) {
      const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
      const int64_t out_size = conv_output_size(size, 3, stride);
      macs += size * size * channels * width;                 // conv1 1x1
      macs += out_size * out_size * 9 * width * width;        // conv2 3x3
      macs += out_size * out_size * width * out_channels;     // conv3 1x1
      if (stride != 1 || channels != out_channels) macs += out_size * out_size * channels * out_channels;
      size = out_size;
      channels = out_channels;
    }
  }
  return macs + channels * o.num_classes();
}

std::string mlperf_tensor_name(const std::string& parameter_name) {
  std::vector<std::string> parts;
  for (size_t start = 0, dot; start <= parameter_name.size(); start = dot + 1) {
    dot = parameter_name.find('.', start);
    if (dot == std::string::npos) dot = parameter_name.size();
    parts.push_back(parameter_name.substr(start, dot - start));
  }
  const std::string& kind = parts.back();  // weight or bias
  const auto bn_suffix = [&] { return kind == "weight" ? "_gamma" : "_beta"; };
  if (parts.size() == 2 && parts[0] == "conv1") return "conv0_weight";
  if (parts.size() == 2 && parts[0] == "bn1") return std::string("bn0") + bn_suffix();
  if (parts.size() == 2 && parts[0] == "fc") return "fc1_" + kind;
  if (parts.size() >= 4 && parts[0].rfind("layer", 0) == 0) {
    const std::string unit = "stage" + parts[0].substr(5) + "_unit" + std::to_string(std::stoi(parts[1]) + 1) + "_";
    if (parts[2] == "downsample") return unit + (parts[3] == "0" ? "conv1sc_weight" : std::string("bnsc") + bn_suffix());
    if (parts[2].rfind("conv", 0) == 0) return unit + parts[2] + "_weight";
    if (parts[2].rfind("bn", 0) == 0) return unit + parts[2] + bn_suffix();
  }
  return parameter_name;  // not a ResNet parameter; keep its own name
}

bool is_bn_or_bias(const torch::Tensor& parameter) {
  // In ResNet every 1-D parameter is a BatchNorm scale or shift or a bias; weights are 2-D or 4-D.
  return parameter.dim() <= 1;
}

std::vector<optim::Parameter> optimizer_parameters(const ResNet& model) {
  std::vector<optim::Parameter> parameters;
  for (const auto& parameter : model->parameters()) parameters.push_back({parameter, !is_bn_or_bias(parameter)});
  return parameters;
}

// One update: forward and loss (cross entropy with the preset's label smoothing) per micro-batch, then the
// LARS (or SGD) update at `learning_rate`.
TrainingStep training_step(ResNet model, Lars& optimizer, torch::Tensor images, torch::Tensor labels,
                           double label_smoothing, double learning_rate) {
  TrainingStep step;
  step.samples = images.size(0);
  step.loss = [=](const BatchSlice& slice) mutable {
    return torch::nn::functional::cross_entropy(
        model->forward(slice.of(images)), slice.of(labels),
        torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
  };
  step.update = [&optimizer, learning_rate] { optimizer.step(learning_rate); };
  return step;
}

}  // namespace trainbench::resnet
