// The language-model benchmark (MLPerf "bert"): BERT-Large pre-training, masked LM and next sentence.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "data/generators/bert_pretraining.h"
#include "data/generators/dataset_directory.h"
#include "parallel/gradient_sync.h"
#include "parallel/pipeline.h"
#include "util/error.h"
#include "workloads/bert/model_parallel.h"
#include "workloads/bert/pretraining.h"
#include "workloads/bert/settings.h"
#include "workloads/bert/trainer.h"
#include "workloads/common.h"

extern const char* const trainbench_presets_bert;

namespace trainbench::bert {

PretrainingBatch make_batch(const data::BertSamples& samples, torch::Device device) {
  const int64_t batch = samples.size(), seq = samples.seq_length, preds = samples.max_predictions;
  std::vector<int64_t> positions, labels, offsets{0};
  positions.reserve(static_cast<size_t>(batch * preds));
  labels.reserve(static_cast<size_t>(batch * preds));
  for (int64_t n = 0; n < batch; offsets.push_back(static_cast<int64_t>(positions.size())), ++n)
    for (int64_t k = 0; k < preds; ++k) {
      const int32_t position = samples.masked_lm_positions[static_cast<size_t>(n * preds + k)];
      if (position == 0) break;
      if (position < 0 || position >= seq)
        fail("BERT batch", "masked_lm_positions value " + std::to_string(position) + " outside the sequence length " +
                               std::to_string(seq));
      positions.push_back(n * seq + position);
      labels.push_back(samples.masked_lm_ids[static_cast<size_t>(n * preds + k)]);
    }
  // from_blob does not copy; .to(kLong) makes the owned tensors before `samples` can go away.
  const auto wrap = [&](const auto& values, torch::ScalarType type, std::vector<int64_t> shape) {
    return torch::from_blob(const_cast<void*>(static_cast<const void*>(values.data())), shape, type)
        .to(device, torch::kLong);
  };
  PretrainingBatch result;
  result.input_ids = wrap(samples.input_ids, torch::kInt, {batch, seq});
  result.segment_ids = wrap(samples.segment_ids, torch::kChar, {batch, seq});
  result.input_mask = wrap(samples.input_mask, torch::kChar, {batch, seq});
  result.next_sentence_labels = wrap(samples.next_sentence_labels, torch::kChar, {batch});
  result.masked_positions = torch::tensor(positions, torch::kLong).to(device);
  result.masked_lm_ids = torch::tensor(labels, torch::kLong).to(device);
  result.masked_offsets = std::move(offsets);
  return result;
}

PretrainingBatch PretrainingBatch::rows(const BatchSlice& slice) const {
  const int64_t first = masked_offsets[static_cast<size_t>(slice.begin)];
  const int64_t predictions = masked_offsets[static_cast<size_t>(slice.begin + slice.size)] - first;
  PretrainingBatch part;
  part.input_ids = slice.of(input_ids);
  part.segment_ids = slice.of(segment_ids);
  part.input_mask = slice.of(input_mask);
  part.next_sentence_labels = slice.of(next_sentence_labels);
  // Positions index the flattened [B, S]: the slice's rows start at slice.begin * S.
  part.masked_positions = masked_positions.narrow(0, first, predictions) - slice.begin * input_ids.size(1);
  part.masked_lm_ids = masked_lm_ids.narrow(0, first, predictions);
  const auto last = masked_offsets.begin() + slice.begin + slice.size;
  for (auto offset = masked_offsets.begin() + slice.begin; offset <= last; ++offset)
    part.masked_offsets.push_back(*offset - first);
  return part;
}

double BertLrSchedule::at(int64_t step) const {
  const int64_t warmup_progress = step - start_warmup_step;
  if (warmup_steps > 0 && warmup_progress < warmup_steps)
    return base_lr * static_cast<double>(std::max<int64_t>(0, warmup_progress)) / static_cast<double>(warmup_steps);
  const double done =
      std::min(static_cast<double>(step), static_cast<double>(total_steps)) / static_cast<double>(total_steps);
  return base_lr * std::pow(1.0 - done, power);
}

torch::Tensor pretraining_loss(const BertForPreTraining& model, const BertOutputs& outputs,
                               const PretrainingBatch& batch) {
  return model->masked_lm_loss(outputs.masked_lm_features, batch.masked_lm_ids) +
         torch::nn::functional::cross_entropy(outputs.next_sentence_logits, batch.next_sentence_labels);
}

uint64_t draw_dropout_key(at::Generator& generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
}

TrainingStep training_step(BertForPreTraining model, Lamb& optimizer, PretrainingBatch batch, double learning_rate,
                           const ForwardPass& pass) {
  TrainingStep step;
  step.samples = batch.input_ids.size(0);
  step.loss = [=](const BatchSlice& slice) mutable {
    const PretrainingBatch part = slice.size == batch.input_ids.size(0) ? batch : batch.rows(slice);
    const BertOutputs outputs = model->forward(part.input_ids, part.segment_ids, part.input_mask, part.masked_positions,
                                               {pass.dropout_key, pass.first_row + slice.begin});
    return pretraining_loss(model, outputs, part);
  };
  step.update = [&optimizer, learning_rate] { optimizer.step(learning_rate); };
  return step;
}

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset = "train/ and eval/ folders of MLPerf BERT HDF5 shards";

BertOptions model_options(const Settings& preset) {
  return BertOptions()
      .vocab_size(preset.vocab_size)
      .hidden(preset.hidden)
      .layers(preset.layers)
      .heads(preset.heads)
      .intermediate(preset.intermediate)
      .max_positions(preset.max_positions)
      .dropout(preset.dropout);
}

LambOptions lamb_options(const Settings& preset) {
  return LambOptions()
      .beta1(preset.beta1)
      .beta2(preset.beta2)
      .epsilon(preset.epsilon)
      .weight_decay(preset.weight_decay)
      .max_grad_norm(preset.max_grad_norm);
}

BertLrSchedule lr_schedule(const Settings& preset) {
  return {preset.base_learning_rate, preset.warmup_steps, preset.start_warmup_step, preset.train_steps,
          preset.poly_power};
}

// The rules' evaluation interval: FLOOR(0.05 * (230.23 * GBS + 3,000,000), 25000) samples, unless the
// preset sets its own (the mini preset's dataset is far smaller than one reference interval).
int64_t eval_interval_samples(const Settings& preset) {
  if (preset.eval_interval_samples) return *preset.eval_interval_samples;
  const double samples = 0.05 * (230.23 * static_cast<double>(preset.batch_size) + 3'000'000.0);
  return static_cast<int64_t>(std::floor(samples / 25000.0)) * 25000;
}

// The rules that no range of settings.json states (the bounds are other settings), checked before the log opens.
void check_settings(const Config& config, const Settings& preset) {
  const int64_t seq = preset.seq_length, predictions = preset.max_predictions;
  if (predictions > seq)
    fail(config.name() + ": max_predictions", std::to_string(predictions) + " is more than seq_length " +
                                                  std::to_string(seq) + ": a sequence has no more tokens to mask");
  if (preset.eval_interval_samples && *preset.eval_interval_samples > preset.max_samples)
    fail(config.name() + ": eval_interval_samples",
         std::to_string(*preset.eval_interval_samples) + " is more than max_samples " +
             std::to_string(preset.max_samples) + ": the run would end before its first evaluation");
}

// The seeded model with the weights it starts from, on the context's device in training mode: the whole model,
// or under a plan that splits it this rank's part, cut from the same whole model so every split starts alike. The
// weights come from `generator` (seeded from --seed): LibTorch's default generator is the process's, which the
// modules' own initialisation also draws from, and which ranks in threads of one process share.
BertForPreTraining starting_model(const WorkloadSettings& settings, const Settings& preset, TrainerPurpose purpose,
                                  const parallel::ParallelContext& context, at::Generator& generator) {
  seed_torch(settings);
  BertForPreTraining model(model_options(preset), BertPartition{});
  model->reset_parameters(generator);
  const std::string weights = starting_weights(settings, preset.init_checkpoint, purpose);
  if (!weights.empty()) load_checkpoint(model, weights);
  if (context.plan.model_parallel()) {
    BertForPreTraining part(model_options(preset), partition_for(preset, context));
    part->take_shards(*model);
    model = part;
  }
  model->to(context.device);
  model->train();
  return model;
}

// The context with the preset's plan's groups formed, when the plan splits the model.
parallel::ParallelContext planned_context(const Config& config, const Settings& preset,
                                          const parallel::ParallelContext& context) {
  const parallel::ParallelPlan plan = plan_for(config, preset, context.world_size());
  return plan.model_parallel() ? parallel::with_plan(context, plan) : context;
}

// bench's batch: full-length sequences, every prediction slot used.
PretrainingBatch synthetic_batch(int64_t batch_size, int64_t seq, int64_t preds, torch::Device device) {
  data::BertSamples samples;
  samples.seq_length = seq;
  samples.max_predictions = preds;
  samples.input_ids.resize(static_cast<size_t>(batch_size * seq));
  for (size_t i = 0; i < samples.input_ids.size(); ++i)
    samples.input_ids[i] = static_cast<int32_t>(1000 + (i * 7919) % 20000);
  samples.input_mask.assign(static_cast<size_t>(batch_size * seq), 1);
  samples.segment_ids.resize(static_cast<size_t>(batch_size * seq));
  for (size_t i = 0; i < samples.segment_ids.size(); ++i)
    samples.segment_ids[i] = static_cast<int8_t>(i % seq >= static_cast<size_t>(seq / 2));
  for (int64_t n = 0; n < batch_size; ++n)
    for (int64_t k = 0; k < preds; ++k) {
      samples.masked_lm_positions.push_back(static_cast<int32_t>(1 + k * (seq - 2) / preds));
      samples.masked_lm_ids.push_back(static_cast<int32_t>(2000 + n + k));
    }
  samples.next_sentence_labels.resize(static_cast<size_t>(batch_size));
  for (int64_t n = 0; n < batch_size; ++n)
    samples.next_sentence_labels[static_cast<size_t>(n)] = static_cast<int8_t>(n % 2);
  return make_batch(samples, device);
}

}  // namespace

