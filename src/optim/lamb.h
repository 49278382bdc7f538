#pragma once
// LAMB as the MLPerf BERT submissions run it (apex.optimizers.FusedLAMB, one of the two implementations the
// v1.1 rules allow): gradients clipped by their global norm (max_grad_norm), Adam moments with bias
// correction, decoupled weight decay added to the update, and the layer-wise trust ratio
// ||w|| / ||update|| for the parameters that decay (apex's default use_nvlamb=false leaves biases and
// LayerNorm, which the BERT reference does not decay, at ratio 1). BERT and RNN-T train with it.
//
// For float32 on the CPU the whole step is one fused, vectorised loop per tensor (three passes over memory in
// all instead of the ten-odd of an op-by-op version), parallel over elements; for other types or devices, or
// when fused is off, it is the same arithmetic in tensor ops.
#include <vector>

#include <torch/torch.h>

#include "optim/parameters.h"

namespace trainbench::optim {

struct LambOptions {
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, epsilon) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0.01;
  TORCH_ARG(double, max_grad_norm) = 1.0;
  TORCH_ARG(bool, fused) = true;
};

class Lamb {
 public:
  Lamb(const std::vector<Parameter>& parameters, const LambOptions& options);
  // For a model split over ranks: the global gradient norm and the sharded tensors' trust-ratio norms are
  // summed over the ranks as `reduction` says, so that every split takes the one-rank step.
  void span_ranks(NormReduction reduction) { reduction_ = std::move(reduction); }
  void step(double learning_rate);
  // The global gradient norm before clipping, from the last step.
  double last_gradient_norm() const { return last_gradient_norm_; }

 private:
  struct Slot {
    torch::Tensor parameter, exp_avg, exp_avg_sq;
    bool decay, sharded, counted;
  };
  bool can_fuse() const;
  // Squared norms summed over the ranks holding shards (a no-op for a model on one rank).
  void sum_over_model(std::vector<double>& squares) const;
  void sum_over_tensor_shards(std::vector<double>& squares, const std::vector<bool>& sharded) const;
  void fused_step(double learning_rate);
  void tensor_step(double learning_rate);

  LambOptions options_;
  NormReduction reduction_;
  std::vector<Slot> slots_;
  int64_t steps_ = 0;
  double last_gradient_norm_ = 0;
};


}  // namespace trainbench::optim
