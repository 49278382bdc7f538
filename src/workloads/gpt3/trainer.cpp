#include "workloads/gpt3/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <ATen/CPUGeneratorImpl.h>

#include "optim/gradient_clipping.h"
#include "parallel/tensor_parallel.h"
#include "util/error.h"
#include "workloads/gpt3/distributed_checkpoint.h"
#include "workloads/model_parallel.h"

namespace trainbench::gpt3 {

namespace {

constexpr int kEvaluationTagBase = 1 << 21;  // apart from the pipeline schedule's tags

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The tied word embeddings' gradient summed over the first and the last stage (the lookup's part and the output
// projection's), so that both copies take the same update, as Megatron's embedding group does.
void sum_tied_embedding_gradients(GptModel& model, const parallel::ParallelContext& context) {
  if (!context.embedding_group || context.embedding_group->world() == 1) return;
  const GptPartition& partition = model->partition();
  const char* name = partition.embeddings ? kWordEmbeddings : kHeadWordEmbeddings;
  torch::Tensor gradient = model->named_parameters()[name].mutable_grad();
  if (!gradient.defined()) fail("gpt3 pipeline", "the tied word embeddings have no gradient on this stage");
  context.embedding_group->allreduce_sum(gradient).wait();
}

// Every parameter decays (--do-layernorm-bias-weight-decay). A tensor held whole on every tensor-parallel rank
// counts in the global norm on the first; the last stage's copy of the word embeddings counts on the first stage.
std::vector<optim::Parameter> optimizer_parameters(GptModel& model) {
  const GptPartition& partition = model->partition();
  std::vector<optim::Parameter> parameters;
  for (const auto& item : model->named_parameters()) {
    optim::Parameter parameter{item.value(), true};
    parameter.sharded = partition.split() && tensor_parallel_dim(item.key()) >= 0;
    parameter.counted_in_global_norm =
        (parameter.sharded || partition.tensor_rank() == 0) && item.key() != kHeadWordEmbeddings;
    parameters.push_back(parameter);
  }
  return parameters;
}

// The seeded model on the context's device: the whole model, or this rank's part cut from the same whole model,
// so that every split starts alike. The weights come from the trainer's generator (seeded from --seed): ranks in
// threads of one process share LibTorch's default one.
GptModel starting_model(const Settings& preset, const parallel::ParallelContext& context, at::Generator& generator) {
  GptPartition whole_partition;
  whole_partition.padded_vocab = partition_for(preset, context).padded_vocab;
  GptModel model(model_options(preset), whole_partition);
  model->reset_parameters(generator);
  if (context.plan.model_parallel()) {
    GptModel part(model_options(preset), partition_for(preset, context));
    part->take_shards(*model);
    model = part;
  }
  model->to(context.device);
  model->train();
  return model;
}

parallel::ParallelContext planned_context(const Config& config, const Settings& preset,
                                          const parallel::ParallelContext& context) {
  const parallel::ParallelPlan plan = plan_for(config, preset, context.world_size());
  return plan.model_parallel() ? parallel::with_plan(context, plan) : context;
}

}  // namespace

TokenBatch TokenBatch::of(const torch::Tensor& sequences) {
  TokenBatch batch;
  batch.labels = sequences.roll(-1, 1);
  batch.labels.select(1, sequences.size(1) - 1).fill_(-1);
  batch.loss_mask = batch.labels.ne(-1).to(torch::kFloat);
  // A short last validation sample is padded with -1: those positions are tokens 0 and count nowhere.
  batch.tokens = sequences.clamp_min(0);
  batch.labels = batch.labels.clamp_min(0);
  return batch;
}

TokenBatch TokenBatch::rows(const BatchSlice& slice) const {
  if (slice.begin == 0 && slice.size == size()) return *this;
  return {slice.of(tokens), slice.of(labels), slice.of(loss_mask)};
}

double GptLrSchedule::at(int64_t updates) const {
  const int64_t step = init_checkpoint_step + updates;
  if (warmup_steps > 0 && step <= warmup_steps)
    return base * static_cast<double>(step) / static_cast<double>(warmup_steps);
  if (step > decay_steps) return end;
  const double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  return end + 0.5 * (std::cos(M_PI * progress) + 1.0) * (base - end);
}

GptLrSchedule lr_schedule(const Settings& preset) {
  const int64_t batch = preset.batch_size;
  GptLrSchedule schedule;
  schedule.base = preset.base_learning_rate.value_or(batch <= 3072 ? 2e-5 : 3e-5);
  schedule.end = preset.end_learning_rate.value_or(0.1 * schedule.base);
  schedule.warmup_steps = preset.warmup_steps.value_or(ceil_div(265 * 1536, batch));
  schedule.decay_steps = preset.decay_steps.value_or(ceil_div(108600 * 1536, batch));
  schedule.init_checkpoint_step = preset.init_checkpoint_step.value_or(ceil_div(4000 * 1536, batch));
  return schedule;
}

GptOptions model_options(const Settings& preset) {
  return GptOptions()
      .vocab_size(preset.vocab_size)
      .hidden(preset.hidden)
      .layers(preset.layers)
      .heads(preset.heads)
      .ffn_hidden(preset.ffn_hidden)
      .max_positions(preset.max_positions)
      .init_std(preset.init_std)
      .recompute(preset.recompute_activations);
}

parallel::ParallelPlan plan_for(const Config& config, const Settings& preset, int world) {
  const parallel::ParallelPlan plan =
      model_parallel_plan(config,
                          {preset.tensor_parallel, preset.pipeline_parallel, preset.virtual_pipeline_stages,
                           preset.layers, preset.pipeline_schedule},
                          world);
  require_divisible(preset.heads, plan.tensor, config.name() + ": heads", "tensor_parallel");
  require_divisible(preset.ffn_hidden, plan.tensor, config.name() + ": ffn_hidden", "tensor_parallel");
  require_divisible(preset.hidden, preset.heads, config.name() + ": hidden", "heads");
  return plan;
}

GptPartition partition_for(const Settings& preset, const parallel::ParallelContext& context) {
  const parallel::ParallelPlan& plan = context.plan;
  GptPartition partition;
  // Megatron pads the vocabulary under every layout, to a multiple of make_vocab_size_divisible_by x tp.
  partition.padded_vocab =
      parallel::padded_vocab_size(preset.vocab_size, preset.make_vocab_size_divisible_by, plan.tensor);
  if (!plan.model_parallel()) return partition;
  if (plan.tensor > 1) partition.tensor_group = context.tensor_group;
  const int stage = context.coordinates().pipeline;
  partition.layers = stage_layers(preset.layers, plan, stage);
  partition.embeddings = stage == 0;
  partition.head = stage == plan.pipeline - 1;
  return partition;
}

GptTrainer::GptTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context,
                       TrainerPurpose purpose)
    : TrainerOf(settings, context),
      planned_(planned_context(config_, preset_, context)),
      generator_(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(settings.seed))),
      model_(starting_model(preset_, planned_, generator_)),
      parameters_(optimizer_parameters(model_)),
      optimizer_(parameters_, optim::AdamOptions()
                                  .beta1(preset_.beta1)
                                  .beta2(preset_.beta2)
                                  .epsilon(preset_.epsilon)
                                  .weight_decay(preset_.weight_decay)),
      gradients_(planned_.data_parallel(), model_->parameters(), model_->buffers()),
      loop_(config_, context.device, model_->parameters(), &gradients_),
      pipeline_(planned_.pipeline_parallel(), planned_.plan.schedule, planned_.plan.virtual_stages) {
  const std::string weights = starting_weights(settings, preset_.init_checkpoint, purpose);
  if (!weights.empty()) load_distributed_checkpoint(weights, model_, &optimizer_);
  if (!planned_.plan.model_parallel()) return;
  // A data-parallel replica's rows are counted once, on its first tensor rank of its first stage.
  loop_.count_samples(planned_.coordinates().tensor == 0 && planned_.coordinates().pipeline == 0);
}

