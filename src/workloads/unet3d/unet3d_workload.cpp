// The medical image segmentation benchmark (MLPerf "unet3d"): 3-D U-Net on KiTS19, target mean Dice 0.908.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>

#include <torch/torch.h>

#include "data/random.h"
#include "parallel/communicator.h"
#include "parallel/gradient_sync.h"
#include "medical/kits19.h"
#include "medical/npy.h"
#include "medical/patches.h"
#include "medical/phantoms.h"
#include "util/error.h"
#include "util/process_memory.h"
#include "workloads/checkpoint.h"
#include "workloads/common.h"
#include "workloads/unet3d/model.h"
#include "workloads/unet3d/settings.h"
#include "workloads/trainer.h"

extern const char* const trainbench_presets_unet3d;

namespace trainbench::unet3d {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset =
    "case_XXXXX_{x,y}.npy from `trainbench data prepare unet3d` (KiTS19's case_XXXXX/{imaging,segmentation}.nii.gz "
    "resampled and normalised as the reference does)";
constexpr double kEvalPadding = -2.2;  // the reference's padding_val for sliding-window inference
// A rank's batch of training patches holds at most this many voxels: 4 GiB of float32 images (NVIDIA's v1.1
// per-GPU batch of 7 x 128^3 is about 2^24).
constexpr int64_t kMaxBatchVoxels = int64_t{1} << 30;

// [D, H, W] from a setting whose rule holds it to three positive sizes.
medical::Shape3 shape3(const std::vector<int64_t>& sizes) { return {sizes.at(0), sizes.at(1), sizes.at(2)}; }

// "16x24x24"
std::string shape_text(const medical::Shape3& shape) {
  return std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" + std::to_string(shape[2]);
}

// What no one setting's range says, before the log opens: the patch fits the model's halvings, every
// sliding-window stride patch x (1 - validation_overlap) is at least a voxel (else the first evaluation
// fails), and a rank's batch of patches is at most kMaxBatchVoxels.
void check_settings(const Settings& preset, const Config& config, int64_t local_batch) {
  const int64_t reduction = int64_t{1} << preset.filters.size();
  for (const int64_t size : preset.patch)
    if (size % reduction != 0)
      fail(config.name() + ": patch", "every size must be a multiple of 2^" + std::to_string(preset.filters.size()) +
                                          " (one halving per stage of `filters` plus the bottleneck)");
  for (const int64_t size : preset.patch)
    if (medical::window_stride(size, preset.validation_overlap) < 1)
      fail(config.name() + ": validation_overlap",
           config.values().at("validation_overlap").dump() +
               " leaves a sliding-window stride below one voxel on the patch's side of " + std::to_string(size) +
               " (stride = patch x (1 - overlap))");
  const medical::Shape3 patch = shape3(preset.patch);
  if (local_batch > kMaxBatchVoxels / medical::voxel_count(patch))
    fail(config.name() + ": batch_size", std::to_string(local_batch) + " patches of " + shape_text(patch) +
                                             " per rank hold more than " + std::to_string(kMaxBatchVoxels) + " voxels");
}

LearningRateSchedule lr_schedule(const Settings& preset) {
  LearningRateSchedule schedule;
  schedule.init_lr = preset.init_learning_rate;
  schedule.lr = preset.learning_rate;
  schedule.warmup_epochs = preset.warmup_epochs;
  schedule.decay_boundary_epochs = preset.decay_boundary_epochs;
  schedule.decay_factor = preset.decay_factor;
  return schedule;
}

// One prepared case in memory, with its foreground components found once.
struct Case {
  std::string id;
  medical::Shape3 shape{};
  std::vector<float> image;
  std::vector<uint8_t> label;
  medical::ForegroundBoxes boxes;
};

// A case's volume shape from its two .npy arrays (or their headers): float32 (1, D, H, W) and uint8 of that shape.
medical::Shape3 case_shape(const medical::PreparedFiles& files, const medical::NpyArray& image, const medical::NpyArray& label) {
  if (image.type != medical::NpyType::kFloat32 || image.shape.size() != 4 || image.shape[0] != 1)
    fail(files.image, "expected float32 of shape (1, D, H, W)");
  if (label.type != medical::NpyType::kUint8 || label.shape != image.shape)
    fail(files.label, "expected uint8 of the image's shape (1, D, H, W)");
  return {image.shape[1], image.shape[2], image.shape[3]};
}

Case load_case(const medical::PreparedFiles& files, bool with_boxes) {
  medical::NpyArray image = medical::read_npy(files.image), label = medical::read_npy(files.label);
  const medical::Shape3 shape = case_shape(files, image, label);
  medical::check_intensities(image.floats, shape, files.image);
  medical::check_labels(label.bytes, shape, files.label);
  Case loaded{files.id, shape, std::move(image.floats), std::move(label.bytes), {}};
  if (with_boxes) loaded.boxes = medical::foreground_boxes(loaded.label, loaded.shape);
  return loaded;
}

// Cases on the compute threads, a case per task.
std::vector<Case> load_cases(const std::vector<medical::PreparedFiles>& files, bool with_boxes) {
  std::vector<Case> cases(files.size());
  at::parallel_for(0, static_cast<int64_t>(files.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) cases[static_cast<size_t>(i)] = load_case(files[static_cast<size_t>(i)], with_boxes);
  });
  return cases;
}