BertTrainer::BertTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context,
                         TrainerPurpose purpose)
    : TrainerOf(settings, context),
      planned_(planned_context(config_, preset_, context)),
      generator_(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(settings.seed))),
      model_(starting_model(settings, preset_, purpose, planned_, generator_)),
      optimizer_(optimizer_parameters(model_, planned_), lamb_options(preset_)),
      gradients_(planned_.data_parallel(), model_->parameters(), model_->buffers()),  // rank 0's initial weights
      loop_(config_, context.device, model_->parameters(), &gradients_),
      pipeline_(planned_.pipeline_parallel(), planned_.plan.schedule, planned_.plan.virtual_stages) {
  if (!planned_.plan.model_parallel()) return;
  optimizer_.span_ranks(norm_reduction(planned_));
  // A data-parallel replica's rows are counted once, on its first tensor rank of its first stage.
  loop_.count_samples(planned_.coordinates().tensor == 0 && planned_.coordinates().pipeline == 0);
}

TrainingStep BertTrainer::step(PretrainingBatch batch, double learning_rate, int64_t first_row) {
  const ForwardPass pass{draw_dropout_key(generator_), first_row};
  if (!planned_.plan.model_parallel()) return training_step(model_, optimizer_, std::move(batch), learning_rate, pass);
  TrainingStep step = planned_.plan.pipeline > 1
                          ? pipelined_step(std::move(batch), pass)
                          : training_step(model_, optimizer_, std::move(batch), learning_rate, pass);
  step.update = [this, learning_rate] {
    sum_tied_embedding_gradients(model_, planned_);
    optimizer_.step(learning_rate);
  };
  step.finite_everywhere = [this](bool finite) {
    std::vector<double> nonfinite{finite ? 0.0 : 1.0};
    planned_.world->sum(nonfinite);
    return nonfinite[0] == 0;
  };
  return step;
}