void GptTrainer::update(double learning_rate) {
  sum_tied_embedding_gradients(model_, planned_);
  const optim::NormReduction reduction = norm_reduction(planned_);
  last_gradient_norm_ = optim::clip_gradient_norm(parameters_, preset_.max_grad_norm,
                                                  planned_.plan.model_parallel() ? reduction.over_model : nullptr);
  optimizer_.step(learning_rate);
}

TrainingStep GptTrainer::step(TokenBatch batch, double learning_rate) {
  TrainingStep step;
  step.samples = batch.size();
  if (planned_.plan.pipeline > 1) {
    step.micro_batches = [this, batch](const std::vector<BatchSlice>& slices, double loss_scale) {
      return run_pipeline(batch, slices, loss_scale);
    };
  } else {
    step.loss = [this, batch](const BatchSlice& slice) {
      const TokenBatch part = batch.rows(slice);
      return model_->forward(part.tokens, part.labels, part.loss_mask);
    };
  }
  step.update = [this, learning_rate] { update(learning_rate); };
  if (planned_.plan.model_parallel())
    step.finite_everywhere = [this](bool finite) {
      std::vector<double> nonfinite{finite ? 0.0 : 1.0};
      planned_.world->sum(nonfinite);
      return nonfinite[0] == 0;
    };
  return step;
}

