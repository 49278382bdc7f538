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

extern const char* const trainbench_presets_rnnt;

namespace trainbench::rnnt {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset =
    "LibriSpeech subsets (SUBSET/SPEAKER/CHAPTER/*.flac with *.trans.txt, or the reference's "
    "librispeech-SUBSET-wav.json manifests) and sentencepieces/librispeechVOCAB.model";

RnntOptions model_options(const Config& config) {
  const speech::FeatureOptions features;
  return RnntOptions()
      .input_features(features.output_dims())
      .encoder_hidden(config.integer("encoder_hidden"))
      .encoder_pre_layers(config.integer("encoder_pre_layers"))
      .encoder_post_layers(config.integer("encoder_post_layers"))
      .stack_time_factor(config.integer("stack_time_factor"))
      .prediction_hidden(config.integer("prediction_hidden"))
      .prediction_layers(config.integer("prediction_layers"))
      .joint_hidden(config.integer("joint_hidden"))
      .vocab_size(config.integer("vocab_size"))
      .encoder_dropout(config.number("encoder_dropout"))
      .prediction_dropout(config.number("prediction_dropout"))
      .joint_dropout(config.number("joint_dropout"))
      .forget_gate_bias(config.number("forget_gate_bias"))
      .weights_init_scale(config.number("weights_init_scale"))
      .hidden_hidden_bias_scale(config.number("hidden_hidden_bias_scale"));
}

optim::LambOptions lamb_options(const Config& config) {
  optim::LambOptions options;
  options.beta1(config.number("beta1")).beta2(config.number("beta2")).epsilon(config.number("epsilon"));
  options.weight_decay(config.number("weight_decay")).max_grad_norm(config.number("max_grad_norm"));
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

class RnntWorkload : public WorkloadBase {
 public:
  explicit RnntWorkload(WorkloadSettings settings) : WorkloadBase(std::move(settings)) {}

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("utt");
    description.schedule.max_epochs = config_.number("max_epochs");
    const speech::FeatureOptions features;
    description.hyperparameters = {
        {"global_batch_size", config_.integer("batch_size")},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", "lamb"},
        {"opt_base_learning_rate", config_.number("learning_rate")},
        {"opt_lamb_epsilon", config_.number("epsilon")},
        {"opt_weight_decay", config_.number("weight_decay")},
        {"opt_gradient_clip_norm", config_.number("max_grad_norm")},
        {"opt_lamb_beta_1", config_.number("beta1")},
        {"opt_lamb_beta_2", config_.number("beta2")},
        {"opt_learning_rate_alt_decay_func", true},
        {"opt_learning_rate_alt_warmup_func", true},
        {"opt_lamb_learning_rate_min", config_.number("min_learning_rate")},
        {"opt_lamb_learning_rate_decay_poly_power", config_.number("lr_exp_gamma")},
        {"opt_learning_rate_warmup_epochs", config_.integer("warmup_epochs")},
        {"opt_lamb_learning_rate_hold_epochs", config_.integer("hold_epochs")},
        {"model_weights_initialization_scale", config_.number("weights_init_scale")},
        {"model_eval_ema_factor", config_.number("ema")},
        {"data_train_max_duration", config_.number("max_duration")},
        {"data_train_num_buckets", config_.integer("num_buckets")},
        {"data_speed_perturbaton_min", features.speed_min},
        {"data_speed_perturbaton_max", features.speed_max},
        {"data_spec_augment_freq_n", features.freq_masks},
        {"data_spec_augment_freq_min", 0},
        {"data_spec_augment_freq_max", features.freq_mask_max},
        {"data_spec_augment_time_n", features.time_masks},
        {"data_spec_augment_time_min", 0},
        {"data_spec_augment_time_max", features.time_mask_max_fraction},
        {"eval_max_prediction_symbols", config_.integer("max_symbols_per_sample")},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    seed_torch(settings_);
    require_data_dir(kDataset);
    model_ = Rnnt(model_options(config_));
    if (!settings_.weights.empty()) load_state_dict(settings_.weights, official_state(model_));
    model_->to(device_);
    gradients_.emplace(*communicator_, model_->parameters(), std::vector<torch::Tensor>{});
    // The EMA starts from the initial weights (after rank 0's were broadcast).
    ema_ = Rnnt(model_options(config_));
    ema_->to(device_);
    update_ema(ema_, model_, 0.0);
    ema_->eval();
    const std::vector<torch::Tensor> parameters = model_->parameters();
    optimizer_.emplace(optim::all_decaying(parameters), lamb_options(config_));
    loop_.emplace(config_, device_, parameters, &*gradients_);
    return RnntImpl::initialized_tensor_names();
  }

  // The model the run evaluated: the EMA, as the reference's evaluation uses it.
  void save_weights(const std::string& path) const override { save_state_dict(official_state(ema_), path); }

  DataSummary open_data() override {
    // Checked here, not at construction: describing a preset (the reference's 4 workers) needs no such CPUs.
    const int workers = loader_threads(config_, "loader_workers");
    const std::string root = settings_.data_dir;
    const int vocab = static_cast<int>(config_.integer("vocab_size"));
    tokenizer_.emplace(speech::sentencepiece_model_path(root, vocab));
    if (tokenizer_->vocab_size() != vocab)
      fail(speech::sentencepiece_model_path(root, vocab),
           "holds " + std::to_string(tokenizer_->vocab_size()) + " pieces; the preset's vocab_size is " + std::to_string(vocab));
    std::vector<speech::Utterance> train;
    for (const std::string& subset : config_.values().at("train_subsets").get<std::vector<std::string>>()) {
      std::vector<speech::Utterance> part = read_manifest(root, subset);
      train.insert(train.end(), part.begin(), part.end());
    }
    const size_t unfiltered = train.size();
    train = speech::filter_by_duration(std::move(train), config_.number("max_duration"));
    if (train.empty())
      fail(config_.name() + ": max_duration", config_.values().at("max_duration").dump() + " s leaves none of the " +
                                                  std::to_string(unfiltered) + " training utterances");
    std::vector<speech::Utterance> eval = read_manifest(root, config_.string("eval_subset"));
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

    const int64_t global_batch = config_.integer("batch_size");
    local_batch("batch_size");  // each rank's share must be whole
    steps_per_epoch_ = static_cast<int64_t>(durations_.size()) / global_batch;
    if (steps_per_epoch_ == 0)
      fail(config_.name() + ": batch_size", std::to_string(durations_.size()) + " training utterances (after the " +
                                                std::to_string(config_.number("max_duration")) + " s filter) do not fill one batch of " +
                                                std::to_string(global_batch));
    schedule_ = {config_.number("learning_rate"), config_.integer("warmup_epochs"), config_.integer("hold_epochs"),
                 steps_per_epoch_, config_.number("lr_exp_gamma"), config_.number("min_learning_rate")};
    DataSummary summary;
    summary.train_samples = steps_per_epoch_ * global_batch;
    summary.eval_samples = eval_count;
    // Which tokenizer the targets came from: another sentencepiece build trained on the same transcripts can
    // cut other pieces (audit R2), so the log names the model file by its md5.
    summary.derived_hyperparameters.push_back({"trainbench_tokenizer_md5", md5_hex(speech::sentencepiece_model_path(root, vocab))});
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    model_->train();
    loop_->begin_block(control);
    const double ema = config_.number("ema");
    for (int64_t epoch = static_cast<int64_t>(block.first_epoch_num);
         epoch < static_cast<int64_t>(block.first_epoch_num + block.epoch_count); ++epoch) {
      loop_->fetch([&] {  // the bucketing sampler runs on this thread
        train_loader_->start(speech::rank_share(speech::bucketing_batches(durations_, static_cast<int>(config_.integer("num_buckets")),
                                                                            config_.integer("batch_size"),
                                                                            static_cast<uint64_t>(settings_.seed), epoch),
                                                communicator_->rank(), communicator_->world()),
                             epoch);
      });
      while (std::optional<speech::SpeechBatch> batch = loop_->fetch([&] { return train_loader_->next(); })) {
        const BatchTensors tensors = as_tensors(*batch, device_);
        loop_->train(training_step(model_, *optimizer_, tensors.features, tensors.frame_counts, tensors.tokens,
                                   tensors.token_counts, schedule_.at(loop_->updates() + 1, epoch), ema_, ema));
      }
    }
    return loop_->end_block();
  }

  Metric evaluate(const Block&, RunControl& control) override {
    // This rank's contiguous share of the evaluation set; errors and words are summed over ranks.
    const auto count = static_cast<int64_t>(references_.size());
    const int64_t rank = communicator_->rank(), world = communicator_->world();
    eval_loader_->start(speech::sequential_batches(rank * count / world, (rank + 1) * count / world,
                                                   config_.integer("eval_batch_size")),
                        0);
    speech::WordErrors errors;
    while (std::optional<speech::SpeechBatch> batch = eval_loader_->next()) {
      const BatchTensors tensors = as_tensors(*batch, device_);
      const std::vector<std::vector<int>> hypotheses =
          greedy_decode(ema_, tensors.features, tensors.frame_counts, config_.integer("max_symbols_per_step"),
                        config_.integer("max_symbols_per_sample"));
      for (int64_t i = 0; i < batch->size; ++i)
        errors += speech::word_errors(tokenizer_->decode(hypotheses[static_cast<size_t>(i)]),
                                      references_[static_cast<size_t>(batch->utterances[static_cast<size_t>(i)])]);
      control.check_interrupt();
    }
    return fraction_over_ranks(static_cast<double>(errors.errors), static_cast<double>(errors.words), config_.name(),
                               "the evaluation set has no reference words");
  }

 private:
  Rnnt model_{nullptr}, ema_{nullptr};
  std::optional<parallel::GradientSync> gradients_;
  std::optional<optim::Lamb> optimizer_;
  std::optional<TrainingLoop> loop_;
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
  if (!config.values().contains("dataset"))
    fail("--preset " + config.name(), "has no generated dataset; use LibriSpeech (`trainbench data prepare rnnt`)");
  const Config dataset(config.name() + ": dataset", config.values().at("dataset"));
  speech::SyntheticSpeechOptions options;
  options.text = dataset.string("text");
  options.min_words = static_cast<int>(dataset.integer("min_words"));
  options.max_words = static_cast<int>(dataset.integer("max_words"));
  options.train_utterances = dataset.integer("train_utterances");
  options.eval_utterances = dataset.integer("eval_utterances");
  options.voices = dataset.values().at("voices").get<std::vector<std::string>>();
  const std::vector<std::string> train_subsets = config.values().at("train_subsets").get<std::vector<std::string>>();
  if (train_subsets.size() != 1) fail(config.name() + ": train_subsets", "a generated dataset has one training subset");
  options.train_subset = train_subsets[0];
  options.eval_subset = config.string("eval_subset");
  options.vocab_size = static_cast<int>(config.integer("vocab_size"));
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
  std::vector<std::string> subsets = config.values().at("train_subsets").get<std::vector<std::string>>();
  const size_t train_count = subsets.size();
  subsets.push_back(config.string("eval_subset"));
  const std::vector<std::vector<std::string>> transcripts = write_manifests(in_dir, out_dir, subsets);
  const int vocab = static_cast<int>(config.integer("vocab_size"));
  const std::string model = speech::sentencepiece_model_path(out_dir, vocab);
  const std::string given = config.string("tokenizer_model");
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

void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out) {
  const Config& config = settings.config;
  BenchRun run(settings, bench_settings);
  const int64_t batch = run.local_batch;
  const double seconds = config.number("bench_utterance_seconds");
  const int64_t token_count = config.integer("bench_tokens");
  const speech::FeaturePipeline pipeline{speech::FeatureOptions{}};
  const int64_t frames = pipeline.output_frames(static_cast<int64_t>(seconds * 16000));

  Rnnt model(model_options(config));
  model->to(run.device);
  model->train();
  parallel::GradientSync gradients(*run.communicator, model->parameters(), {});
  const std::vector<torch::Tensor> parameters = model->parameters();
  optim::Lamb optimizer(optim::all_decaying(parameters), lamb_options(config));
  const auto long_options = torch::TensorOptions(torch::kInt64).device(run.device);
  const torch::Tensor features = torch::randn({batch, frames, pipeline.options().output_dims()}, run.device);
  const torch::Tensor frame_counts = torch::full({batch}, frames, long_options);
  const torch::Tensor tokens = torch::randint(config.integer("vocab_size"), {batch, token_count}, long_options);
  const torch::Tensor token_counts = torch::full({batch}, token_count, long_options);
  TrainingLoop loop(config, run.device, parameters, &gradients);
  const double step_time = run.training_step_seconds(
      [&] { loop.update(training_step(model, optimizer, features, frame_counts, tokens, token_counts, 1e-3)); });
  char details[160];
  std::snprintf(details, sizeof details, "%.1f s utterances, %lld tokens", seconds, static_cast<long long>(token_count));
  // Backward costs about twice the forward: 3 x forward, 2 FLOPs per multiply-accumulate.
  run.print_training(out, step_time, "utt", 6.0 * static_cast<double>(model->forward_macs(frames, token_count)), details);
  if (run.memory_only()) return;

  // The loss alone: lattice forward-backward plus log-softmax, on the packed logits of this batch's lattices.
  const int64_t steps = (frames + model->options().stack_time_factor() - 1) / model->options().stack_time_factor();
  const torch::Tensor step_counts = torch::full({batch}, steps, long_options);
  const LatticeCells cells = lattice_cells(step_counts, token_counts, tokens, steps, token_count, model->options().blank(), run.device);
  const torch::Tensor logits = torch::randn({cells.count(), config.integer("vocab_size") + 1}, run.device).requires_grad_();
  const double loss_time = run.median_step_seconds([&] {
    const torch::Tensor loss = packed_rnnt_loss(logits, cells, step_counts, token_counts, model->options().blank()).sum();
    loss.backward();
    loss.item<double>();
  });
  char line[256];
  std::snprintf(line, sizeof line, "loss          %10.1f utt/s  (%lld x %lld x %lld lattice, %lld classes, forward and backward: %.5f s/batch)\n",
                static_cast<double>(batch) / loss_time, static_cast<long long>(batch), static_cast<long long>(steps),
                static_cast<long long>(token_count + 1), static_cast<long long>(config.integer("vocab_size") + 1), loss_time);
  out << line;

  // The feature pipeline on one thread, training mode (speed perturbation and SpecAugment included).
  data::Rng rng(static_cast<uint64_t>(settings.seed));
  std::vector<float> audio(static_cast<size_t>(seconds * 16000));
  for (float& sample : audio) sample = static_cast<float>(0.1 * speech::standard_normal(rng));
  const int64_t utterances = std::max<int64_t>(8, bench_settings.steps);
  const auto begin = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < utterances; ++i) pipeline.compute(audio, true, rng);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::snprintf(line, sizeof line, "features      %10.1f utt/s  (%.1f s utterances, training pipeline, 1 thread, %lld utterances: %.5f s/utt)\n",
                static_cast<double>(utterances) / elapsed, seconds, static_cast<long long>(utterances), elapsed / utterances);
  out << line;
}

// checkpoint export: the model a run of `settings` starts from, as build() makes it, under the reference's
// rnnt/model.py names.
void export_weights(const WorkloadSettings& settings, const std::string& out_path) {
  seed_torch(settings);
  Rnnt model(model_options(settings.config));
  if (!settings.weights.empty()) load_state_dict(settings.weights, official_state(model));
  save_state_dict(official_state(model), out_path);
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"rnnt", "Speech recognition: RNN-T on LibriSpeech, target WER 0.058 (lower is better)", trainbench_presets_rnnt,
          kDataset, construct_workload<RnntWorkload>, bench, make_dataset, prepare_dataset, export_weights};
}

}  // namespace trainbench::rnnt