TrainingStep BertTrainer::pipelined_step(PretrainingBatch batch, const ForwardPass& pass) {
  TrainingStep step;
  step.samples = batch.input_ids.size(0);
  step.micro_batches = [this, batch = std::move(batch), pass](const std::vector<BatchSlice>& slices,
                                                              double loss_scale) {
    return run_pipeline(batch, pass, slices, loss_scale);
  };
  return step;
}

std::vector<std::string> BertTrainer::initialized_tensors() const {
  std::vector<std::string> names;
  // A split model's part holds only some; the names are the one-rank model's, whose layers differ only in index.
  const BertForPreTraining whole =
      model_is_split() ? BertForPreTraining(model_options(preset_).layers(1), BertPartition{}) : model_;
  const std::string first_layer = "bert.encoder.layer.0.";
  for (const auto& parameter : whole->named_parameters()) {
    const std::string& name = parameter.key();
    if (!model_is_split() || name.rfind(first_layer, 0) != 0) {
      names.push_back(mlperf_tensor_name(name));
      continue;
    }
    for (int64_t i = 0; i < preset_.layers; ++i)
      names.push_back(
          mlperf_tensor_name("bert.encoder.layer." + std::to_string(i) + "." + name.substr(first_layer.size())));
  }
  names.push_back("cls/predictions/decoder/kernel");  // the rules list the tied decoder separately
  return names;
}