// A training case, read on first use by whichever thread draws it, usually the prefetching batch builder (as
// the reference's DataLoader workers read each drawn case's .npy files): the reading then overlaps training.
// Reading every case before the first step took 2.2% of the mini preset's timed region. Read once, then kept.
class TrainingCase {
 public:
  explicit TrainingCase(medical::PreparedFiles files) : files_(std::move(files)) {}
  const Case& get() {
    std::call_once(loaded_, [this] { case_ = load_case(files_, true); });
    return case_;
  }

 private:
  medical::PreparedFiles files_;
  std::once_flag loaded_;
  Case case_;
};

// One rank's share of a global batch: images (n, 1, D, H, W) and labels (n, D, H, W).
struct Batch {
  int64_t size = 0;
  std::vector<float> images;
  std::vector<uint8_t> labels;
};

// Cases drawn with replacement (the reference's RandomSampler(replacement=True)), each cropped and augmented.
// The stream of a step depends only on (seed, step, rank), so prefetching changes nothing.
Batch make_batch(std::deque<TrainingCase>& cases, const medical::PatchOptions& options, int64_t size, uint64_t seed,
                 int64_t step, int rank) {
  const int64_t patch_voxels = medical::voxel_count(options.patch);
  Batch batch;
  batch.size = size;
  batch.images.resize(static_cast<size_t>(size * patch_voxels));
  batch.labels.resize(batch.images.size());
  data::Rng rng(data::mix_seed(seed, static_cast<uint64_t>(step), static_cast<uint64_t>(rank), 0x756e6574));
  for (int64_t sample = 0; sample < size; ++sample) {
    const Case& picked = cases[rng.below(cases.size())].get();
    medical::sample_training_patch(picked.image.data(), picked.label.data(), picked.shape, picked.boxes, options, rng,
                                   batch.images.data() + sample * patch_voxels, batch.labels.data() + sample * patch_voxels);
  }
  return batch;
}

std::pair<torch::Tensor, torch::Tensor> as_tensors(Batch& batch, const medical::Shape3& patch, torch::Device device) {
  auto images = torch::from_blob(batch.images.data(), {batch.size, 1, patch[0], patch[1], patch[2]}, torch::kFloat32);
  auto labels = torch::from_blob(batch.labels.data(), {batch.size, patch[0], patch[1], patch[2]}, torch::kUInt8);
  return {images.to(device), labels.to(device, torch::kInt64)};
}

