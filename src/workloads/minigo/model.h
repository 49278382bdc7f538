#pragma once
// MiniGo's dual network as the v1.1 reference builds it (minigo dual_net.py with architecture.flags):
// conv3x3 `filters` (no bias) -> BN -> ReLU, then `trunk_blocks` residual blocks (conv3x3, BN, ReLU, conv3x3,
// BN, skip add, ReLU); policy head conv1x1 -> 2, BN without gamma/beta, ReLU, dense -> size^2 + 1 logits;
// value head conv1x1 -> 1, BN without gamma/beta, ReLU, dense -> fc_width, ReLU, dense -> 1, tanh. BN
// momentum 0.95 (TF's convention: running = 0.95 running + 0.05 batch) and epsilon 1e-5. Kernels are
// Glorot-uniform and biases zero, TF's layer defaults. Input: the 13 mlperf07 planes, NCHW.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "workloads/training_loop.h"

namespace trainbench::minigo {

constexpr int64_t kMlperf07Planes = 13;

struct MinigoNetOptions {
  TORCH_ARG(int64_t, board_size) = 19;
  TORCH_ARG(int64_t, filters) = 64;
  TORCH_ARG(int64_t, trunk_blocks) = 6;
  TORCH_ARG(int64_t, fc_width) = 64;
  // Feature planes of the input: 13, the mlperf07 features trainbench plays with; 17 (agz) only for networks
  // read from minigo's own files (model_file.h), which evaluate() then takes in that layout.
  TORCH_ARG(int64_t, input_planes) = kMlperf07Planes;
  // dual_net.py asks for 1e-5; TensorFlow's fused batch norm raises any epsilon below 1.001e-5 to that, so
  // minigo's frozen graphs hold 1.001e-5. A network read from one takes the file's value.
  TORCH_ARG(double, batch_norm_epsilon) = 1e-5;
};

struct MinigoOutput {
  torch::Tensor policy_logits;  // (batch, size^2 + 1)
  torch::Tensor value;          // (batch), tanh, from Black's side
};

class MinigoNetImpl : public torch::nn::Module {
 public:
  explicit MinigoNetImpl(MinigoNetOptions options);
  MinigoOutput forward(const torch::Tensor& planes);

  // Plays the network for MCTS: uint8 planes in, move probabilities and values out. Needs eval mode (BN on
  // its running statistics, nothing written), so several self-play threads may call it at once. Each BN is
  // folded into the conv before it (see FoldedConvs), so the outputs match forward()'s to float rounding.
  void evaluate(const uint8_t* features, int batch, float* policy, float* values);

  // The tensors the L2 term covers: every trainable variable whose TF name has neither "bias" nor "beta"
  // (kernels and BN gammas).
  std::vector<torch::Tensor> l2_parameters() const;
  // The 48 weights_initialization names of the v1.1 rules (TF layer names; global_step last).
  std::vector<std::string> initialized_tensor_names() const;
  // Multiply-accumulates of one position's forward pass.
  int64_t forward_macs() const;

  const MinigoNetOptions& options() const { return options_; }

 private:
  // In eval mode a BN is a per-channel affine map of its conv's output, so the pair is one conv with its
  // weight scaled per output channel and a bias: one pass over the activations less per layer, which
  // python3-torch's eval() does not do. Trunk convs in order, then the policy and value heads' convs; the
  // weights channels-last, as evaluate() runs the convs.
  struct FoldedConv {
    torch::Tensor weight, bias;
  };
  using FoldedConvs = std::vector<FoldedConv>;
  // The folded convs of the current weights and BN statistics: built again when a parameter or buffer has
  // changed since (a new version from an in-place update such as an optimizer step, or new storage from a load).
  std::shared_ptr<const FoldedConvs> folded_convs();

  MinigoNetOptions options_;
  std::mutex fold_mutex_;
  std::shared_ptr<const FoldedConvs> folded_;
  std::vector<std::pair<const void*, int64_t>> folded_from_;  // every parameter's and buffer's data and version
  torch::nn::Conv2d initial_conv_{nullptr};
  torch::nn::BatchNorm2d initial_bn_{nullptr};
  std::vector<torch::nn::Conv2d> block_convs_;
  std::vector<torch::nn::BatchNorm2d> block_bns_;
  torch::nn::Conv2d policy_conv_{nullptr}, value_conv_{nullptr};
  torch::nn::BatchNorm2d policy_bn_{nullptr}, value_bn_{nullptr};
  torch::nn::Linear policy_fc_{nullptr}, value_fc1_{nullptr}, value_fc2_{nullptr};
};
TORCH_MODULE(MinigoNet);

// TF's piecewise_constant on the global step: rates[0] while step <= boundaries[0], rates[1] while step <=
// boundaries[1], ..., the last rate after the last boundary.
struct PiecewiseLr {
  std::vector<double> rates;
  std::vector<int64_t> boundaries;
  double at(int64_t step) const;
};

struct MinigoLoss {
  torch::Tensor total, policy, value, l2;
};

// Softmax cross-entropy against the search's visit distribution + value_weight * MSE(value, outcome) +
// l2_strength * sum(w^2) / 2 over l2_parameters(), each term a batch mean as dual_net.py computes it.
MinigoLoss minigo_loss(MinigoNet& net, const torch::Tensor& planes, const torch::Tensor& pi, const torch::Tensor& outcome,
                       double value_weight, double l2_strength);

// One update for the shared training loop: minigo_loss per micro-batch (its L2 term, weighted by each
// micro-batch's share, adds up to one L2 term), then the optimizer's update at `learning_rate` (momentum SGD
// as TF's MomentumOptimizer).
TrainingStep training_step(MinigoNet net, torch::optim::SGD& optimizer, double learning_rate, torch::Tensor planes,
                           torch::Tensor pi, torch::Tensor outcome, double value_weight, double l2_strength);

}  // namespace trainbench::minigo
