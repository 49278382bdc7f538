// The language-model benchmark (MLPerf "bert"): BERT-Large pre-training, masked LM and next sentence.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include <torch/torch.h>

#include "data/generators/bert_pretraining.h"
#include "data/generators/dataset_directory.h"
#include "parallel/gradient_sync.h"
#include "util/error.h"
#include "workloads/bert/pretraining.h"
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
        fail("BERT batch", "masked_lm_positions value " + std::to_string(position) + " outside the sequence length " + std::to_string(seq));
      positions.push_back(n * seq + position);
      labels.push_back(samples.masked_lm_ids[static_cast<size_t>(n * preds + k)]);
    }
  // from_blob does not copy; .to(kLong) makes the owned tensors before `samples` can go away.
  const auto wrap = [&](const auto& values, torch::ScalarType type, std::vector<int64_t> shape) {
    return torch::from_blob(const_cast<void*>(static_cast<const void*>(values.data())), shape, type).to(device, torch::kLong);
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
  for (auto offset = masked_offsets.begin() + slice.begin; offset <= masked_offsets.begin() + slice.begin + slice.size; ++offset)
    part.masked_offsets.push_back(*offset - first);
  return part;
}

double BertLrSchedule::at(int64_t step) const {
  const int64_t warmup_progress = step - start_warmup_step;
  if (warmup_steps > 0 && warmup_progress < warmup_steps)
    return base_lr * static_cast<double>(std::max<int64_t>(0, warmup_progress)) / static_cast<double>(warmup_steps);
  const double done = std::min(static_cast<double>(step), static_cast<double>(total_steps)) / static_cast<double>(total_steps);
  return base_lr * std::pow(1.0 - done, power);
}

torch::Tensor pretraining_loss(const BertForPreTraining& model, const BertOutputs& outputs, const PretrainingBatch& batch) {
  return model->masked_lm_loss(outputs.masked_lm_features, batch.masked_lm_ids) +
         torch::nn::functional::cross_entropy(outputs.next_sentence_logits, batch.next_sentence_labels);
}

TrainingStep training_step(BertForPreTraining model, Lamb& optimizer, PretrainingBatch batch, double learning_rate) {
  TrainingStep step;
  step.samples = batch.input_ids.size(0);
  step.loss = [=](const BatchSlice& slice) mutable {
    const PretrainingBatch part = slice.size == batch.input_ids.size(0) ? batch : batch.rows(slice);
    const BertOutputs outputs = model->forward(part.input_ids, part.segment_ids, part.input_mask, part.masked_positions);
    return pretraining_loss(model, outputs, part);
  };
  step.update = [&optimizer, learning_rate] { optimizer.step(learning_rate); };
  return step;
}

int64_t masked_lm_correct(BertForPreTraining& model, const PretrainingBatch& batch) {
  torch::NoGradGuard no_grad;
  const BertOutputs outputs = model->forward(batch.input_ids, batch.segment_ids, batch.input_mask, batch.masked_positions);
  return model->masked_lm_logits(outputs.masked_lm_features).argmax(1).eq(batch.masked_lm_ids).sum().item<int64_t>();
}

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset = "train/ and eval/ folders of MLPerf BERT HDF5 shards";

BertOptions model_options(const Config& config) {
  return BertOptions()
      .vocab_size(config.integer("vocab_size"))
      .hidden(config.integer("hidden"))
      .layers(config.integer("layers"))
      .heads(config.integer("heads"))
      .intermediate(config.integer("intermediate"))
      .max_positions(config.integer("max_positions"))
      .dropout(config.number("dropout"));
}

Lamb make_optimizer(BertForPreTraining& model, const Config& config) {
  return Lamb(optimizer_parameters(model), LambOptions()
                              .beta1(config.number("beta1"))
                              .beta2(config.number("beta2"))
                              .epsilon(config.number("epsilon"))
                              .weight_decay(config.number("weight_decay"))
                              .max_grad_norm(config.number("max_grad_norm")));
}

