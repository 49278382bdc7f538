// The dry plan of a GPT-3 layout (trainer.h's footprint): what each rank holds and moves, counted from the
// settings, for layouts far beyond this machine (the reference's 175B at tp 8 x pp 8).
#include <algorithm>
#include <cstdio>
#include <ostream>

#include "parallel/pipeline.h"
#include "parallel/tensor_parallel.h"
#include "util/error.h"
#include "workloads/gpt3/trainer.h"
#include "workloads/model_parallel.h"

namespace trainbench::gpt3 {

namespace {

double parameters_per_layer(const Settings& preset, double t) {
  const double h = static_cast<double>(preset.hidden), ffn = static_cast<double>(preset.ffn_hidden);
  return (3 * h * h + 3 * h) / t + (h * h / t + h) + (ffn * h + ffn) / t + (h * ffn / t + h) + 4 * h;
}

std::string gibibytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

StepFlops step_flops(const Settings& preset, int64_t padded_vocab) {
  const double b = static_cast<double>(preset.batch_size), s = static_cast<double>(preset.seq_length);
  const double l = static_cast<double>(preset.layers), h = static_cast<double>(preset.hidden);
  const double v = static_cast<double>(padded_vocab);
  StepFlops flops;
  flops.model = 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
  flops.computed = flops.model + (preset.recompute_activations ? 4 * b * s * s * h * l : 0);
  flops.full_recompute = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  return flops;
}

GptFootprint footprint(const Settings& preset, const parallel::ParallelPlan& plan, int stage, int64_t micro_batches,
                       int activation_element_bytes) {
  const double t = plan.tensor, h = static_cast<double>(preset.hidden);
  const double vocab = static_cast<double>(
      parallel::padded_vocab_size(preset.vocab_size, preset.make_vocab_size_divisible_by, plan.tensor));
  const double layers = static_cast<double>(preset.layers / plan.pipeline);
  const bool first = stage == 0, last = stage == plan.pipeline - 1;
  double parameters = layers * parameters_per_layer(preset, t);
  if (first) parameters += vocab / t * h + static_cast<double>(preset.max_positions) * h;
  if (last) parameters += 2 * h + (first ? 0 : vocab / t * h);
  GptFootprint result;
  result.parameters = static_cast<int64_t>(parameters);
  result.parameter_bytes = result.gradient_bytes = 4 * parameters;
  result.optimizer_bytes = 8 * parameters;
  const double m = static_cast<double>(micro_batches), e = activation_element_bytes;
  const double b = static_cast<double>(preset.batch_size / plan.data / micro_batches);
  const double s = static_cast<double>(preset.seq_length), a = static_cast<double>(preset.heads);
  // Layer activations in flight on this stage at the schedule's peak, in micro-batch chunks of layers/v layers:
  // every micro-batch under GPipe; 1F1B's warm-up and one more; interleaved, Megatron's warm-up count
  // (p - stage - 1)·2 + (v - 1)·p chunks and one more (schedules.py).
  const double v = plan.virtual_stages, p = plan.pipeline;
  double held_chunks = m * v;
  if (plan.schedule == parallel::PipelineSchedule::kOneForwardOneBackward) held_chunks = std::min(m, p - stage);
  if (plan.schedule == parallel::PipelineSchedule::kInterleaved)
    held_chunks = std::min(m * v, (p - stage - 1) * 2 + (v - 1) * p + 1);
  const double held = held_chunks / v;  // in whole stages' worth of layers
  const double attention_scores = preset.recompute_activations ? 0 : 5 * a * s / (h * t);
  result.activation_bytes = held * layers * s * b * h * (10 + 24 / t + attention_scores) * e / 2;
  const double activation = s * b * h * e;
  if (plan.tensor > 1)
    result.tensor_bytes = m * (layers * 4 * activation + (first ? activation : 0) + (last ? activation : 0));
  // Each chunk receives its input and sends its output, but for the first virtual stage's input and the last's
  // output.
  const double boundaries = 2 * v - (first ? 1 : 0) - (last ? 1 : 0);
  result.pipeline_bytes = m * boundaries * activation;
  if (plan.data > 1) result.data_bytes = result.gradient_bytes;
  if (plan.pipeline > 1 && (first || last)) result.embedding_bytes = 4 * vocab / t * h;
  return result;
}

void print_plan(const Config& config, int ranks, std::ostream& out) {
  const Settings preset = read_settings<Settings>(config);
  const parallel::ParallelPlan plan = plan_for(config, preset, ranks);
  const int64_t micro_batches = plan_micro_batches(config, preset.batch_size, plan);
  const int element_bytes = config.string("precision") == "fp32" ? 4 : 2;
  const int64_t vocab =
      parallel::padded_vocab_size(preset.vocab_size, preset.make_vocab_size_divisible_by, plan.tensor);
  const StepFlops flops = step_flops(preset, vocab);
  out << plan.describe() << " over " << ranks << " ranks, " << micro_batches << " micro-batch(es) of "
      << preset.batch_size / plan.data / micro_batches << " sequences of " << preset.seq_length
      << " per step, vocabulary padded to " << vocab << (preset.recompute_activations ? ", activations recomputed" : "")
      << "; per rank (data-parallel replicas alike):\n";
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    const GptFootprint f = footprint(preset, plan, stage, micro_batches, element_bytes);
    out << "  stage " << stage << " (each of its " << plan.tensor << " tensor-parallel rank(s)): " << f.parameters
        << " parameters: weights " << gibibytes(f.parameter_bytes) << ", gradients " << gibibytes(f.gradient_bytes)
        << ", Adam state " << gibibytes(f.optimizer_bytes) << ", activations ~" << gibibytes(f.activation_bytes)
        << ", total ~" << gibibytes(f.parameter_bytes + f.gradient_bytes + f.optimizer_bytes + f.activation_bytes)
        << "; per step sends tp " << gibibytes(f.tensor_bytes) << ", pp " << gibibytes(f.pipeline_bytes) << ", dp "
        << gibibytes(f.data_bytes) << ", tied embeddings " << gibibytes(f.embedding_bytes) << "\n";
  }
  char line[320];
  std::snprintf(
      line, sizeof line,
      "  FLOPs per step: model %.4g, computed %.4g (%.4g per rank%s); with whole layers recomputed %.4g\n"
      "  pipeline bubble (p-1)/(v*m) = %.4f\n",
      flops.model, flops.computed, flops.computed / ranks,
      preset.recompute_activations ? ", the core attention recomputed" : "", flops.full_recompute,
      parallel::pipeline_bubble_fraction(plan.pipeline, static_cast<int>(micro_batches), plan.virtual_stages));
  out << line;
}

}  // namespace trainbench::gpt3
