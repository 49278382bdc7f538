// The speech recognition benchmark (MLPerf "rnnt"): RNN-T on LibriSpeech, LAMB, EMA weights evaluated by
// greedy decoding, corpus word error rate (lower is better).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "data/random.h"
#include "parallel/communicator.h"
#include "parallel/gradient_sync.h"
#include "speech/librispeech.h"
#include "speech/loader.h"
#include "speech/synthetic.h"
#include "speech/text.h"
#include "util/error.h"
#include "util/file_digest.h"
#include "optim/lamb.h"
#include "workloads/common.h"
#include "workloads/rnnt/model.h"
#include "workloads/rnnt/settings.h"
#include "workloads/trainer.h"

extern const char* const trainbench_presets_rnnt;

namespace trainbench::rnnt {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset =
    "LibriSpeech subsets (SUBSET/SPEAKER/CHAPTER/*.flac with *.trans.txt, or the reference's "
    "librispeech-SUBSET-wav.json manifests) and sentencepieces/librispeechVOCAB.model";

RnntOptions model_options(const Settings& preset) {
  const speech::FeatureOptions features;
  return RnntOptions()
      .input_features(features.output_dims())
      .encoder_hidden(preset.encoder_hidden)
      .encoder_pre_layers(preset.encoder_pre_layers)
      .encoder_post_layers(preset.encoder_post_layers)
      .stack_time_factor(preset.stack_time_factor)
      .prediction_hidden(preset.prediction_hidden)
      .prediction_layers(preset.prediction_layers)
      .joint_hidden(preset.joint_hidden)
      .vocab_size(preset.vocab_size)
      .encoder_dropout(preset.encoder_dropout)
      .prediction_dropout(preset.prediction_dropout)
      .joint_dropout(preset.joint_dropout)
      .forget_gate_bias(preset.forget_gate_bias)
      .weights_init_scale(preset.weights_init_scale)
      .hidden_hidden_bias_scale(preset.hidden_hidden_bias_scale);
}

optim::LambOptions lamb_options(const Settings& preset) {
  optim::LambOptions options;
  options.beta1(preset.beta1).beta2(preset.beta2).epsilon(preset.epsilon);
  options.weight_decay(preset.weight_decay).max_grad_norm(preset.max_grad_norm);
  return options;
}

// A batch from the loader as tensors on `device` (no copy on the CPU: the batch must outlive them).
struct BatchTensors {
  torch::Tensor features, frame_counts, tokens, token_counts;
};
BatchTensors as_tensors(speech::SpeechBatch& batch, torch::Device device) {
  return {torch::from_blob(batch.features.data(), {batch.size, batch.max_frames, batch.feature_dims}, torch::kFloat32).to(device),
          torch::from_blob(batch.frame_counts.data(), {batch.size}, torch::kInt64).to(device),
          torch::from_blob(batch.tokens.data(), {batch.size, batch.max_tokens}, torch::kInt64).to(device),
          torch::from_blob(batch.token_counts.data(), {batch.size}, torch::kInt64).to(device)};
}

// A run reads each subset from its manifest, as the reference does: a one-time conversion wrote the
// durations there. Taking them from every FLAC's header instead would touch the dataset inside the timed
// region (281,241 files for the reference's training set; audit R5).
std::vector<speech::Utterance> read_manifest(const std::string& root, const std::string& subset) {
  const fs::path manifest = fs::path(root) / ("librispeech-" + subset + "-wav.json");
  if (!fs::exists(manifest))
    fail(manifest.string(), "not found: a run reads each subset's manifest; `trainbench data prepare rnnt --in LIBRISPEECH "
                            "--out DIR` writes them once from a LibriSpeech tree (then --data DIR)");
  return speech::read_librispeech_manifest(manifest.string(), root);
}

// The seeded model, or --weights, under the reference's rnnt/model.py names, on `device` in training mode.
Rnnt starting_model(const WorkloadSettings& settings, const Settings& preset, const torch::Device& device) {
  seed_torch(settings);
  Rnnt model(model_options(preset));
  if (!settings.weights.empty()) load_state_dict(settings.weights, official_state(model));
  model->to(device);
  model->train();
  return model;
}

// The weights' moving average a run evaluates, starting from `model`'s (after rank 0's were broadcast). Only a run
// has one: a bench times the step without it, and an export writes the starting model, which it equals.
Rnnt ema_model(const Settings& preset, const Rnnt& model, const torch::Device& device, TrainerPurpose purpose) {
  if (purpose != TrainerPurpose::kRun) return nullptr;
  Rnnt ema(model_options(preset));
  ema->to(device);
  update_ema(ema, model, 0.0);
  ema->eval();
  return ema;
}

// bench: a batch of bench_utterance_seconds utterances with bench_tokens tokens each, already in memory.
struct BenchBatch {
  int64_t frames = 0;
  torch::Tensor features, frame_counts, tokens, token_counts;
};

// bench: the feature pipeline on one thread, training mode (speed perturbation and SpecAugment included).
void bench_features(const BenchRun& run, double seconds, std::ostream& out) {
  const speech::FeaturePipeline pipeline{speech::FeatureOptions{}};
  data::Rng rng(static_cast<uint64_t>(run.settings.seed));
  std::vector<float> audio(static_cast<size_t>(seconds * 16000));
  for (float& sample : audio) sample = static_cast<float>(0.1 * speech::standard_normal(rng));
  const int64_t utterances = std::max<int64_t>(8, run.bench.steps);
  const auto begin = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < utterances; ++i) pipeline.compute(audio, true, rng);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  char line[256];
  std::snprintf(line, sizeof line,
                "features      %10.1f utt/s  (%.1f s utterances, training pipeline, 1 thread, %lld utterances: %.5f "
                "s/utt)\n",
                static_cast<double>(utterances) / elapsed, seconds, static_cast<long long>(utterances),
                elapsed / utterances);
  out << line;
}

