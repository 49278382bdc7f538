// The dry plan of a GPT-3 layout (trainer.h's footprint): what each rank holds and moves, counted from the
// settings, for layouts far beyond this machine (the reference's 175B at tp 8 x pp 8).
#include <cstdio>
#include <ostream>

#include "parallel/transformer_cost.h"
#include "workloads/gpt3/trainer.h"
#include "workloads/model_parallel.h"

namespace trainbench::gpt3 {

namespace {

std::string gibibytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

parallel::TransformerShape transformer_shape(const Settings& preset) {
  parallel::TransformerShape shape;
  shape.layers = preset.layers;
  shape.hidden = preset.hidden;
  shape.heads = preset.heads;
  shape.ffn_hidden = preset.ffn_hidden;
  shape.seq_length = preset.seq_length;
  shape.vocab_size = preset.vocab_size;
  shape.make_vocab_size_divisible_by = preset.make_vocab_size_divisible_by;
  shape.max_positions = preset.max_positions;
  return shape;
}

StepFlops step_flops(const Settings& preset, int64_t padded_vocab) {
  return parallel::step_flops(transformer_shape(preset), static_cast<double>(preset.batch_size), padded_vocab,
                              preset.recompute_activations);
}

GptFootprint footprint(const Settings& preset, const parallel::ParallelPlan& plan, int stage, int64_t micro_batches,
                       int activation_element_bytes) {
  parallel::FootprintOptions options;
  options.micro_batches = micro_batches;
  options.micro_batch_size = preset.batch_size / plan.data / micro_batches;
  options.activation_element_bytes = activation_element_bytes;
  options.recompute_attention = preset.recompute_activations;
  return parallel::stage_footprint(transformer_shape(preset), plan, stage, options);
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