BertLrSchedule lr_schedule(const Config& config) {
  return {config.number("base_learning_rate"), config.integer("warmup_steps"), config.integer("start_warmup_step"),
          config.integer("train_steps"), config.number("poly_power")};
}

// The rules' evaluation interval: FLOOR(0.05 * (230.23 * GBS + 3,000,000), 25000) samples, unless the
// preset sets its own (the mini preset's dataset is far smaller than one reference interval).
int64_t eval_interval_samples(const Config& config) {
  if (config.values().contains("eval_interval_samples")) return config.integer("eval_interval_samples");
  const double samples = 0.05 * (230.23 * static_cast<double>(config.integer("batch_size")) + 3'000'000.0);
  return static_cast<int64_t>(std::floor(samples / 25000.0)) * 25000;
}

// The rules that no range of settings.json states (the bounds are other settings), checked before the log opens.
void check_settings(const Config& config) {
  const int64_t seq = config.integer("seq_length"), predictions = config.integer("max_predictions");
  if (predictions > seq)
    fail(config.name() + ": max_predictions", std::to_string(predictions) + " is more than seq_length " + std::to_string(seq) +
                                                  ": a sequence has no more tokens to mask");
  const int64_t max_samples = config.integer("max_samples");
  if (config.values().contains("eval_interval_samples") && config.integer("eval_interval_samples") > max_samples)
    fail(config.name() + ": eval_interval_samples",
         std::to_string(config.integer("eval_interval_samples")) + " is more than max_samples " + std::to_string(max_samples) +
             ": the run would end before its first evaluation");
}

class BertWorkload : public WorkloadBase {
 public:
  explicit BertWorkload(WorkloadSettings settings) : WorkloadBase(std::move(settings)) { check_settings(config_); }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("seq");
    const double interval = static_cast<double>(eval_interval_samples(config_));
    description.schedule.first_block = interval;
    description.schedule.interval = interval;
    description.schedule.max_epochs = static_cast<double>(config_.integer("max_samples"));
    description.schedule.unit = ScheduleUnit::kSamples;
    description.hyperparameters = {
        {"global_batch_size", config_.integer("batch_size")},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", "lamb"},
        {"max_sequence_length", config_.integer("seq_length")},
        {"max_predictions_per_seq", config_.integer("max_predictions")},
        {"opt_base_learning_rate", config_.number("base_learning_rate")},
        {"opt_epsilon", config_.number("epsilon")},
        {"opt_learning_rate_training_steps", config_.integer("train_steps")},
        {"opt_learning_rate_warmup_steps", config_.integer("warmup_steps")},
        {"num_warmup_steps", config_.integer("warmup_steps")},
        {"start_warmup_step", config_.integer("start_warmup_step")},
        {"opt_lamb_beta_1", config_.number("beta1")},
        {"opt_lamb_beta_2", config_.number("beta2")},
        {"opt_lamb_weight_decay_rate", config_.number("weight_decay")},
        {"opt_lamb_learning_rate_decay_poly_power", config_.number("poly_power")},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    seed_torch(settings_);
    require_data_dir(kDataset);
    model_ = BertForPreTraining(model_options(config_));
    const std::string checkpoint = config_.string("init_checkpoint");
    if (!settings_.weights.empty()) {  // instead of init_checkpoint
      load_checkpoint(model_, settings_.weights);
    } else if (!checkpoint.empty()) {
      // A relative path is inside the dataset directory, where the MLPerf package keeps its checkpoint.
      const fs::path path = fs::path(checkpoint).is_absolute() ? fs::path(checkpoint) : fs::path(settings_.data_dir) / checkpoint;
      load_checkpoint(model_, path.string());
    }
    model_->to(device_);
    model_->train();
    optimizer_.emplace(make_optimizer(model_, config_));
    gradients_.emplace(*communicator_, model_->parameters(), model_->buffers());  // rank 0's initial weights
    loop_.emplace(config_, device_, model_->parameters(), &*gradients_);
    schedule_ = lr_schedule(config_);
    std::vector<std::string> initialized;
    for (const auto& parameter : model_->named_parameters()) initialized.push_back(mlperf_tensor_name(parameter.key()));
    initialized.push_back("cls/predictions/decoder/kernel");  // the rules list the tied decoder separately
    return initialized;
  }