// The seeded model, or --weights, under the v1.1 reference's Unet3D state_dict names (the module tree is written
// with them), on `device` in training mode.
Unet3d starting_model(const WorkloadSettings& settings, const Settings& preset, const torch::Device& device) {
  seed_torch(settings);
  Unet3d model(Unet3dOptions().filters(preset.filters));
  if (!settings.weights.empty()) load_state_dict(settings.weights, module_state(*model));
  model->to(device);
  model->train();
  return model;
}

// U-Net3D's model, SGD with Nesterov momentum, gradient exchange and loop, as a run, a bench and an export
// build them.
class Unet3dTrainer : public TrainerOf<Settings> {
 public:
  Unet3dTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose)
      : TrainerOf(settings, context),
        model_(starting_model(settings, preset_, context.device)),
        optimizer_(model_->parameters(), torch::optim::SGDOptions(preset_.learning_rate)
                                             .momentum(preset_.momentum)
                                             .nesterov(true)
                                             .weight_decay(preset_.weight_decay)),
        // No buffers: instance norm keeps no running statistics.
        gradients_(*context.world, model_->parameters(), std::vector<torch::Tensor>{}),
        loop_(config_, context.device, model_->parameters(), &gradients_) {}

  // One update on a batch of this rank's patches and labels at `learning_rate`.
  TrainingStep step(torch::Tensor images, torch::Tensor labels, double learning_rate) {
    return training_step(model_, optimizer_, std::move(images), std::move(labels), learning_rate);
  }
  Unet3d& model() { return model_; }
  TrainingLoop& loop() { return loop_; }
  parallel::GradientSync* gradient_exchange() override { return &gradients_; }

  std::vector<std::string> initialized_tensors() const override { return model_->initialized_tensor_names(); }

  void save_model(const std::string& path) const override { save_state_dict(module_state(*model_), path); }

  // The full step on a batch already in memory (normalised-CT-like values, random labels).
  SyntheticStep synthetic_step(BenchRun& run) override {
    model_->train();  // bench_before_training evaluated
    const std::vector<int64_t>& patch = preset_.patch;
    const auto images = torch::randn({run.local_batch, 1, patch[0], patch[1], patch[2]}, context_.device);
    const auto labels = torch::randint(3, {run.local_batch, patch[0], patch[1], patch[2]},
                                       torch::TensorOptions(torch::kInt64).device(context_.device));
    return {[this, images, labels] { loop_.update(step(images, labels, 1e-4)); }, "samples",
            3.0 * 2.0 * static_cast<double>(model_->forward_macs(patch)), "patch " + shape_text(shape3(patch))};
  }

  // Evaluation: sliding-window inference over one case of the preset's bench_eval_shape (a real KiTS19 case
  // after resampling is about 128x256x256), its seconds and the peak memory it added. It runs before the
  // training steps: trainbench keeps freed memory for reuse (util/allocator.h), so after a training step the
  // evaluation would reuse the step's pages and its own peak would not show.
  void bench_before_training(BenchRun&, std::ostream& out) override {
    const medical::Shape3 eval_shape = shape3(preset_.bench_eval_shape);
    const auto volume = torch::randn({eval_shape[0], eval_shape[1], eval_shape[2]}, context_.device);
    const auto volume_labels = torch::randint(3, {eval_shape[0], eval_shape[1], eval_shape[2]},
                                              torch::TensorOptions(torch::kUInt8).device(context_.device));
    model_->eval();
    const double overlap = preset_.validation_overlap;
    const auto windows =
        static_cast<int64_t>(medical::plan_sliding_windows(eval_shape, shape3(preset_.patch), overlap).origins.size());
    reset_peak_resident();
    const int64_t before = peak_resident_bytes();
    const auto start = std::chrono::steady_clock::now();
    const auto prediction = sliding_window_inference(model_, volume, volume_labels, preset_.patch, overlap,
                                                     kEvalPadding, preset_.eval_window_batch);
    dice_scores(prediction.logits, prediction.labels).sum().item<double>();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double added_mib = static_cast<double>(peak_resident_bytes() - before) / (1024.0 * 1024.0);
    char line[256];
    std::snprintf(line, sizeof(line),
                  "evaluation    %.2f s/case  (%lldx%lldx%lld case, %lld windows, %lld at a time, peak memory +%.0f "
                  "MiB)\n",
                  seconds, static_cast<long long>(eval_shape[0]), static_cast<long long>(eval_shape[1]),
                  static_cast<long long>(eval_shape[2]), static_cast<long long>(windows),
                  static_cast<long long>(preset_.eval_window_batch), added_mib);
    out << line;
  }

 private:
  Unet3d model_;
  torch::optim::SGD optimizer_;
  parallel::GradientSync gradients_;
  TrainingLoop loop_;
};