// RNN-T's model, its EMA, LAMB, gradient exchange and loop, as a run, a bench and an export build them.
class RnntTrainer : public TrainerOf<Settings> {
 public:
  RnntTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose purpose)
      : TrainerOf(settings, context),
        model_(starting_model(settings, preset_, context.device)),
        gradients_(*context.world, model_->parameters(), std::vector<torch::Tensor>{}),
        ema_(ema_model(preset_, model_, context.device, purpose)),
        optimizer_(optim::all_decaying(model_->parameters()), lamb_options(preset_)),
        loop_(config_, context.device, model_->parameters(), &gradients_) {}

  // One update on a batch at `learning_rate`, and the EMA's where there is one.
  TrainingStep step(const torch::Tensor& features, const torch::Tensor& frame_counts, const torch::Tensor& tokens,
                    const torch::Tensor& token_counts, double learning_rate) {
    return training_step(model_, optimizer_, features, frame_counts, tokens, token_counts, learning_rate, ema_,
                         preset_.ema);
  }
  Rnnt& model() { return model_; }
  Rnnt& ema() { return ema_; }
  TrainingLoop& loop() { return loop_; }
  parallel::GradientSync* gradient_exchange() override { return &gradients_; }

  std::vector<std::string> initialized_tensors() const override { return RnntImpl::initialized_tensor_names(); }

  // A run's model is the EMA, as the reference's evaluation uses it; an export's, the starting model.
  void save_model(const std::string& path) const override {
    save_state_dict(official_state(ema_.is_empty() ? model_ : ema_), path);
  }

  SyntheticStep synthetic_step(BenchRun& run) override {
    const int64_t batch = run.local_batch, token_count = preset_.bench_tokens;
    const speech::FeaturePipeline pipeline{speech::FeatureOptions{}};
    bench_.frames = pipeline.output_frames(static_cast<int64_t>(preset_.bench_utterance_seconds * 16000));
    const auto long_options = torch::TensorOptions(torch::kInt64).device(context_.device);
    bench_.features = torch::randn({batch, bench_.frames, pipeline.options().output_dims()}, context_.device);
    bench_.frame_counts = torch::full({batch}, bench_.frames, long_options);
    bench_.tokens = torch::randint(preset_.vocab_size, {batch, token_count}, long_options);
    bench_.token_counts = torch::full({batch}, token_count, long_options);
    char details[160];
    std::snprintf(details, sizeof details, "%.1f s utterances, %lld tokens", preset_.bench_utterance_seconds,
                  static_cast<long long>(token_count));
    // Backward costs about twice the forward: 3 x forward, 2 FLOPs per multiply-accumulate.
    return {[this] {
              loop_.update(step(bench_.features, bench_.frame_counts, bench_.tokens, bench_.token_counts, 1e-3));
            },
            "utt", 6.0 * static_cast<double>(model_->forward_macs(bench_.frames, token_count)), details};
  }

  void bench_after_training(BenchRun& run, std::ostream& out, double) override {
    bench_loss(run, out);
    bench_features(run, preset_.bench_utterance_seconds, out);
  }

 private:
  // The loss alone: lattice forward-backward plus log-softmax, on the packed logits of the bench batch's lattices.
  void bench_loss(BenchRun& run, std::ostream& out) {
    const int64_t batch = run.local_batch, token_count = preset_.bench_tokens;
    const int64_t stack = model_->options().stack_time_factor(), blank = model_->options().blank();
    const int64_t steps = (bench_.frames + stack - 1) / stack;
    const auto long_options = torch::TensorOptions(torch::kInt64).device(context_.device);
    const torch::Tensor step_counts = torch::full({batch}, steps, long_options);
    const LatticeCells cells = lattice_cells(step_counts, bench_.token_counts, bench_.tokens, steps, token_count, blank,
                                             context_.device);
    const torch::Tensor logits =
        torch::randn({cells.count(), preset_.vocab_size + 1}, context_.device).requires_grad_();
    const double loss_time = run.median_step_seconds([&] {
      const torch::Tensor loss = packed_rnnt_loss(logits, cells, step_counts, bench_.token_counts, blank).sum();
      loss.backward();
      loss.item<double>();
    });
    char line[256];
    std::snprintf(line, sizeof line,
                  "loss          %10.1f utt/s  (%lld x %lld x %lld lattice, %lld classes, forward and backward: %.5f "
                  "s/batch)\n",
                  static_cast<double>(batch) / loss_time, static_cast<long long>(batch), static_cast<long long>(steps),
                  static_cast<long long>(token_count + 1), static_cast<long long>(preset_.vocab_size + 1), loss_time);
    out << line;
  }

  Rnnt model_;
  parallel::GradientSync gradients_;
  Rnnt ema_;  // empty but in a run
  optim::Lamb optimizer_;
  TrainingLoop loop_;
  BenchBatch bench_;
};

