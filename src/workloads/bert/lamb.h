#pragma once
// LAMB as the MLPerf BERT submissions run it (apex.optimizers.FusedLAMB, one of the two implementations the
// v1.1 rules allow): gradients clipped by their global norm (max_grad_norm), Adam moments with bias
// correction, decoupled weight decay added to the update, and the layer-wise trust ratio
// ||w|| / ||update|| for the parameters that decay (apex's default use_nvlamb=false leaves biases and
// LayerNorm, which the reference does not decay, at ratio 1).
//
// For float32 on the CPU the whole step is one fused, vectorised loop per tensor (three passes over memory in
// all instead of the ten-odd of an op-by-op version), parallel over elements; for other types or devices, or
// when fused is off, it is the same arithmetic in tensor ops.
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace trainbench::bert {

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
  // `parameters`: (name, tensor); names decide weight-decay exclusion (excluded_from_weight_decay).
  Lamb(const std::vector<std::pair<std::string, torch::Tensor>>& parameters, const LambOptions& options);
  // Every parameter decays (and takes the trust ratio): apex FusedLAMB with one parameter group, as the RNN-T
  // reference builds it.
  Lamb(const std::vector<torch::Tensor>& parameters, const LambOptions& options);
  void step(double learning_rate);
  // The global gradient norm before clipping, from the last step.
  double last_gradient_norm() const { return last_gradient_norm_; }

 private:
  struct Slot {
    torch::Tensor parameter, exp_avg, exp_avg_sq;
    bool decay;
  };
  bool can_fuse() const;
  void fused_step(double learning_rate);
  void tensor_step(double learning_rate);

  LambOptions options_;
  std::vector<Slot> slots_;
  int64_t steps_ = 0;
  double last_gradient_norm_ = 0;
};

// The reference's learning rate (TF run_pretraining / NVIDIA PolyWarmUpScheduler): linear warmup from 0
// over warmup_steps counted from start_warmup_step, otherwise polynomial decay to 0 over total_steps
// counted from step 0.
struct BertLrSchedule {
  double base_lr = 0;
  int64_t warmup_steps = 0;
  int64_t start_warmup_step = 0;
  int64_t total_steps = 1;
  double power = 1;

  double at(int64_t step) const;
};

}  // namespace trainbench::bert
