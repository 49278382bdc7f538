#include "parallel/transformer_cost.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace trainbench::parallel {

namespace {

// One decoder layer's parameters on a tensor rank: query-key-value and the first MLP matrix split by columns
// (weights and biases), the attention output and the second MLP matrix by rows (their biases whole), two
// LayerNorms whole.
double parameters_per_layer(const TransformerShape& shape, double t) {
  const double h = static_cast<double>(shape.hidden), ffn = static_cast<double>(shape.ffn_hidden);
  return (3 * h * h + 3 * h) / t + (h * h / t + h) + (ffn * h + ffn) / t + (h * ffn / t + h) + 4 * h;
}

double stage_parameters(const TransformerShape& shape, const ParallelPlan& plan, int stage, double vocab) {
  const double t = plan.tensor, h = static_cast<double>(shape.hidden);
  const bool first = stage == 0, last = stage == plan.pipeline - 1;
  double parameters = static_cast<double>(shape.layers / plan.pipeline) * parameters_per_layer(shape, t);
  if (first) parameters += vocab / t * h + static_cast<double>(shape.max_positions) * h;
  if (last) parameters += 2 * h + (first ? 0 : vocab / t * h);       // the final LayerNorm and the tied copy
  if (last && shape.lm_head_transform) parameters += h * h + 3 * h;  // the head's dense layer and LayerNorm, whole
  return parameters;
}

// Layer activations in flight on `stage` at the schedule's peak, in whole stages' worth of layers: every
// micro-batch under GPipe; 1F1B's warm-up and one more; interleaved, Megatron's warm-up count
// (p - stage - 1)·2 + (v - 1)·p chunks and one more (schedules.py), in chunks of layers/v.
double stages_held(const ParallelPlan& plan, int stage, double micro_batches) {
  const double v = plan.virtual_stages, p = plan.pipeline;
  double held_chunks = micro_batches * v;
  if (plan.schedule == PipelineSchedule::kOneForwardOneBackward) held_chunks = std::min(micro_batches, p - stage);
  if (plan.schedule == PipelineSchedule::kInterleaved)
    held_chunks = std::min(micro_batches * v, (p - stage - 1) * 2 + (v - 1) * p + 1);
  return held_chunks / v;
}

}  // namespace

int64_t padded_vocab_size(int64_t vocab, int64_t divisible_by, int tensor_parallel) {
  if (vocab < 1 || divisible_by < 1 || tensor_parallel < 1)
    fail("padded_vocab_size", "vocabulary " + std::to_string(vocab) + ", multiple " + std::to_string(divisible_by) +
                                  " and tensor-parallel size " + std::to_string(tensor_parallel) + " must be positive");
  const int64_t multiple = divisible_by * tensor_parallel;
  return (vocab + multiple - 1) / multiple * multiple;
}

double pipeline_bubble_fraction(int stages, int micro_batches, int chunks) {
  return static_cast<double>(stages - 1) / (static_cast<double>(chunks) * micro_batches);
}

StepFlops step_flops(const TransformerShape& shape, double global_batch, int64_t padded_vocab,
                     bool recompute_attention) {
  const double b = global_batch, s = static_cast<double>(shape.seq_length);
  const double l = static_cast<double>(shape.layers), h = static_cast<double>(shape.hidden);
  const double positions = shape.lm_head_positions > 0 ? static_cast<double>(shape.lm_head_positions) : s;
  // The head's columns, counted as the logits' share of the model's FLOPs counts V.
  const double head = positions / s * (static_cast<double>(padded_vocab) + (shape.lm_head_transform ? h : 0));
  StepFlops flops;
  flops.model = 72 * b * s * l * h * h * (1 + s / (6 * h) + head / (12 * l * h));
  flops.computed = flops.model + (recompute_attention ? 4 * b * s * s * h * l : 0);
  flops.full_recompute = 96 * b * s * l * h * h * (1 + s / (6 * h) + head / (16 * l * h));
  return flops;
}

StageFootprint stage_footprint(const TransformerShape& shape, const ParallelPlan& plan, int stage,
                               const FootprintOptions& options) {
  const double t = plan.tensor, d = plan.data, h = static_cast<double>(shape.hidden);
  const double vocab =
      static_cast<double>(padded_vocab_size(shape.vocab_size, shape.make_vocab_size_divisible_by, plan.tensor));
  const bool first = stage == 0, last = stage == plan.pipeline - 1;
  const double parameters = stage_parameters(shape, plan, stage, vocab);
  StageFootprint result;
  result.parameters = static_cast<int64_t>(parameters);
  result.parameter_bytes = options.weight_element_bytes * parameters;
  result.gradient_bytes = 4 * parameters;
  result.optimizer_bytes = (options.master_weights ? 12 : 8) * parameters / (options.distributed_optimizer ? d : 1);

  const double layers = static_cast<double>(shape.layers / plan.pipeline);
  const double m = static_cast<double>(options.micro_batches), e = options.activation_element_bytes;
  const double b = static_cast<double>(options.micro_batch_size), s = static_cast<double>(shape.seq_length);
  const double a = static_cast<double>(shape.heads);
  const double attention_scores = options.recompute_attention ? 0 : 5 * a * s / (h * t);
  const double per_layer = (plan.sequence_parallel ? 34 / t : 10 + 24 / t) + attention_scores;
  result.activation_bytes = stages_held(plan, stage, m) * layers * s * b * h * per_layer * e / 2;

  const double activation = s * b * h * e;
  result.activation_message_bytes = activation;
  if (plan.tensor > 1)
    result.tensor_bytes = m * (layers * 4 * activation + (first ? activation : 0) + (last ? activation : 0));
  // Each chunk receives its input and sends its output, but for the first virtual stage's input and the last's
  // output.
  const double boundaries = 2.0 * plan.virtual_stages - (first ? 1 : 0) - (last ? 1 : 0);
  result.pipeline_bytes = m * boundaries * activation / (plan.sequence_parallel ? t : 1);
  if (plan.data > 1) result.data_bytes = result.gradient_bytes;
  if (plan.pipeline > 1 && (first || last)) result.embedding_bytes = 4 * vocab / t * h;
  return result;
}

}  // namespace trainbench::parallel