void BertTrainer::save_model(const std::string& path) const {
  if (!model_is_split()) {
    save_official_checkpoint(model_, path);
    return;
  }
  const BertForPreTraining whole = gather_whole_model(model_, model_options(preset_), planned_);
  if (planned_.rank() == 0) save_official_checkpoint(whole, path);
}

SyntheticStep BertTrainer::synthetic_step(BenchRun& run) {
  const int64_t batch_size = preset_.batch_size / planned_.data_parallel().world(), seq = preset_.seq_length;
  const int64_t preds = preset_.max_predictions;
  const PretrainingBatch batch = synthetic_batch(batch_size, seq, preds, context_.device);
  return {[this, batch] { loop_.update(step(batch, 1e-4, 0)); }, "seq",
          3.0 * 2.0 * model_->forward_macs(batch_size, seq, batch_size * preds) / batch_size,
          "seq " + std::to_string(seq) + ", " + std::to_string(preds) + " predictions" +
              (model_is_split() ? ", " + planned_.plan.describe() + " (FLOPs of the whole model)" : "")};
}

namespace {

// The bytes a group's collectives and sends were given since its counters were reset.
double bytes_passed(const parallel::Communicator& group) {
  double bytes = 0;
  for (const auto op :
       {parallel::Collective::kAllReduce, parallel::Collective::kAllGather, parallel::Collective::kReduceScatter,
        parallel::Collective::kBroadcast, parallel::Collective::kAllToAll, parallel::Collective::kSend})
    bytes += static_cast<double>(group.traffic(op).bytes);
  return bytes;
}

std::string traffic_figure(double measured, double formula) {
  char text[96];
  std::snprintf(text, sizeof text, "%.2f MiB (formula %.2f)", measured / 1048576.0, formula / 1048576.0);
  return text;
}

}  // namespace

void BertTrainer::bench_after_training(BenchRun& run, std::ostream& out, double) {
  if (!model_is_split()) return;
  const std::vector<parallel::Communicator*> groups = {
      &planned_.tensor_parallel(), &planned_.pipeline_parallel(), &planned_.data_parallel(),
      planned_.embedding_group ? planned_.embedding_group.get() : nullptr};
  for (parallel::Communicator* group : groups)
    if (group) group->reset_traffic();
  synthetic_step(run).run();
  const int stage = planned_.coordinates().pipeline;
  const int64_t micro_batches = loop_.settings().accumulation_steps;
  const RankFootprint expected = footprint(preset_, planned_.plan, stage, micro_batches, 4);
  out << "traffic       rank " << planned_.rank() << " (stage " << stage << "), one step's payloads: tp "
      << traffic_figure(bytes_passed(*groups[0]), expected.tensor_bytes) << ", pp "
      << traffic_figure(bytes_passed(*groups[1]), expected.pipeline_bytes) << ", dp "
      << traffic_figure(bytes_passed(*groups[2]), expected.data_bytes) << ", tied embeddings "
      << traffic_figure(groups[3] ? bytes_passed(*groups[3]) : 0.0, expected.embedding_bytes) << "\n";
  if (planned_.plan.pipeline == 1) return;
  const parallel::PipelineStepStats& stats = pipeline_.last_step();
  char line[256];
  std::snprintf(line, sizeof line,
                "pipeline      rank %d waited %.4f s in receives beside %.4f s of compute (%.3f); (p-1)/(v*m) = %.3f "
                "with %lld micro-batches\n",
                planned_.rank(), stats.receive_wait_seconds, stats.compute_seconds,
                stats.receive_wait_seconds / std::max(stats.compute_seconds, 1e-9),
                parallel::pipeline_bubble_fraction(planned_.plan.pipeline, static_cast<int>(micro_batches),
                                                   planned_.plan.virtual_stages),
                static_cast<long long>(micro_batches));
  out << line;
}

