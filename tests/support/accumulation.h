#pragma once
// Gradient accumulation checks shared by the benchmarks' tests: one update of a benchmark's own training
// step with K micro-batches must leave the gradients one full batch leaves.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "harness/config.h"
#include "workloads/training_loop.h"

namespace trainbench::testing {

// The two settings the training loop reads, as a preset holds them.
inline Config step_config(int64_t accumulation_steps, const std::string& precision = "fp32") {
  return Config("test/step", {{"gradient_accumulation_steps", accumulation_steps}, {"precision", precision}});
}

// The gradients one update of `make_step()` leaves with `accumulation_steps` micro-batches, copied before
// the step's own update could use them (the update is not applied).
inline std::vector<torch::Tensor> update_gradients(const std::vector<torch::Tensor>& parameters, int64_t accumulation_steps,
                                                   const std::function<TrainingStep()>& make_step) {
  const Config config = step_config(accumulation_steps);
  TrainingLoop loop(config, torch::kCPU, parameters, nullptr);
  std::vector<torch::Tensor> gradients;
  TrainingStep step = make_step();
  step.update = [&] {
    for (const auto& parameter : parameters)
      gradients.push_back(parameter.grad().defined() ? parameter.grad().clone() : torch::zeros_like(parameter));
  };
  loop.update(step);
  return gradients;
}

// Every parameter's gradient with `accumulation_steps` micro-batches equals the full batch's to `relative`
// (of the full batch's gradient norm); `names` label the failures. The full batch must give some gradient.
inline void expect_accumulation_matches_full_batch(const std::vector<std::string>& names,
                                                   const std::vector<torch::Tensor>& parameters,
                                                   const std::function<TrainingStep()>& make_step,
                                                   int64_t accumulation_steps = 4, double relative = 1e-5) {
  const auto full = update_gradients(parameters, 1, make_step);
  const auto accumulated = update_gradients(parameters, accumulation_steps, make_step);
  ASSERT_EQ(full.size(), accumulated.size());
  double total_norm = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    const double norm = full[i].norm().item<double>();
    total_norm += norm;
    const double difference = (accumulated[i] - full[i]).norm().item<double>();
    EXPECT_LE(difference, relative * norm + 1e-12) << names[i] << ": |full| " << norm;
  }
  EXPECT_GT(total_norm, 0) << "the full batch gave no gradient";
}

// The same for all of `module`'s parameters, named as the module names them.
inline void expect_accumulation_matches_full_batch(const torch::nn::Module& module,
                                                   const std::function<TrainingStep()>& make_step,
                                                   int64_t accumulation_steps = 4, double relative = 1e-5) {
  std::vector<std::string> names;
  std::vector<torch::Tensor> parameters;
  for (const auto& item : module.named_parameters()) {
    names.push_back(item.key());
    parameters.push_back(item.value());
  }
  expect_accumulation_matches_full_batch(names, parameters, make_step, accumulation_steps, relative);
}

}  // namespace trainbench::testing