  // --save-model: the trained model as NVIDIA's BertForPretraining state dict.
  void save_weights(const std::string& path) const override { save_official_checkpoint(model_, path); }

  DataSummary open_data() override {
    train_.emplace(data::list_bert_shards((fs::path(settings_.data_dir) / "train").string()));
    eval_.emplace(data::list_bert_shards((fs::path(settings_.data_dir) / "eval").string()));
    for (const auto* shards : {&*train_, &*eval_})
      if (shards->seq_length() != config_.integer("seq_length") || shards->max_predictions() != config_.integer("max_predictions"))
        fail(shards->files().front(), "has sequence length " + std::to_string(shards->seq_length()) + " and " +
                                          std::to_string(shards->max_predictions()) + " predictions, but " + config_.name() +
                                          " expects seq_length " + std::to_string(config_.integer("seq_length")) +
                                          " and max_predictions " + std::to_string(config_.integer("max_predictions")));
    order_.emplace(*train_, static_cast<uint64_t>(settings_.seed));
    eval_count_ = std::min(eval_->size(), config_.integer("eval_samples"));
    DataSummary summary;
    summary.train_samples = train_->size();
    summary.eval_samples = eval_count_;
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    model_->train();
    const int64_t batch_size = config_.integer("batch_size");  // global
    loop_->begin_block(control);
    // Blocks are in samples; a block ends at the first whole batch that reaches its last sample.
    while (static_cast<double>(loop_->updates() * batch_size) < block.last_epoch_num()) {
      PretrainingBatch batch = loop_->fetch([&] {
        return make_batch(
            train_->gather(order_->batch(loop_->updates(), batch_size, communicator_->rank(), communicator_->world())),
            device_);
      });
      loop_->train(training_step(model_, *optimizer_, std::move(batch), schedule_.at(loop_->updates())));
    }
    return loop_->end_block();
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    model_->eval();
    const int64_t batch_size = config_.integer("eval_batch_size");
    int64_t correct = 0, total = 0;
    const auto [begin, end] = data::eval_range(eval_count_, communicator_->rank(), communicator_->world());
    for (int64_t first = begin; first < end; first += batch_size) {
      std::vector<int64_t> indices;
      for (int64_t i = first; i < std::min(end, first + batch_size); ++i) indices.push_back(i);
      const PretrainingBatch batch = make_batch(eval_->gather(indices), device_);
      correct += masked_lm_correct(model_, batch);
      total += batch.masked_lm_ids.size(0);
      control.check_interrupt();
    }
    model_->train();
    return fraction_over_ranks(static_cast<double>(correct), static_cast<double>(total), eval_->files().front(),
                               "the evaluation samples have no masked positions");
  }

 private:
  BertForPreTraining model_{nullptr};
  std::optional<Lamb> optimizer_;
  std::optional<parallel::GradientSync> gradients_;
  std::optional<TrainingLoop> loop_;
  BertLrSchedule schedule_;
  std::optional<data::BertShardSet> train_, eval_;
  std::optional<data::BertTrainOrder> order_;
  int64_t eval_count_ = 0;
};