// The first virtual stage embeds its micro-batch, each chunk runs its layers, and the last one's loss is weighted
// by the micro-batch's share of the batch and scaled as the loop weights and scales it.
double BertTrainer::run_pipeline(const PretrainingBatch& batch, const ForwardPass& pass,
                                 const std::vector<BatchSlice>& slices, double loss_scale) {
  std::vector<PretrainingBatch> parts;
  for (const BatchSlice& slice : slices)
    parts.push_back(slice.size == batch.input_ids.size(0) ? batch : batch.rows(slice));
  const int stage = planned_.coordinates().pipeline;
  parallel::PipelineStageFunctions functions;
  functions.forward = [&](int chunk, int micro_batch, const torch::Tensor& input) {
    const PretrainingBatch& part = parts[static_cast<size_t>(micro_batch)];
    const ForwardPass micro_pass{pass.dropout_key, pass.first_row + slices[static_cast<size_t>(micro_batch)].begin};
    const torch::Tensor hidden =
        pipeline_.first_virtual_stage(chunk) ? model_->embed(part.input_ids, part.segment_ids, micro_pass) : input;
    const auto [first, last] = chunk_layers(preset_.layers, planned_.plan, stage, chunk);
    const torch::Tensor encoded = model_->encode(hidden, part.input_mask, first, last, micro_pass);
    if (!pipeline_.last_virtual_stage(chunk)) return encoded;
    const torch::Tensor loss = pretraining_loss(model_, model_->predict(encoded, part.masked_positions), part);
    return loss * (slices[static_cast<size_t>(micro_batch)].weight() * loss_scale);
  };
  functions.input_layout = [&](int, int micro_batch) {
    return parallel::ActivationLayout{
        {slices[static_cast<size_t>(micro_batch)].size, preset_.seq_length, preset_.hidden},
        torch::TensorOptions().dtype(torch::kFloat).device(context_.device)};
  };
  return pipeline_.run_step(static_cast<int>(slices.size()), functions) / loss_scale;
}

namespace {

class BertWorkload : public WorkloadBase {
 public:
  explicit BertWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(read_settings<Settings>(config_)) {
    check_settings(config_, preset_);
    require_preset_path(settings_, "init_checkpoint", preset_.init_checkpoint);
    plan_ = plan_for(config_, preset_, communicator_->world());  // before the log opens
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("seq");
    const double interval = static_cast<double>(eval_interval_samples(preset_));
    description.schedule.first_block = interval;
    description.schedule.interval = interval;
    description.schedule.max_epochs = static_cast<double>(preset_.max_samples);
    description.schedule.unit = ScheduleUnit::kSamples;
    description.hyperparameters = {
        {"global_batch_size", preset_.batch_size},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", "lamb"},
        {"max_sequence_length", preset_.seq_length},
        {"max_predictions_per_seq", preset_.max_predictions},
        {"opt_base_learning_rate", preset_.base_learning_rate},
        {"opt_epsilon", preset_.epsilon},
        {"opt_learning_rate_training_steps", preset_.train_steps},
        {"opt_learning_rate_warmup_steps", preset_.warmup_steps},
        {"num_warmup_steps", preset_.warmup_steps},
        {"start_warmup_step", preset_.start_warmup_step},
        {"opt_lamb_beta_1", preset_.beta1},
        {"opt_lamb_beta_2", preset_.beta2},
        {"opt_lamb_weight_decay_rate", preset_.weight_decay},
        {"opt_lamb_learning_rate_decay_poly_power", preset_.poly_power},
        {"trainbench_model", config_.string("summary")},
    };
    add_plan_hyperparameters(plan_, description.hyperparameters);
    return description;
  }

