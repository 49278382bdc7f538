// The large-language-model benchmark of the later rounds (MLPerf "gpt3"): GPT-3 175B pre-training on C4 from a
// given checkpoint to a validation log perplexity of 2.69, under a 3-D parallel plan.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <torch/torch.h>

#include "data/bert_shards.h"  // eval_range
#include "data/generators/dataset_directory.h"
#include "data/generators/gpt3_text.h"
#include "data/gpt_samples.h"
#include "util/error.h"
#include "workloads/common.h"
#include "workloads/gpt3/settings.h"
#include "workloads/gpt3/trainer.h"
#include "workloads/model_parallel.h"

extern const char* const trainbench_presets_gpt3;

namespace trainbench::gpt3 {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset =
    "Megatron indexed datasets (.bin/.idx) of C4 tokenized with the reference's "
    "SentencePiece model (`trainbench data prepare gpt3`)";

// Megatron's data-path argument: "weight prefix weight prefix …", or a single prefix of weight 1.
std::vector<std::pair<double, std::string>> parse_blend(const std::string& text, const std::string& where) {
  std::istringstream words(text);
  std::vector<std::string> items{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
  if (items.size() == 1) return {{1.0, items[0]}};
  if (items.empty() || items.size() % 2 != 0)
    fail(where, "expected one prefix or \"weight prefix weight prefix ...\", got \"" + text + "\"");
  std::vector<std::pair<double, std::string>> blend;
  for (size_t i = 0; i < items.size(); i += 2) {
    char* end = nullptr;
    const double weight = std::strtod(items[i].c_str(), &end);
    if (*end != '\0' || !(weight > 0) || !std::isfinite(weight))
      fail(where, "weight \"" + items[i] + "\" is not a positive number");
    blend.emplace_back(weight, items[i + 1]);
  }
  return blend;
}

std::shared_ptr<const data::IndexedDataset> open_indexed(const std::string& data_dir, const std::string& prefix) {
  const fs::path path(prefix);
  return std::make_shared<const data::IndexedDataset>((path.is_absolute() ? path : fs::path(data_dir) / path).string());
}

// Every document of a dataset: the reference trains with --split 100,0,0.
std::vector<int32_t> all_documents(const data::IndexedDataset& dataset) {
  std::vector<int32_t> documents(static_cast<size_t>(dataset.num_documents()));
  for (size_t i = 0; i < documents.size(); ++i) documents[i] = static_cast<int32_t>(i);
  return documents;
}

// The rules' evaluation interval: CEIL(24576 / batch) steps, unless the preset sets its own.
int64_t eval_interval_samples(const Settings& preset) {
  if (preset.eval_interval_samples) return *preset.eval_interval_samples;
  return (24576 + preset.batch_size - 1) / preset.batch_size * preset.batch_size;
}

// The rule across settings that no range of settings.json states (the widths are plan_for's), checked before the
// log opens.
void check_settings(const Config& config, const Settings& preset) {
  const GptLrSchedule schedule = lr_schedule(preset);
  if (schedule.decay_steps <= schedule.warmup_steps)
    fail(config.name() + ": decay_steps", std::to_string(schedule.decay_steps) + " must be more than warmup_steps " +
                                              std::to_string(schedule.warmup_steps));
}

torch::Tensor sequences_tensor(const std::vector<int32_t>& tokens, int64_t rows, int64_t length, torch::Device device) {
  return torch::from_blob(const_cast<int32_t*>(tokens.data()), {rows, length}, torch::kInt).to(device, torch::kLong);
}

class GptWorkload : public WorkloadBase {
 public:
  explicit GptWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(read_settings<Settings>(config_)) {
    check_settings(config_, preset_);
    require_preset_path(settings_, "init_checkpoint", preset_.init_checkpoint);
    plan_ = plan_for(config_, preset_, communicator_->world());  // before the log opens
    schedule_ = lr_schedule(preset_);
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("seq");
    // In tokens, as NVIDIA's v3.0 logs count epoch_num and the RCP table counts tokens to converge.
    const double tokens_per_sample = static_cast<double>(preset_.seq_length);
    const double interval = static_cast<double>(eval_interval_samples(preset_)) * tokens_per_sample;
    description.schedule.first_block = interval;
    description.schedule.interval = interval;
    description.schedule.max_epochs = static_cast<double>(preset_.max_samples) * tokens_per_sample;
    description.schedule.unit = ScheduleUnit::kTokens;
    description.schedule.units_per_sample = tokens_per_sample;
    description.hyperparameters = {
        {"global_batch_size", preset_.batch_size},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", "adam"},
        {"max_sequence_length", preset_.seq_length},
        {"opt_base_learning_rate", schedule_.base},
        {"opt_end_learning_rate", schedule_.end},
        {"opt_learning_rate_warmup_steps", schedule_.warmup_steps},
        {"opt_learning_rate_decay_steps", schedule_.decay_steps},
        {"opt_learning_rate_decay_schedule", "cosine with linear warmup"},
        {"opt_adam_beta_1", preset_.beta1},
        {"opt_adam_beta_2", preset_.beta2},
        {"opt_adam_epsilon", preset_.epsilon},
        {"opt_gradient_clip_norm", preset_.max_grad_norm},
        {"init_checkpoint_step", schedule_.init_checkpoint_step},
        {"trainbench_weight_decay", preset_.weight_decay},
        {"trainbench_model", config_.string("summary")},
    };
    add_plan_hyperparameters(plan_, description.hyperparameters);
    return description;
  }

  std::vector<std::string> build() override {
    require_data_dir(kDataset);
    trainer_ = std::make_unique<GptTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override {
    std::vector<std::shared_ptr<const data::GptSamples>> parts;
    std::vector<double> weights;
    for (const auto& [weight, prefix] : parse_blend(preset_.train_data, config_.name() + ": train_data"))
      weights.push_back(weight);
    const std::vector<int64_t> per_dataset = data::blend_num_samples(weights, preset_.max_samples);
    size_t i = 0;
    for (const auto& [weight, prefix] : parse_blend(preset_.train_data, config_.name() + ": train_data")) {
      const auto dataset = open_indexed(settings_.data_dir, prefix);
      parts.push_back(std::make_shared<const data::GptSamples>(dataset, sample_spec(*dataset, per_dataset[i++])));
    }
    train_.emplace(parts, weights);
    const auto valid = open_indexed(settings_.data_dir, preset_.valid_data);
    valid_.emplace(valid, sample_spec(*valid, -1));  // one epoch, every token
    eval_count_ = std::min(valid_->size(), preset_.eval_samples);
    DataSummary summary;
    summary.train_samples = train_->size();
    summary.eval_samples = eval_count_;
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    trainer_->model()->train();
    TrainingLoop& loop = trainer_->loop();
    const int64_t batch_size = preset_.batch_size;  // global
    // The ranks of one model replica (its tensor-parallel and pipeline ranks) read the same rows.
    parallel::Communicator& data = trainer_->context().data_parallel();
    const int64_t rows = batch_size / data.world(), length = train_->sample_length();
    loop.begin_block(control);
    while (static_cast<double>(loop.updates() * batch_size * preset_.seq_length) < block.last_epoch_num()) {
      TokenBatch batch = loop.fetch([&] {
        std::vector<int32_t> tokens(static_cast<size_t>(rows * length));
        const int64_t first = loop.updates() * batch_size + data.rank() * rows;
        for (int64_t row = 0; row < rows; ++row)
          train_->sample((first + row) % preset_.max_samples, tokens.data() + row * length);
        return TokenBatch::of(sequences_tensor(tokens, rows, length, device_));
      });
      loop.train(trainer_->step(std::move(batch), schedule_.at(loop.updates())));
    }
    return loop.end_block();
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    GptModel& model = trainer_->model();
    model->eval();
    const parallel::ParallelContext& context = trainer_->context();
    const auto [begin, end] =
        data::eval_range(eval_count_, context.data_parallel().rank(), context.data_parallel().world());
    const int64_t length = valid_->sample_length();
    double loss_sum = 0, tokens = 0;
    for (int64_t first = begin; first < end; first += preset_.eval_batch_size) {
      const int64_t rows = std::min(end, first + preset_.eval_batch_size) - first;
      std::vector<int32_t> sequence_tokens(static_cast<size_t>(rows * length));
      for (int64_t row = 0; row < rows; ++row) valid_->sample(first + row, sequence_tokens.data() + row * length);
      const auto [batch_loss, batch_tokens] =
          trainer_->evaluation_sums(TokenBatch::of(sequences_tensor(sequence_tokens, rows, length, device_)));
      loss_sum += batch_loss;
      tokens += batch_tokens;
      control.check_interrupt();
    }
    model->train();
    // The log perplexity: summed token losses over the tokens counted, each counted once over the world.
    return fraction_over_ranks(loss_sum, tokens, preset_.valid_data, "the validation set has no tokens");
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  data::GptSampleSpec sample_spec(const data::IndexedDataset& dataset, int64_t num_samples) const {
    data::GptSampleSpec spec;
    spec.documents = all_documents(dataset);
    spec.num_samples = num_samples;
    spec.seq_length = static_cast<int32_t>(preset_.seq_length);
    spec.seed = static_cast<uint32_t>(settings_.seed);
    spec.seq_len_plus_one_tokens = false;  // run_gpt3.sh: --no-seq-len-plus-one-tokens
    return spec;
  }

  const Settings preset_;
  parallel::ParallelPlan plan_;
  GptLrSchedule schedule_;
  std::unique_ptr<GptTrainer> trainer_;
  std::optional<data::BlendedSamples> train_;
  std::optional<data::GptSamples> valid_;
  int64_t eval_count_ = 0;
};

// The mini's starting checkpoint, as the reference's is 4000 steps of the same training: pretraining_steps updates
// of the preset's model on the training set from the seeded initialization, on the preset's schedule (so a run
// from it continues that schedule at init_checkpoint_step), on this process alone. Deterministic for the seed.
void pretrain_starting_checkpoint(const Config& config, const Settings& preset, const fs::path& dataset, int64_t seed) {
  WorkloadSettings settings;
  settings.config = config;
  settings.data_dir = dataset.string();
  settings.device = "cpu";
  settings.seed = seed;
  const parallel::ParallelContext alone{parallel::Communicator::connect({}), torch::kCPU};
  GptTrainer trainer(settings, alone, TrainerPurpose::kBench);  // the seeded model, not init_checkpoint
  const int64_t steps = preset.dataset->pretraining_steps, batch_size = preset.batch_size;
  const auto train = open_indexed(dataset.string(), preset.train_data);
  data::GptSampleSpec spec;
  spec.documents = all_documents(*train);
  spec.num_samples = steps * batch_size;
  spec.seq_length = static_cast<int32_t>(preset.seq_length);
  spec.seed = static_cast<uint32_t>(seed);
  spec.seq_len_plus_one_tokens = false;
  const data::GptSamples samples(train, spec);
  GptLrSchedule schedule = lr_schedule(preset);
  schedule.init_checkpoint_step = 0;
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int32_t> tokens(static_cast<size_t>(batch_size * preset.seq_length));
    for (int64_t row = 0; row < batch_size; ++row)
      samples.sample((step * batch_size + row) % samples.size(), tokens.data() + row * preset.seq_length);
    trainer.loop().update(trainer.step(
        TokenBatch::of(sequences_tensor(tokens, batch_size, preset.seq_length, torch::kCPU)), schedule.at(step)));
  }
  trainer.save_model((dataset / preset.init_checkpoint).string());
}

void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const Settings preset = read_settings<Settings>(config);
  if (!preset.dataset)
    fail("--preset " + config.name(), std::string("has no generated dataset; pass --data with ") + kDataset);
  if (preset.init_checkpoint.empty() || fs::path(preset.init_checkpoint).is_absolute())
    fail(config.name() + ": init_checkpoint", "the generated dataset's starting checkpoint needs a relative path");
  if (preset.init_checkpoint_step != preset.dataset->pretraining_steps)
    fail(config.name() + ": init_checkpoint_step", "must equal dataset.pretraining_steps (" +
                                                       std::to_string(preset.dataset->pretraining_steps) +
                                                       "): the run continues the starting checkpoint's schedule");
  data::Gpt3CorpusOptions options;
  options.vocab_size = preset.dataset->spm_vocab_size;
  options.validation_every = preset.dataset->documents_per_validation_document;
  options.seed = static_cast<uint64_t>(seed);
  if (options.vocab_size != preset.vocab_size)
    fail(config.name() + ": dataset.spm_vocab_size",
         std::to_string(options.vocab_size) + " differs from vocab_size " + std::to_string(preset.vocab_size));
  data::write_new_dataset_directory(out_dir, [&](const fs::path& staging) {
    data::make_gpt3_corpus(options, staging.string());
    pretrain_starting_checkpoint(config, preset, staging, seed);
  });
}

// The C4 files of the reference's README layout under `c4_path`: en_merge/c4-train.en_{6,7}.json.gz (the merged
// shards) and c4-validation_24567exp.json; where neither is there, every .json(.gz) file in c4_path itself.
std::vector<std::string> c4_inputs(const fs::path& c4_path) {
  std::vector<std::string> inputs;
  for (const fs::path& file : {c4_path / "en_merge/c4-train.en_6.json.gz", c4_path / "en_merge/c4-train.en_7.json.gz",
                               c4_path / "c4-validation_24567exp.json"})
    if (fs::is_regular_file(file)) inputs.push_back(file.string());
  if (!inputs.empty()) return inputs;
  for (const auto& entry : fs::directory_iterator(c4_path))
    if (entry.is_regular_file() && entry.path().filename().string().find(".json") != std::string::npos)
      inputs.push_back(entry.path().string());
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty())
    fail(c4_path.string(),
         "holds neither en_merge/c4-train.en_{6,7}.json.gz and c4-validation_24567exp.json nor any "
         ".json or .json.gz file");
  return inputs;
}

// `data prepare gpt3 --in C4_PATH [--spm MODEL]`: the C4 files tokenized with the reference's SentencePiece model,
// `tokenizer_model` or where its README puts it (C4_PATH/tokenizers/c4_spm/sentencepiece.model), as run_gpt3.sh
// reads them.
void prepare_dataset(const Config& config, const std::string& in_dir, const std::string& out_dir) {
  const Settings preset = read_settings<Settings>(config);
  const bool given = !preset.tokenizer_model.empty();
  const fs::path model =
      given ? fs::path(preset.tokenizer_model) : fs::path(in_dir) / "tokenizers/c4_spm/sentencepiece.model";
  if (!fs::is_regular_file(model))
    fail(given ? config.name() + ": tokenizer_model " + model.string() : model.string(),
         "is missing: the reference's C4 SentencePiece model (c4_en_301_5Mexp2_spm.model), or pass --spm MODEL");
  for (const auto& file : data::prepare_gpt3_dataset(c4_inputs(in_dir), model.string(), out_dir))
    std::cout << "  " << file.input << " -> " << file.prefix << ": " << file.documents << " documents, " << file.tokens
              << " tokens\n";
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"gpt3",
          "Large language model: GPT-3 175B pre-training on C4 from the reference checkpoint, target log perplexity "
          "2.69",
          trainbench_presets_gpt3,
          kDataset,
          construct_workload<GptWorkload>,
          construct_trainer<GptTrainer>,
          make_dataset,
          prepare_dataset,
          print_plan,
          /*model_file_suffix=*/""};  // a checkpoint directory, as the reference's
}

}  // namespace trainbench::gpt3