void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  if (!config.values().contains("dataset"))
    fail("--preset " + config.name(), "has no generated dataset; pass --data with train/ and eval/ folders of MLPerf BERT HDF5 shards");
  const Config dataset(config.name() + ": dataset", config.values().at("dataset"));
  data::BertDatasetOptions options;
  options.pretraining.seq_length = config.integer("seq_length");
  options.pretraining.max_predictions = config.integer("max_predictions");
  options.pretraining.masked_lm_prob = dataset.number("masked_lm_prob");
  options.pretraining.short_seq_prob = dataset.number("short_seq_prob");
  options.pretraining.dupe_factor = dataset.integer("dupe_factor");
  options.pretraining.seed = static_cast<uint64_t>(seed);
  options.corpus = dataset.string("corpus");
  options.eval_every_nth_document = dataset.integer("eval_every_nth_document");
  options.eval_samples = dataset.integer("eval_samples");
  options.train_shards = dataset.integer("train_shards");
  // A staging folder renamed at the end: a failed make leaves nothing a retry would refuse.
  data::write_new_dataset_directory(out_dir, [&](const fs::path& staging) { data::make_bert_dataset(staging.string(), options); });
}

void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out) {
  const Config& config = settings.config;
  BenchRun run(settings, bench_settings);
  const torch::Device device = run.device;
  const int64_t batch_size = run.local_batch, seq = config.integer("seq_length"), preds = config.integer("max_predictions");
  BertForPreTraining model(model_options(config));
  model->to(device);
  model->train();
  Lamb optimizer = make_optimizer(model, config);
  // Training throughput on one synthetic batch already in memory (full-length sequences, every prediction
  // slot used), so the number is the compute side alone.
  data::BertSamples samples;
  samples.seq_length = seq;
  samples.max_predictions = preds;
  samples.input_ids.resize(static_cast<size_t>(batch_size * seq));
  for (size_t i = 0; i < samples.input_ids.size(); ++i) samples.input_ids[i] = static_cast<int32_t>(1000 + (i * 7919) % 20000);
  samples.input_mask.assign(static_cast<size_t>(batch_size * seq), 1);
  samples.segment_ids.resize(static_cast<size_t>(batch_size * seq));
  for (size_t i = 0; i < samples.segment_ids.size(); ++i) samples.segment_ids[i] = static_cast<int8_t>(i % seq >= static_cast<size_t>(seq / 2));
  for (int64_t n = 0; n < batch_size; ++n)
    for (int64_t k = 0; k < preds; ++k) {
      samples.masked_lm_positions.push_back(static_cast<int32_t>(1 + k * (seq - 2) / preds));
      samples.masked_lm_ids.push_back(static_cast<int32_t>(2000 + n + k));
    }
  samples.next_sentence_labels.resize(static_cast<size_t>(batch_size));
  for (int64_t n = 0; n < batch_size; ++n) samples.next_sentence_labels[static_cast<size_t>(n)] = static_cast<int8_t>(n % 2);
  const PretrainingBatch batch = make_batch(samples, device);
  // The whole data-parallel step, as training runs it: each rank's share of the global batch, gradients
  // averaged over the ranks.
  parallel::GradientSync gradients(*run.communicator, model->parameters(), model->buffers());
  TrainingLoop loop(config, device, model->parameters(), &gradients);
  const double step_time = run.training_step_seconds([&] { loop.update(training_step(model, optimizer, batch, 1e-4)); });
  const double flops_per_sequence = 3.0 * 2.0 * model->forward_macs(batch_size, seq, batch_size * preds) / batch_size;
  run.print_training(out, step_time, "seq", flops_per_sequence,
                     "seq " + std::to_string(seq) + ", " + std::to_string(preds) + " predictions");
}

// checkpoint export: the model a run of `settings` starts from (the seeded initialization, or --weights; the
// preset's init_checkpoint is a run's, read from its dataset directory), as NVIDIA's BertForPretraining state dict.
void export_weights(const WorkloadSettings& settings, const std::string& out_path) {
  seed_torch(settings);
  BertForPreTraining model(model_options(settings.config));
  if (!settings.weights.empty()) load_checkpoint(model, settings.weights);
  save_official_checkpoint(model, out_path);
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"bert", "Language model: BERT-Large pre-training on Wikipedia, target masked-LM accuracy 0.720",
          trainbench_presets_bert, kDataset, construct_workload<BertWorkload>, bench, make_dataset,
          /*prepare_dataset=*/nullptr, export_weights};
}

}  // namespace trainbench::bert