  std::vector<std::string> build() override {
    require_data_dir(kDataset);
    trainer_ = std::make_unique<BertTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    schedule_ = lr_schedule(preset_);
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override {
    train_.emplace(data::list_bert_shards((fs::path(settings_.data_dir) / "train").string()));
    eval_.emplace(data::list_bert_shards((fs::path(settings_.data_dir) / "eval").string()));
    for (const auto* shards : {&*train_, &*eval_}) check_shards(*shards);
    order_.emplace(*train_, static_cast<uint64_t>(settings_.seed));
    eval_count_ = std::min(eval_->size(), preset_.eval_samples);
    DataSummary summary;
    summary.train_samples = train_->size();
    summary.eval_samples = eval_count_;
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    trainer_->model()->train();
    TrainingLoop& loop = trainer_->loop();
    const int64_t batch_size = preset_.batch_size;  // global
    // The ranks of one model (its tensor-parallel and pipeline ranks) read the same rows.
    parallel::Communicator& data = trainer_->context().data_parallel();
    const int64_t first_row = data.rank() * (batch_size / data.world());
    loop.begin_block(control);
    // Blocks are in samples; a block ends at the first whole batch that reaches its last sample.
    while (static_cast<double>(loop.updates() * batch_size) < block.last_epoch_num()) {
      PretrainingBatch batch = loop.fetch([&] {
        return make_batch(train_->gather(order_->batch(loop.updates(), batch_size, data.rank(), data.world())),
                          device_);
      });
      loop.train(trainer_->step(std::move(batch), schedule_.at(loop.updates()), first_row));
    }
    return loop.end_block();
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    BertForPreTraining& model = trainer_->model();
    model->eval();
    const int64_t batch_size = preset_.eval_batch_size;
    int64_t correct = 0, total = 0;
    const parallel::ParallelContext& context = trainer_->context();
    const auto [begin, end] =
        data::eval_range(eval_count_, context.data_parallel().rank(), context.data_parallel().world());
    for (int64_t first = begin; first < end; first += batch_size) {
      std::vector<int64_t> indices;
      for (int64_t i = first; i < std::min(end, first + batch_size); ++i) indices.push_back(i);
      const PretrainingBatch batch = make_batch(eval_->gather(indices), device_);
      // Through the stages of a split model; each prediction counted once, on the last stage's first rank.
      const auto [batch_correct, predictions] = masked_lm_counts(model, batch, context);
      correct += batch_correct;
      total += predictions;
      control.check_interrupt();
    }
    model->train();
    return fraction_over_ranks(static_cast<double>(correct), static_cast<double>(total), eval_->files().front(),
                               "the evaluation samples have no masked positions");
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  // The shards must hold the preset's sequence length and prediction count.
  void check_shards(const data::BertShardSet& shards) const {
    if (shards.seq_length() == preset_.seq_length && shards.max_predictions() == preset_.max_predictions) return;
    fail(shards.files().front(), "has sequence length " + std::to_string(shards.seq_length()) + " and " +
                                     std::to_string(shards.max_predictions()) + " predictions, but " +
                                     config_.name() + " expects seq_length " + std::to_string(preset_.seq_length) +
                                     " and max_predictions " + std::to_string(preset_.max_predictions));
  }

  const Settings preset_;
  parallel::ParallelPlan plan_;
  std::unique_ptr<BertTrainer> trainer_;
  BertLrSchedule schedule_;
  std::optional<data::BertShardSet> train_, eval_;
  std::optional<data::BertTrainOrder> order_;
  int64_t eval_count_ = 0;
};

void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const Settings preset = read_settings<Settings>(config);
  if (!preset.dataset)
    fail("--preset " + config.name(),
         "has no generated dataset; pass --data with train/ and eval/ folders of MLPerf BERT HDF5 shards");
  const DatasetSettings& dataset = *preset.dataset;
  data::BertDatasetOptions options;
  options.pretraining.seq_length = preset.seq_length;
  options.pretraining.max_predictions = preset.max_predictions;
  options.pretraining.masked_lm_prob = dataset.masked_lm_prob;
  options.pretraining.short_seq_prob = dataset.short_seq_prob;
  options.pretraining.dupe_factor = dataset.dupe_factor;
  options.pretraining.seed = static_cast<uint64_t>(seed);
  options.corpus = dataset.corpus;
  options.eval_every_nth_document = dataset.eval_every_nth_document;
  options.eval_samples = dataset.eval_samples;
  options.train_shards = dataset.train_shards;
  // A staging folder renamed at the end: a failed make leaves nothing a retry would refuse.
  data::write_new_dataset_directory(
      out_dir, [&](const fs::path& staging) { data::make_bert_dataset(staging.string(), options); });
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"bert",
          "Language model: BERT-Large pre-training on Wikipedia, target masked-LM accuracy 0.720",
          trainbench_presets_bert,
          kDataset,
          construct_workload<BertWorkload>,
          construct_trainer<BertTrainer>,
          make_dataset,
          /*prepare_dataset=*/nullptr,
          print_plan};
}

}  // namespace trainbench::bert
