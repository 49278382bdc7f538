#pragma once
// Gradient clipping by the global norm, as Megatron-LM's clip_grad_norm_fp32 does it for the GPT-3 reference:
// the L2 norm over every gradient, each element counted once however the model is split over ranks, and every
// gradient scaled by max_norm / (norm + 1e-6) when that is below 1.
#include <functional>
#include <vector>

#include "optim/parameters.h"

namespace trainbench::optim {

// Scales the gradients of `parameters` in place and returns their global norm before clipping. Parameters
// without a gradient are skipped; those not counted_in_global_norm are scaled but not counted (their elements
// are counted on another rank). `over_model` sums the squared norm over the ranks holding the model (null: this
// rank holds it all).
double clip_gradient_norm(const std::vector<Parameter>& parameters, double max_norm,
                          const std::function<void(std::vector<double>&)>& over_model = nullptr);

}  // namespace trainbench::optim
