#pragma once
// ResNet v1.5 (the MLPerf image-classification model): bottleneck blocks with the stride on the 3x3
// convolution. ResNetOptions{} is ResNet-50; the mini preset shrinks widths, depths and the stem on the same
// code. Submodule names follow torchvision (conv1, bn1, layer1..4, fc) so weights map one to one.
#include <torch/torch.h>

#include "optim/lars.h"
#include "workloads/training_loop.h"

namespace trainbench::resnet {

using optim::Lars;
using optim::LarsOptions;

struct ResNetOptions {
  TORCH_ARG(std::vector<int64_t>, blocks_per_stage) = std::vector<int64_t>{3, 4, 6, 3};
  TORCH_ARG(std::vector<int64_t>, stage_widths) = std::vector<int64_t>{64, 128, 256, 512};
  TORCH_ARG(int64_t, stem_width) = 64;
  TORCH_ARG(int64_t, stem_kernel) = 7;
  TORCH_ARG(int64_t, stem_stride) = 2;
  TORCH_ARG(bool, stem_max_pool) = true;
  TORCH_ARG(int64_t, expansion) = 4;
  TORCH_ARG(int64_t, num_classes) = 1000;
  // Start each residual branch as identity (last BN gamma = 0), as the MLPerf submissions do.
  TORCH_ARG(bool, zero_init_residual) = true;
};

struct BottleneckOptions {
  BottleneckOptions(int64_t in_channels, int64_t width, int64_t stride, int64_t expansion)
      : in_channels_(in_channels), width_(width), stride_(stride), expansion_(expansion) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, width);
  TORCH_ARG(int64_t, stride);
  TORCH_ARG(int64_t, expansion);
};

class BottleneckImpl : public torch::nn::Module {
 public:
  explicit BottleneckImpl(const BottleneckOptions& options);
  torch::Tensor forward(const torch::Tensor& input);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};  // projection shortcut when shape changes
};
TORCH_MODULE(Bottleneck);

class ResNetImpl : public torch::nn::Module {
 public:
  explicit ResNetImpl(const ResNetOptions& options = {});
  torch::Tensor forward(torch::Tensor input);

  // Multiply-accumulates of one forward pass at the given square input size (convolutions and fc).
  int64_t forward_macs(int64_t image_size) const;

  const ResNetOptions& options() const { return options_; }

 private:
  ResNetOptions options_;
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  std::vector<torch::nn::Sequential> stages_;
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet);

// The MLPerf reference name of a parameter (the weights_initialization tensor names of the v1.1 rules, from
// the MXNet reference): conv1.weight -> conv0_weight, layer2.0.bn3.weight -> stage2_unit1_bn3_gamma,
// layer1.0.downsample.0.weight -> stage1_unit1_conv1sc_weight, fc.bias -> fc1_bias.
std::string mlperf_tensor_name(const std::string& parameter_name);

// Parameters that are excluded from weight decay and layer adaptation (BatchNorm and biases), as in the
// MLPerf reference LARS.
bool is_bn_or_bias(const torch::Tensor& parameter);
// The model's parameters for LARS, each flagged by is_bn_or_bias.
std::vector<optim::Parameter> optimizer_parameters(const ResNet& model);

// One update for the shared training loop: forward and cross entropy (with label smoothing) per
// micro-batch, then the LARS (or SGD) update at `learning_rate`.
TrainingStep training_step(ResNet model, Lars& optimizer, torch::Tensor images, torch::Tensor labels,
                           double label_smoothing, double learning_rate);

}  // namespace trainbench::resnet