class RnntWorkload : public WorkloadBase {
 public:
  explicit RnntWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(read_settings<Settings>(config_)) {}

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("utt");
    description.schedule.max_epochs = static_cast<double>(preset_.max_epochs);
    const speech::FeatureOptions features;
    description.hyperparameters = {
        {"global_batch_size", preset_.batch_size},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", "lamb"},
        {"opt_base_learning_rate", preset_.learning_rate},
        {"opt_lamb_epsilon", preset_.epsilon},
        {"opt_weight_decay", preset_.weight_decay},
        {"opt_gradient_clip_norm", preset_.max_grad_norm},
        {"opt_lamb_beta_1", preset_.beta1},
        {"opt_lamb_beta_2", preset_.beta2},
        {"opt_learning_rate_alt_decay_func", true},
        {"opt_learning_rate_alt_warmup_func", true},
        {"opt_lamb_learning_rate_min", preset_.min_learning_rate},
        {"opt_lamb_learning_rate_decay_poly_power", preset_.lr_exp_gamma},
        {"opt_learning_rate_warmup_epochs", preset_.warmup_epochs},
        {"opt_lamb_learning_rate_hold_epochs", preset_.hold_epochs},
        {"model_weights_initialization_scale", preset_.weights_init_scale},
        {"model_eval_ema_factor", preset_.ema},
        {"data_train_max_duration", preset_.max_duration},
        {"data_train_num_buckets", preset_.num_buckets},
        {"data_speed_perturbaton_min", features.speed_min},
        {"data_speed_perturbaton_max", features.speed_max},
        {"data_spec_augment_freq_n", features.freq_masks},
        {"data_spec_augment_freq_min", 0},
        {"data_spec_augment_freq_max", features.freq_mask_max},
        {"data_spec_augment_time_n", features.time_masks},
        {"data_spec_augment_time_min", 0},
        {"data_spec_augment_time_max", features.time_mask_max_fraction},
        {"eval_max_prediction_symbols", preset_.max_symbols_per_sample},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    require_data_dir(kDataset);
    trainer_ = std::make_unique<RnntTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override {
    // Checked here, not at construction: describing a preset (the reference's 4 workers) needs no such CPUs.
    const int workers = loader_threads(config_, "loader_workers");
    const std::string root = settings_.data_dir;
    const int vocab = static_cast<int>(preset_.vocab_size);
    tokenizer_.emplace(speech::sentencepiece_model_path(root, vocab));
    if (tokenizer_->vocab_size() != vocab)
      fail(speech::sentencepiece_model_path(root, vocab),
           "holds " + std::to_string(tokenizer_->vocab_size()) + " pieces; the preset's vocab_size is " + std::to_string(vocab));
    std::vector<speech::Utterance> train;
    for (const std::string& subset : preset_.training_subsets()) {
      std::vector<speech::Utterance> part = read_manifest(root, subset);
      train.insert(train.end(), part.begin(), part.end());
    }
    const size_t unfiltered = train.size();
    train = speech::filter_by_duration(std::move(train), preset_.max_duration);
    if (train.empty())
      fail(config_.name() + ": max_duration", config_.values().at("max_duration").dump() + " s leaves none of the " +
                                                  std::to_string(unfiltered) + " training utterances");
    std::vector<speech::Utterance> eval = read_manifest(root, preset_.eval_subset);
    std::vector<std::vector<int>> train_tokens, eval_tokens;
    for (const auto& utterance : train) {
      train_tokens.push_back(tokenizer_->encode(utterance.transcript));
      durations_.push_back(utterance.duration);
    }
    for (const auto& utterance : eval) {
      eval_tokens.push_back(tokenizer_->encode(utterance.transcript));
      // References are compared as the tokenizer gives them back, as the reference's evaluation does.
      references_.push_back(tokenizer_->decode(eval_tokens.back()));
    }
    speech::SpeechLoaderOptions train_options;
    train_options.train = true;
    train_options.workers = workers;
    train_options.seed = static_cast<uint64_t>(settings_.seed);
    speech::SpeechLoaderOptions eval_options = train_options;
    eval_options.train = false;
    const auto eval_count = static_cast<int64_t>(eval.size());
    train_loader_.emplace(std::move(train), std::move(train_tokens), speech::FeatureOptions{}, train_options);
    eval_loader_.emplace(std::move(eval), std::move(eval_tokens), speech::FeatureOptions{}, eval_options);

    const int64_t global_batch = preset_.batch_size;
    local_batch("batch_size");  // each rank's share must be whole
    steps_per_epoch_ = static_cast<int64_t>(durations_.size()) / global_batch;
    if (steps_per_epoch_ == 0)
      fail(config_.name() + ": batch_size", std::to_string(durations_.size()) + " training utterances (after the " +
                                                std::to_string(preset_.max_duration) + " s filter) do not fill one batch of " +
                                                std::to_string(global_batch));
    schedule_ = {preset_.learning_rate, preset_.warmup_epochs, preset_.hold_epochs,
                 steps_per_epoch_, preset_.lr_exp_gamma, preset_.min_learning_rate};
    DataSummary summary;
    summary.train_samples = steps_per_epoch_ * global_batch;
    summary.eval_samples = eval_count;
    // Which tokenizer the targets came from: another sentencepiece build trained on the same transcripts can
    // cut other pieces (audit R2), so the log names the model file by its md5.
    summary.derived_hyperparameters.push_back({"trainbench_tokenizer_md5", md5_hex(speech::sentencepiece_model_path(root, vocab))});
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    trainer_->model()->train();
    TrainingLoop& loop = trainer_->loop();
    loop.begin_block(control);
    for (int64_t epoch = static_cast<int64_t>(block.first_epoch_num);
         epoch < static_cast<int64_t>(block.first_epoch_num + block.epoch_count); ++epoch) {
      loop.fetch([&] {  // the bucketing sampler runs on this thread
        train_loader_->start(speech::rank_share(speech::bucketing_batches(durations_, static_cast<int>(preset_.num_buckets),
                                                                            preset_.batch_size,
                                                                            static_cast<uint64_t>(settings_.seed), epoch),
                                                communicator_->rank(), communicator_->world()),
                             epoch);
      });
      while (std::optional<speech::SpeechBatch> batch = loop.fetch([&] { return train_loader_->next(); })) {
        const BatchTensors tensors = as_tensors(*batch, device_);
        loop.train(trainer_->step(tensors.features, tensors.frame_counts, tensors.tokens, tensors.token_counts,
                                  schedule_.at(loop.updates() + 1, epoch)));
      }
    }
    return loop.end_block();
  }

  Metric evaluate(const Block&, RunControl& control) override {
    // This rank's contiguous share of the evaluation set; errors and words are summed over ranks.
    const auto count = static_cast<int64_t>(references_.size());
    const int64_t rank = communicator_->rank(), world = communicator_->world();
    eval_loader_->start(speech::sequential_batches(rank * count / world, (rank + 1) * count / world,
                                                   preset_.eval_batch_size),
                        0);
    speech::WordErrors errors;
    while (std::optional<speech::SpeechBatch> batch = eval_loader_->next()) {
      const BatchTensors tensors = as_tensors(*batch, device_);
      const std::vector<std::vector<int>> hypotheses =
          greedy_decode(trainer_->ema(), tensors.features, tensors.frame_counts, preset_.max_symbols_per_step,
                        preset_.max_symbols_per_sample);
      for (int64_t i = 0; i < batch->size; ++i)
        errors += speech::word_errors(tokenizer_->decode(hypotheses[static_cast<size_t>(i)]),
                                      references_[static_cast<size_t>(batch->utterances[static_cast<size_t>(i)])]);
      control.check_interrupt();
    }
    return fraction_over_ranks(static_cast<double>(errors.errors), static_cast<double>(errors.words), config_.name(),
                               "the evaluation set has no reference words");
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  const Settings preset_;
  std::unique_ptr<RnntTrainer> trainer_;
  std::optional<speech::Tokenizer> tokenizer_;
  std::optional<speech::SpeechLoader> train_loader_, eval_loader_;
  std::vector<double> durations_;
  std::vector<std::string> references_;
  RnntLrSchedule schedule_;
  int64_t steps_per_epoch_ = 0;
};

// The reference's manifests of `subsets` of the LibriSpeech tree in_dir, written to out_dir with fnames
// relative to it, as the loader confines them: FLACs outside it are reached through out_dir/librispeech, a
// link to in_dir. Returns each subset's transcripts.
std::vector<std::vector<std::string>> write_manifests(const std::string& in_dir, const std::string& out_dir,
                                                      const std::vector<std::string>& subsets) {
  fs::create_directories(out_dir);
  const fs::path source = fs::absolute(in_dir).lexically_normal(), prepared = fs::absolute(out_dir).lexically_normal();
  const fs::path inside = source.lexically_relative(prepared);
  const bool source_inside = !inside.empty() && *inside.begin() != "..";
  const fs::path link = prepared / "librispeech";
  if (!source_inside && !fs::exists(fs::symlink_status(link))) fs::create_directory_symlink(source, link);
  const auto manifest_path = [&](const fs::path& audio) {
    const fs::path within_source = fs::absolute(audio).lexically_normal().lexically_relative(source);
    return (source_inside ? inside / within_source : fs::path("librispeech") / within_source).lexically_normal().generic_string();
  };
  std::vector<std::vector<std::string>> transcripts(subsets.size());
  for (size_t s = 0; s < subsets.size(); ++s) {
    nlohmann::json manifest = nlohmann::json::array();
    for (const speech::Utterance& utterance : speech::read_librispeech_subset(in_dir, subsets[s])) {
      manifest.push_back({{"transcript", utterance.transcript},
                          {"files", {{{"fname", manifest_path(utterance.audio_path)}, {"duration", utterance.duration}, {"speed", 1}}}},
                          {"original_duration", utterance.duration}});
      transcripts[s].push_back(utterance.transcript);
    }
    const fs::path path = fs::path(out_dir) / ("librispeech-" + subsets[s] + "-wav.json");
    std::ofstream(path) << manifest.dump() << '\n';
  }
  return transcripts;
}

void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const Settings preset = read_settings<Settings>(config);
  if (!preset.dataset)
    fail("--preset " + config.name(), "has no generated dataset; use LibriSpeech (`trainbench data prepare rnnt`)");
  speech::SyntheticSpeechOptions options;
  options.text = preset.dataset->text;
  options.min_words = static_cast<int>(preset.dataset->min_words);
  options.max_words = static_cast<int>(preset.dataset->max_words);
  options.train_utterances = preset.dataset->train_utterances;
  options.eval_utterances = preset.dataset->eval_utterances;
  options.voices = preset.dataset->voices.get<std::vector<std::string>>();
  const std::vector<std::string> train_subsets = preset.training_subsets();
  if (train_subsets.size() != 1) fail(config.name() + ": train_subsets", "a generated dataset has one training subset");
  options.train_subset = train_subsets[0];
  options.eval_subset = preset.eval_subset;
  options.vocab_size = static_cast<int>(preset.vocab_size);
  options.seed = static_cast<uint64_t>(seed);
  speech::make_synthetic_librispeech(out_dir, options);
  // Every subset the tree holds gets its manifest, so --set eval_subset=dev-librivox finds one too.
  std::vector<std::string> subsets;
  for (const auto& entry : fs::directory_iterator(out_dir))
    if (entry.is_directory() && entry.path().filename() != "sentencepieces") subsets.push_back(entry.path().filename().string());
  std::sort(subsets.begin(), subsets.end());
  write_manifests(out_dir, out_dir, subsets);
}

// Real LibriSpeech in in_dir: the manifests of the preset's subsets, and the tokenizer: the file
// `tokenizer_model` names (the reference's librispeech1023.model, from its create_sentencepieces.sh), copied,
// or else a sentencepiece model trained here on the training transcripts with the reference's flags.
void prepare_dataset(const Config& config, const std::string& in_dir, const std::string& out_dir) {
  const Settings preset = read_settings<Settings>(config);
  std::vector<std::string> subsets = preset.training_subsets();
  const size_t train_count = subsets.size();
  subsets.push_back(preset.eval_subset);
  const std::vector<std::vector<std::string>> transcripts = write_manifests(in_dir, out_dir, subsets);
  const int vocab = static_cast<int>(preset.vocab_size);
  const std::string model = speech::sentencepiece_model_path(out_dir, vocab);
  const std::string& given = preset.tokenizer_model;
  if (!given.empty()) {
    const speech::Tokenizer tokenizer(given);  // refuses a file that is not a sentencepiece model
    if (tokenizer.vocab_size() != vocab)
      fail(config.name() + ": tokenizer_model", given + " holds " + std::to_string(tokenizer.vocab_size()) +
                                                    " pieces; the preset's vocab_size is " + std::to_string(vocab));
    fs::create_directories(fs::path(model).parent_path());
    fs::copy_file(given, model, fs::copy_options::overwrite_existing);
    return;
  }
  std::vector<std::string> training;
  for (size_t s = 0; s < train_count; ++s) training.insert(training.end(), transcripts[s].begin(), transcripts[s].end());
  speech::train_sentencepiece(training, vocab, model.substr(0, model.size() - std::string(".model").size()));
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"rnnt", "Speech recognition: RNN-T on LibriSpeech, target WER 0.058 (lower is better)", trainbench_presets_rnnt,
          kDataset, construct_workload<RnntWorkload>, construct_trainer<RnntTrainer>, make_dataset, prepare_dataset};
}

}  // namespace trainbench::rnnt