// The first virtual stage embeds its micro-batch, each chunk runs its layers, and the last one's masked mean
// loss is weighted by the micro-batch's share of the batch and scaled as the loop weights and scales it.
double GptTrainer::run_pipeline(const TokenBatch& batch, const std::vector<BatchSlice>& slices, double loss_scale) {
  std::vector<TokenBatch> parts;
  for (const BatchSlice& slice : slices) parts.push_back(batch.rows(slice));
  const int stage = planned_.coordinates().pipeline;
  parallel::PipelineStageFunctions functions;
  functions.forward = [&](int chunk, int micro_batch, const torch::Tensor& input) {
    const TokenBatch& part = parts[static_cast<size_t>(micro_batch)];
    const torch::Tensor hidden = pipeline_.first_virtual_stage(chunk) ? model_->embed(part.tokens) : input;
    const auto [first, last] = chunk_layers(preset_.layers, planned_.plan, stage, chunk);
    const torch::Tensor encoded = model_->encode(hidden, first, last);
    if (!pipeline_.last_virtual_stage(chunk)) return encoded;
    const torch::Tensor losses = model_->token_losses(encoded, part.labels);
    const torch::Tensor loss = (losses * part.loss_mask).sum() / part.loss_mask.sum();
    return loss * (slices[static_cast<size_t>(micro_batch)].weight() * loss_scale);
  };
  functions.input_layout = [&](int, int micro_batch) {
    return parallel::ActivationLayout{
        {preset_.seq_length, slices[static_cast<size_t>(micro_batch)].size, preset_.hidden},
        torch::TensorOptions().dtype(torch::kFloat).device(context_.device)};
  };
  return pipeline_.run_step(static_cast<int>(slices.size()), functions) / loss_scale;
}

std::pair<double, double> GptTrainer::evaluation_sums(const TokenBatch& batch) {
  torch::NoGradGuard no_grad;
  const parallel::ParallelPlan& plan = planned_.plan;
  const int stage = planned_.coordinates().pipeline, stages = plan.pipeline;
  const int last_virtual_stage = stages * plan.virtual_stages - 1;
  parallel::Communicator& pipeline = planned_.pipeline_parallel();
  std::vector<parallel::PendingCollective> sends;
  std::vector<torch::Tensor> in_flight;
  std::pair<double, double> sums{0, 0};
  for (int chunk = 0; chunk < plan.virtual_stages; ++chunk) {
    const int virtual_stage = chunk * stages + stage;
    torch::Tensor hidden;
    if (virtual_stage == 0) {
      hidden = model_->embed(batch.tokens);
    } else {
      hidden = torch::empty({batch.tokens.size(1), batch.size(), preset_.hidden},
                            torch::TensorOptions().dtype(torch::kFloat).device(batch.tokens.device()));
      pipeline.receive(hidden, (stage + stages - 1) % stages, kEvaluationTagBase + virtual_stage).wait();
    }
    const auto [first, last] = chunk_layers(preset_.layers, plan, stage, chunk);
    hidden = model_->encode(hidden, first, last);
    if (virtual_stage == last_virtual_stage) {
      const torch::Tensor losses = model_->token_losses(hidden, batch.labels);
      if (model_->partition().tensor_rank() == 0)
        sums = {(losses * batch.loss_mask).sum().item<double>(), batch.loss_mask.sum().item<double>()};
    } else {
      in_flight.push_back(hidden.contiguous());
      sends.push_back(pipeline.send(in_flight.back(), (stage + 1) % stages, kEvaluationTagBase + virtual_stage + 1));
    }
  }
  for (auto& send : sends) send.wait();
  return sums;
}

void GptTrainer::save_model(const std::string& path) const {
  save_distributed_checkpoint(path, model_, optimizer_, planned_);
}

std::vector<std::string> GptTrainer::initialized_tensors() const {
  // The whole model's names (a split model's part holds only some): one layer's stand for every layer's.
  GptPartition one_layer;
  one_layer.padded_vocab = model_->partition().padded_vocab;
  const GptModel whole(model_options(preset_).layers(1), one_layer);
  const std::string first_layer = "language_model.encoder.layers.0.";
  std::vector<std::string> names;
  for (const auto& parameter : whole->named_parameters()) {
    const std::string& name = parameter.key();
    if (name.rfind(first_layer, 0) != 0) {
      names.push_back(name);
      continue;
    }
    for (int64_t i = 0; i < preset_.layers; ++i)
      names.push_back("language_model.encoder.layers." + std::to_string(i) + "." + name.substr(first_layer.size()));
  }
  return names;
}

SyntheticStep GptTrainer::synthetic_step(BenchRun& run) {
  const int64_t batch_size = preset_.batch_size / planned_.data_parallel().world(), seq = preset_.seq_length;
  const torch::Tensor sequences =
      torch::arange(batch_size * seq, torch::kLong).remainder(preset_.vocab_size).view({batch_size, seq});
  const TokenBatch batch = TokenBatch::of(sequences.to(context_.device));
  return {[this, batch] { loop_.update(step(batch, 1e-5)); }, "seq", model_->step_flops(batch_size, seq) / batch_size,
          "seq " + std::to_string(seq) +
              (model_is_split() ? ", " + planned_.plan.describe() + " (FLOPs of the whole model)" : "")};
}

}  // namespace trainbench::gpt3