class Unet3dWorkload : public WorkloadBase {
 public:
  explicit Unet3dWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(read_settings<Settings>(config_)) {
    check_settings(preset_, config_, local_batch("batch_size"));
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("samples");
    // Until open_data() knows samples_per_epoch, the schedule assumes the reference's 168 training cases.
    description.schedule = schedule_for(168, samples_per_epoch(168));
    description.hyperparameters = {
        {"global_batch_size", preset_.batch_size},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", "nag"},
        {"opt_base_learning_rate", preset_.learning_rate},
        {"opt_learning_rate_warmup_epochs", preset_.warmup_epochs},
        {"opt_learning_rate_decay_boundary_epochs", preset_.decay_boundary_epochs},
        {"opt_learning_rate_decay_factor", preset_.decay_factor},
        {"opt_weight_decay", preset_.weight_decay},
        {"opt_momentum", preset_.momentum},
        {"oversampling", preset_.oversampling},
        {"training_input_shape", preset_.patch},
        {"validation_input_shape", preset_.patch},
        {"validation_overlap", preset_.validation_overlap},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    require_data_dir(kDataset);
    trainer_ = std::make_unique<Unet3dTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    schedule_ = lr_schedule(preset_);
    patch_options_.patch = shape3(preset_.patch);
    patch_options_.oversampling = preset_.oversampling;
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override {
    const medical::Kits19Split split = medical::split_prepared_cases(settings_.data_dir);
    if (split.train.empty()) fail(settings_.data_dir, "holds no training cases (every case is an evaluation case)");
    if (split.eval.empty()) fail(settings_.data_dir, "holds none of the 42 evaluation cases");
    // Evaluation is sharded over the ranks: case i belongs to rank i mod world.
    for (size_t i = 0; i < split.eval.size(); ++i)
      if (static_cast<int>(i % static_cast<size_t>(communicator_->world())) == communicator_->rank())
        eval_files_.push_back(split.eval[i]);
    // Training cases are read when first drawn; their headers now, so a case smaller than the patch is refused
    // before the first step.
    for (const auto& files : split.train) {
      const medical::Shape3 shape =
          case_shape(files, medical::read_npy_header(files.image), medical::read_npy_header(files.label));
      for (int axis = 0; axis < 3; ++axis)
        if (shape[axis] < patch_options_.patch[axis])
          fail(files.image, "a case of " + shape_text(shape) + " voxels is smaller than the patch " +
                                shape_text(patch_options_.patch) +
                                " (`trainbench data prepare unet3d` pads every case to the patch it is given)");
      train_cases_.emplace_back(files);
    }
    eval_count_ = static_cast<int64_t>(split.eval.size());
    local_batch_ = local_batch("batch_size");
    const auto train_samples = static_cast<int64_t>(split.train.size());
    samples_per_epoch_ = samples_per_epoch(train_samples);
    DataSummary summary;
    summary.train_samples = train_samples;
    summary.eval_samples = eval_count_;
    summary.derived_hyperparameters = {{"samples_per_epoch", samples_per_epoch_}};
    summary.schedule = schedule_for(train_samples, samples_per_epoch_);
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    trainer_->model()->train();
    TrainingLoop& loop = trainer_->loop();
    const int64_t steps_per_epoch = samples_per_epoch_ / preset_.batch_size;
    const auto first_epoch = static_cast<int64_t>(block.first_epoch_num);
    const int64_t last_epoch = first_epoch + static_cast<int64_t>(block.epoch_count) - 1;
    loop.begin_block(control);
    for (int64_t epoch = first_epoch; epoch <= last_epoch; ++epoch) {
      const double learning_rate = schedule_.at_epoch(epoch);
      for (int64_t step_in_epoch = 0; step_in_epoch < steps_per_epoch; ++step_in_epoch) {
        const int64_t step = (epoch - 1) * steps_per_epoch + step_in_epoch;
        Batch batch = loop.fetch([&] { return next_batch(step); });
        prefetch(step + 1);
        const auto [images, labels] = as_tensors(batch, patch_options_.patch, device_);
        loop.train(trainer_->step(images, labels, learning_rate));
      }
    }
    return loop.end_block();
  }

  Metric evaluate(const Block&, RunControl& control) override {
    torch::NoGradGuard no_grad;
    Unet3d& model = trainer_->model();
    model->eval();
    std::vector<double> sums{0, 0, 0};  // kidney Dice, tumour Dice, cases: summed over ranks exactly
    if (eval_cases_.empty()) eval_cases_ = load_cases(eval_files_, false);  // read when first needed, as training's
    for (Case& evaluated : eval_cases_) {
      const auto volume = torch::from_blob(evaluated.image.data(), {evaluated.shape[0], evaluated.shape[1], evaluated.shape[2]},
                                           torch::kFloat32).to(device_);
      const auto labels = torch::from_blob(evaluated.label.data(), {evaluated.shape[0], evaluated.shape[1], evaluated.shape[2]},
                                           torch::kUInt8).to(device_);
      const WindowedPrediction prediction =
          sliding_window_inference(model, volume, labels, preset_.patch, preset_.validation_overlap, kEvalPadding,
                                   preset_.eval_window_batch);
      const torch::Tensor scores = dice_scores(prediction.logits, prediction.labels).to(torch::kCPU, torch::kFloat64);
      sums[0] += scores[0][0].item<double>();
      sums[1] += scores[0][1].item<double>();
      sums[2] += 1;
      control.check_interrupt();
    }
    model->train();
    communicator_->sum(sums);
    if (sums[2] != static_cast<double>(eval_count_)) fail("unet3d evaluation", "the ranks did not evaluate every case once");
    const double kidney = sums[0] / sums[2], tumour = sums[1] / sums[2];
    // Unrounded, as the reference compares it with the target (runtime/inference.py, runtime/training.py):
    // a Dice of 0.90796 has not reached 0.908 (audit U1).
    return (kidney + tumour) / 2;
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  int64_t samples_per_epoch(int64_t train_samples) const {
    const int64_t global_batch = preset_.batch_size;
    return (train_samples + global_batch - 1) / global_batch * global_batch;
  }

  // The rules' schedule: the first evaluation at CEILING(start * N / samples_per_epoch) epochs, then every
  // CEILING(every * N / samples_per_epoch), not converged after CEILING(max * N / samples_per_epoch), with N the
  // training set's size (168 for KiTS19) and start/every/max the preset's (1000, 20, 10000 for the rules).
  EvalSchedule schedule_for(int64_t train_samples, int64_t per_epoch) const {
    const auto scaled = [&](int64_t epochs) {
      return std::ceil(static_cast<double>(epochs) * static_cast<double>(train_samples) /
                       static_cast<double>(per_epoch));
    };
    EvalSchedule schedule;
    schedule.first_block = scaled(preset_.start_eval_at);
    schedule.interval = scaled(preset_.evaluate_every);
    schedule.max_epochs = scaled(preset_.max_epochs);
    return schedule;
  }

  Batch next_batch(int64_t step) {
    if (pending_ && pending_step_ == step) {
      Batch batch = pending_->get();
      pending_.reset();
      return batch;
    }
    return make_batch(train_cases_, patch_options_, local_batch_, static_cast<uint64_t>(settings_.seed), step,
                      communicator_->rank());
  }

  // Prepares the next step's batch on another thread while this one trains.
  void prefetch(int64_t step) {
    pending_step_ = step;
    pending_ = std::async(std::launch::async, make_batch, std::ref(train_cases_), patch_options_, local_batch_,
                          static_cast<uint64_t>(settings_.seed), step, communicator_->rank());
  }

  const Settings preset_;
  std::unique_ptr<Unet3dTrainer> trainer_;
  LearningRateSchedule schedule_;
  medical::PatchOptions patch_options_;
  std::deque<TrainingCase> train_cases_;  // a deque: TrainingCase does not move
  std::vector<medical::PreparedFiles> eval_files_;
  std::vector<Case> eval_cases_;
  int64_t eval_count_ = 0, local_batch_ = 0, samples_per_epoch_ = 0;
  std::optional<std::future<Batch>> pending_;
  int64_t pending_step_ = -1;
};

// KiTS19 in in_dir, prepared into out_dir; with reference_checksums, each prepared file's md5 checked against
// the reference's, as its preprocess_dataset.py verify_dataset does (audit U2). A difference is an Error
// naming the files; the prepared files stay.
void prepare_dataset(const Config& config, const std::string& in_dir, const std::string& out_dir) {
  const Settings preset = read_settings<Settings>(config);
  medical::prepare_kits19(in_dir, out_dir, shape3(preset.patch));
  const std::string& checksums = preset.reference_checksums;
  if (checksums.empty()) return;
  const medical::ChecksumComparison comparison = medical::compare_with_checksums(out_dir, checksums);
  if (comparison.differing.empty() && comparison.missing.empty()) return;
  const auto first = [](const std::vector<std::string>& names) {
    std::string text;
    for (size_t i = 0; i < names.size() && i < 5; ++i) text += (i ? ", " : "") + names[i];
    return text + (names.size() > 5 ? ", ..." : "");
  };
  std::string what = std::to_string(comparison.matching) + " prepared files match the reference's md5";
  if (!comparison.differing.empty())
    what += "; " + std::to_string(comparison.differing.size()) + " differ (" + first(comparison.differing) + ")";
  if (!comparison.missing.empty())
    what += "; " + std::to_string(comparison.missing.size()) + " listed were not prepared (" + first(comparison.missing) + ")";
  fail(checksums, what + "; the prepared files are kept in " + out_dir);
}

// Generated KiTS19-layout cases in <out_dir>/kits19 and their prepared form in <out_dir>.
void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const Settings preset = read_settings<Settings>(config);
  if (!preset.dataset)
    fail("--preset " + config.name(), "has no generated dataset; prepare KiTS19 with `trainbench data prepare unet3d`");
  medical::PhantomOptions options;
  const std::vector<double>& extent = preset.dataset->extent_mm;  // three lengths: its rule says so
  options.extent_mm = {extent.at(0), extent.at(1), extent.at(2)};
  options.noise_hu = preset.dataset->noise_hu;
  options.tumour_probability = preset.dataset->tumour_probability;
  options.seed = static_cast<uint64_t>(seed);
  const std::string raw = (fs::path(out_dir) / "kits19").string();
  medical::make_kits19_phantoms(raw, options);
  prepare_dataset(config, raw, out_dir);
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"unet3d", "Medical image segmentation: 3-D U-Net on KiTS19, target mean Dice (kidney, tumour) 0.908",
          trainbench_presets_unet3d, kDataset, construct_workload<Unet3dWorkload>,
          construct_trainer<Unet3dTrainer>, make_dataset, prepare_dataset};
}

}  // namespace trainbench::unet3d
