#include "workloads/bert/model_parallel.h"

#include <cstdio>
#include <string>

#include "parallel/pipeline.h"

#include "parallel/tensor_parallel.h"
#include "util/error.h"
#include "workloads/model_parallel.h"

namespace trainbench::bert {

namespace {

constexpr const char* kTiedEmbeddings = "bert.embeddings.word_embeddings.weight";
constexpr int kGatherTagBase = 1 << 20;  // apart from the pipeline schedule's tags

// The pipeline stage that holds `name` (its first holder, for the tied embeddings).
int holding_stage(const std::string& name, int64_t layers, const parallel::ParallelPlan& plan) {
  const std::string layer_prefix = "bert.encoder.layer.";
  if (name.rfind(layer_prefix, 0) == 0) {
    const int64_t layer = std::stoll(name.substr(layer_prefix.size()));
    const int64_t per_chunk = layers / (plan.pipeline * plan.virtual_stages);
    return static_cast<int>((layer / per_chunk) % plan.pipeline);
  }
  return name.rfind("bert.embeddings.", 0) == 0 ? 0 : plan.pipeline - 1;
}

}  // namespace

parallel::ParallelPlan plan_for(const Config& config, const Settings& preset, int world) {
  const parallel::ParallelPlan plan =
      model_parallel_plan(config,
                          {preset.tensor_parallel, preset.pipeline_parallel, preset.virtual_pipeline_stages,
                           preset.layers, preset.pipeline_schedule},
                          world);
  require_divisible(preset.heads, plan.tensor, config.name() + ": heads", "tensor_parallel");
  require_divisible(preset.intermediate, plan.tensor, config.name() + ": intermediate", "tensor_parallel");
  return plan;
}

BertPartition partition_for(const Settings& preset, const parallel::ParallelContext& context) {
  const parallel::ParallelPlan& plan = context.plan;
  BertPartition partition;
  if (plan.tensor > 1) {
    partition.tensor_group = context.tensor_group;
    partition.padded_vocab =
        parallel::padded_vocab_size(preset.vocab_size, preset.make_vocab_size_divisible_by, plan.tensor);
  }
  const int stage = context.coordinates().pipeline;
  partition.layers = stage_layers(preset.layers, plan, stage);
  partition.embeddings = stage == 0;
  partition.heads = stage == plan.pipeline - 1;
  return partition;
}

std::vector<optim::Parameter> optimizer_parameters(const BertForPreTraining& model,
                                                   const parallel::ParallelContext& context) {
  const BertPartition& partition = model->partition();
  std::vector<optim::Parameter> parameters;
  for (const auto& item : model->named_parameters()) {
    optim::Parameter parameter{item.value(), !excluded_from_weight_decay(item.key())};
    parameter.sharded = partition.split() && tensor_parallel_dim(item.key()) >= 0;
    // A replicated tensor counts on the first tensor-parallel rank; the last stage's copy of the tied
    // embeddings counts on the first stage.
    const bool tied_copy = item.key() == kTiedEmbeddings && !partition.embeddings;
    parameter.counted_in_global_norm = (parameter.sharded || partition.tensor_rank() == 0) && !tied_copy;
    parameters.push_back(parameter);
  }
  return parameters;
}

void sum_tied_embedding_gradients(const BertForPreTraining& model, const parallel::ParallelContext& context) {
  if (!context.embedding_group || context.embedding_group->world() == 1) return;
  torch::Tensor gradient = model->named_parameters()[kTiedEmbeddings].mutable_grad();
  if (!gradient.defined()) fail("bert pipeline", "the tied word embeddings have no gradient on this stage");
  context.embedding_group->allreduce_sum(gradient).wait();
}

BertForPreTraining gather_whole_model(const BertForPreTraining& part, const BertOptions& options,
                                      const parallel::ParallelContext& context) {
  BertForPreTraining whole{nullptr};
  if (context.rank() == 0) whole = BertForPreTraining(options, BertPartition{});  // a holder: filled below
  if (context.coordinates().data != 0) return whole;  // data-parallel replicas hold the same model
  const parallel::ParallelPlan& plan = context.plan;
  parallel::Communicator& tensor = context.tensor_parallel();
  const BertPartition& partition = part->partition();
  // The whole tensor of one of this rank's parameters: its tensor-parallel shards joined, the padding dropped.
  const auto joined = [&](const std::string& name, const torch::Tensor& local) {
    const int64_t dim = tensor_parallel_dim(name);
    torch::Tensor full = dim >= 0 && partition.split() ? parallel::gather_shards(local.detach().cpu(), dim, tensor)
                                                       : local.detach().cpu();
    if (dim == 0 && full.size(0) > options.vocab_size() && (name == kTiedEmbeddings || name == "cls.predictions.bias"))
      full = full.narrow(0, 0, options.vocab_size());
    return full.contiguous();
  };
  // Each stage's first tensor-parallel rank sends its parameters to rank 0 in its registration order, which
  // is the whole model's order restricted to the stage; rank 0 takes them in the whole model's order.
  std::vector<parallel::PendingCollective> sends;
  std::vector<torch::Tensor> in_flight;
  int sent = 0;
  if (context.rank() != 0) {
    for (const auto& item : part->named_parameters()) {
      if (item.key() == kTiedEmbeddings && !partition.embeddings) continue;  // the first stage's is sent
      torch::Tensor full = joined(item.key(), item.value());
      if (partition.tensor_rank() != 0) continue;
      in_flight.push_back(full);
      sends.push_back(context.world->send(in_flight.back(), 0, kGatherTagBase + sent++));
    }
    for (auto& send : sends) send.wait();
    return whole;
  }
  const auto mine = part->named_parameters();
  std::vector<int> received(static_cast<size_t>(plan.pipeline), 0);
  torch::NoGradGuard no_grad;
  for (auto& item : whole->named_parameters()) {
    const int stage = holding_stage(item.key(), options.layers(), plan);
    if (stage == 0) {
      item.value().copy_(joined(item.key(), mine[item.key()]));
      continue;
    }
    const int source = parallel::world_rank_of(plan, {0, 0, stage});
    torch::Tensor buffer = torch::empty_like(item.value());
    context.world->receive(buffer, source, kGatherTagBase + received[static_cast<size_t>(stage)]++).wait();
    item.value().copy_(buffer);
  }
  return whole;
}

std::pair<int64_t, int64_t> masked_lm_counts(BertForPreTraining& model, const PretrainingBatch& batch,
                                             const parallel::ParallelContext& context) {
  torch::NoGradGuard no_grad;
  const parallel::ParallelPlan& plan = context.plan;
  const int stage = context.coordinates().pipeline, stages = plan.pipeline;
  const int last_virtual_stage = stages * plan.virtual_stages - 1;
  parallel::Communicator& pipeline = context.pipeline_parallel();
  const BertOptions& options = model->options();
  std::vector<parallel::PendingCollective> sends;
  std::vector<torch::Tensor> in_flight;
  std::pair<int64_t, int64_t> counts{0, 0};
  for (int chunk = 0; chunk < plan.virtual_stages; ++chunk) {
    const int virtual_stage = chunk * stages + stage;
    torch::Tensor hidden;
    if (virtual_stage == 0) {
      hidden = model->embed(batch.input_ids, batch.segment_ids, {});
    } else {
      hidden = torch::empty({batch.input_ids.size(0), batch.input_ids.size(1), options.hidden()},
                            torch::TensorOptions().dtype(torch::kFloat).device(batch.input_ids.device()));
      pipeline.receive(hidden, (stage + stages - 1) % stages, kGatherTagBase + virtual_stage).wait();
    }
    const auto [first, last] = chunk_layers(options.layers(), plan, stage, chunk);
    hidden = model->encode(hidden, batch.input_mask, first, last, {});
    if (virtual_stage == last_virtual_stage) {
      const torch::Tensor predicted =
          model->masked_lm_predictions(model->predict(hidden, batch.masked_positions).masked_lm_features);
      if (model->partition().tensor_rank() == 0)
        counts = {predicted.eq(batch.masked_lm_ids).sum().item<int64_t>(), batch.masked_lm_ids.size(0)};
    } else {
      in_flight.push_back(hidden.contiguous());
      sends.push_back(pipeline.send(in_flight.back(), (stage + 1) % stages, kGatherTagBase + virtual_stage + 1));
    }
  }
  for (auto& send : sends) send.wait();
  return counts;
}

RankFootprint footprint(const Settings& preset, const parallel::ParallelPlan& plan, int stage, int64_t micro_batches,
                        int activation_element_bytes) {
  const auto t = static_cast<double>(plan.tensor), h = static_cast<double>(preset.hidden);
  const double vocab = static_cast<double>(
      plan.tensor > 1 ? parallel::padded_vocab_size(preset.vocab_size, preset.make_vocab_size_divisible_by, plan.tensor)
                      : preset.vocab_size);
  const double intermediate = static_cast<double>(preset.intermediate);
  const double layers = static_cast<double>(preset.layers / plan.pipeline);
  const double per_layer = 3 * (h * h / t + h / t) + (h * h / t + h) + 2 * h +
                           (intermediate / t * h + intermediate / t) + (h * intermediate / t + h) + 2 * h;
  const bool first = stage == 0, last = stage == plan.pipeline - 1;
  double parameters = layers * per_layer;
  if (first) parameters += vocab / t * h + static_cast<double>(preset.max_positions) * h + 2 * h + 2 * h;
  if (last) parameters += 2 * (h * h + h) + 2 * h + vocab / t + 2 * h + 2 + (first ? 0 : vocab / t * h);
  RankFootprint result;
  result.parameters = static_cast<int64_t>(parameters);
  result.parameter_bytes = result.gradient_bytes = 4 * parameters;  // fp32 weights and gradients
  result.optimizer_bytes = 8 * parameters;                          // LAMB's two fp32 moments
  const double b = static_cast<double>(preset.batch_size / plan.data / micro_batches),
               s = static_cast<double>(preset.seq_length);
  const double a = static_cast<double>(preset.heads), tokens = b * s, m = static_cast<double>(micro_batches);
  // Micro-batches whose activations a stage holds at once: all of them under GPipe, the warm-up's under 1F1B.
  const double held =
      plan.schedule == parallel::PipelineSchedule::kGpipe ? m : std::min(m, static_cast<double>(plan.pipeline - stage));
  const double scale = activation_element_bytes / 2.0;  // the count is for 2-byte activations
  result.activation_bytes = held * layers * tokens * h * (10 + 24 / t + 5 * a * s / (h * t)) * scale;
  const double activation = tokens * h * activation_element_bytes;
  if (plan.tensor > 1)
    result.tensor_bytes =
        m * (layers * 4 * activation + (first ? activation : 0) +
             (last ? b * static_cast<double>(preset.max_predictions) * h * activation_element_bytes : 0));
  const double boundaries = (first ? 0 : 1) + (last ? 0 : 1);  // this stage receives from one side, sends to the other
  result.pipeline_bytes = m * boundaries * activation * plan.virtual_stages;
  if (plan.data > 1) result.data_bytes = result.bucket_bytes = result.gradient_bytes;
  if (plan.pipeline > 1 && (first || last)) result.embedding_bytes = 4 * vocab / t * h;
  return result;
}

namespace {

std::string mebibytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

}  // namespace

void print_plan(const Config& config, int ranks, std::ostream& out) {
  const Settings preset = read_settings<Settings>(config);
  const parallel::ParallelPlan plan = plan_for(config, preset, ranks);
  const int64_t micro_batches = plan_micro_batches(config, preset.batch_size, plan);
  const int element_bytes = config.string("precision") == "fp32" ? 4 : 2;
  out << plan.describe() << " over " << ranks << " ranks, " << micro_batches << " micro-batch(es) of "
      << preset.batch_size / plan.data / micro_batches
      << " sequences per step; per rank (data-parallel replicas alike):\n";
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    const RankFootprint f = footprint(preset, plan, stage, micro_batches, element_bytes);
    out << "  stage " << stage << " (each of its " << plan.tensor << " tensor-parallel rank(s)): " << f.parameters
        << " parameters: weights " << mebibytes(f.parameter_bytes) << ", gradients " << mebibytes(f.gradient_bytes)
        << ", LAMB state " << mebibytes(f.optimizer_bytes)
        << (f.bucket_bytes > 0 ? ", gradient buckets " + mebibytes(f.bucket_bytes) : std::string()) << ", activations ~"
        << mebibytes(f.activation_bytes) << "; per step sends tp " << mebibytes(f.tensor_bytes) << ", pp "
        << mebibytes(f.pipeline_bytes) << ", dp " << mebibytes(f.data_bytes) << ", tied embeddings "
        << mebibytes(f.embedding_bytes) << "\n";
  }
  if (plan.pipeline > 1)
    out << "  pipeline bubble (p-1)/(v*m) = "
        << parallel::pipeline_bubble_fraction(plan.pipeline, static_cast<int>(micro_batches), plan.virtual_stages)
        << " of the ideal step\n";
}

}  // namespace trainbench::bert
