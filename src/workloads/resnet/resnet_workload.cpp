// The image-classification benchmark (MLPerf "resnet"): ResNet-50 v1.5 on ImageNet, LARS or SGD.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <torch/torch.h>

#include "data/generators/image_classes.h"
#include "data/image_folder.h"
#include "data/image_loader.h"
#include "parallel/communicator.h"
#include "parallel/gradient_sync.h"
#include "util/error.h"
#include "workloads/checkpoint.h"
#include "workloads/common.h"
#include "workloads/data_pipeline_bench.h"
#include "workloads/resnet/lr_schedule.h"
#include "workloads/resnet/model.h"
#include "workloads/resnet/settings.h"
#include "workloads/trainer.h"

extern const char* const trainbench_presets_resnet;

namespace trainbench::resnet {

namespace {

constexpr const char* kDataset = "an ImageNet-layout tree (train/ with a folder per class, val/)";

ResNetOptions model_options(const Settings& preset) {
  return ResNetOptions()
      .blocks_per_stage(preset.blocks_per_stage)
      .stage_widths(preset.stage_widths)
      .stem_width(preset.stem_width)
      .stem_kernel(preset.stem_kernel)
      .stem_stride(preset.stem_stride)
      .stem_max_pool(preset.stem_max_pool)
      .expansion(preset.expansion)
      .num_classes(preset.num_classes);
}

// Each rank loads its strided share of every global batch (data/image_loader.h), so the global batch is the
// same whatever the number of ranks.
data::ImageLoaderOptions loader_options(const Settings& preset, bool train, const WorkloadSettings& settings,
                                        const parallel::ParallelContext& context) {
  data::ImageLoaderOptions options;
  options.mode = train ? data::LoaderMode::Train : data::LoaderMode::Eval;
  options.crop_size = static_cast<int>(preset.image_size);
  options.resize_size = static_cast<int>(preset.eval_resize);
  options.crop.min_scale = preset.crop_min_scale;
  options.batch_size = local_batch_size(settings.config, "batch_size", context.world_size());
  options.rank = context.rank();
  options.world = context.world_size();
  options.drop_last = train;
  options.workers = loader_threads(settings.config, "loader_threads");
  options.prefetch_batches = static_cast<int>(preset.prefetch_batches);
  options.seed = static_cast<uint64_t>(settings.seed);
  options.skip_corrupt = settings.skip_corrupt;
  return options;
}

// Wraps a loader batch as tensors on `device`: no copy on the CPU (the batch must outlive them), one
// host-to-device copy otherwise.
std::pair<torch::Tensor, torch::Tensor> as_tensors(data::ImageBatch& batch, int64_t image_size, torch::Device device) {
  auto images = torch::from_blob(batch.images.data(), {batch.size, 3, image_size, image_size}, torch::kFloat32);
  auto labels = torch::from_blob(batch.labels.data(), {batch.size}, torch::kInt64);
  return {images.to(device), labels.to(device)};
}

// The seeded model, or --weights, under torchvision's state_dict names (the module tree is written with them),
// on `device` in training mode.
ResNet starting_model(const WorkloadSettings& settings, const Settings& preset, const torch::Device& device) {
  seed_torch(settings);
  ResNet model(model_options(preset));
  if (!settings.weights.empty()) load_state_dict(settings.weights, module_state(*model));
  model->to(device);
  model->train();
  return model;
}

// ResNet's model, LARS (or SGD), gradient exchange and loop, as a run, a bench and an export build them.
class ResNetTrainer : public TrainerOf<Settings> {
 public:
  ResNetTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose)
      : TrainerOf(settings, context),
        model_(starting_model(settings, preset_, context.device)),
        optimizer_(optimizer_parameters(model_), LarsOptions()
                                                     .momentum(preset_.momentum)
                                                     .weight_decay(preset_.weight_decay)
                                                     .eta(preset_.lars_eta)
                                                     .layer_adaptation(preset_.lars())),
        gradients_(*context.world, model_->parameters(), model_->buffers()),  // rank 0's initial weights
        loop_(config_, context.device, model_->parameters(), &gradients_) {}

  // One update on a batch of this rank's images and labels at `learning_rate`.
  TrainingStep step(torch::Tensor images, torch::Tensor labels, double learning_rate) {
    return training_step(model_, optimizer_, std::move(images), std::move(labels), preset_.label_smoothing,
                         learning_rate);
  }
  ResNet& model() { return model_; }
  TrainingLoop& loop() { return loop_; }
  parallel::GradientSync* gradient_exchange() override { return &gradients_; }

  std::vector<std::string> initialized_tensors() const override {
    std::vector<std::string> names;
    for (const auto& parameter : model_->named_parameters()) names.push_back(mlperf_tensor_name(parameter.key()));
    return names;
  }

  void save_model(const std::string& path) const override { save_state_dict(module_state(*model_), path); }

  SyntheticStep synthetic_step(BenchRun& run) override {
    const int64_t batch_size = run.local_batch, image_size = preset_.image_size;
    const auto images = torch::randn({batch_size, 3, image_size, image_size}, context_.device);
    const auto labels = torch::randint(preset_.num_classes, {batch_size},
                                       torch::TensorOptions(torch::kInt64).device(context_.device));
    // item() in the loop's update waits for the device, so the whole step is timed.
    return {[this, images, labels] { loop_.update(step(images, labels, 0.01)); }, "img",
            3.0 * 2.0 * static_cast<double>(model_->forward_macs(image_size)), std::to_string(image_size) + " px"};
  }

  // The data pipeline alone (decode, augment, batch), as training consumes it; measured per process.
  void bench_after_training(BenchRun& run, std::ostream& out, double step_seconds) override {
    if (!run.measures_data_pipeline(out)) return;
    data::ImageFolderIndex index = data::index_imagenet(run.settings.data_dir);
    data::ImageLoader loader(std::move(index.train), loader_options(preset_, true, run.settings, context_));
    loader.start_epoch(1);
    print_data_pipeline(out, run.bench, preset_.loader_threads, static_cast<double>(run.local_batch) / step_seconds,
                        [&] { return loader.next(); });
  }

 private:
  ResNet model_;
  Lars optimizer_;
  parallel::GradientSync gradients_;
  TrainingLoop loop_;
};

class ResNetWorkload : public WorkloadBase {
 public:
  explicit ResNetWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(read_settings<Settings>(config_)) {
    loader_threads(config_, "loader_threads");  // refused before the log opens
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("img");
    description.schedule.first_block = static_cast<double>(preset_.eval_first_epoch);
    description.schedule.interval = static_cast<double>(preset_.eval_interval_epochs);
    description.schedule.max_epochs = static_cast<double>(preset_.max_epochs);
    const std::string prefix = preset_.lars() ? "lars_opt_" : "sgd_opt_";
    description.hyperparameters = {
        {"global_batch_size", preset_.batch_size},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", preset_.optimizer},
        {prefix + "base_learning_rate", preset_.base_learning_rate},
        {prefix + "end_learning_rate", preset_.end_learning_rate},
        {prefix + "learning_rate_decay_poly_power", 2},
        {prefix + "momentum", preset_.momentum},
        {prefix + "weight_decay", preset_.weight_decay},
    };
    if (preset_.lars()) {
      description.hyperparameters.push_back({"lars_opt_learning_rate_warmup_epochs", preset_.warmup_epochs});
      description.hyperparameters.push_back({"lars_epsilon", 0.0});
    } else {
      description.hyperparameters.push_back({"opt_learning_rate_warmup_epochs", preset_.warmup_epochs});
      description.hyperparameters.push_back({"model_bn_span", preset_.batch_size});
    }
    description.hyperparameters.push_back({"trainbench_model", config_.string("summary")});
    return description;
  }

  std::vector<std::string> build() override {
    require_data_dir(kDataset);
    trainer_ = std::make_unique<ResNetTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override {
    data::ImageFolderIndex index = data::index_imagenet(settings_.data_dir);
    if (static_cast<int64_t>(index.classes.size()) != preset_.num_classes)
      fail(settings_.data_dir + "/train", "has " + std::to_string(index.classes.size()) + " class folders but " +
                                              config_.name() + " expects num_classes = " +
                                              std::to_string(preset_.num_classes));
    train_loader_.emplace(std::move(index.train), loader_options(preset_, true, settings_, parallel_context()));
    eval_loader_.emplace(std::move(index.val), loader_options(preset_, false, settings_, parallel_context()));

    const int64_t steps_per_epoch = train_loader_->batches_per_epoch();  // >= 1: the loader rejects smaller sets
    const int64_t warmup_steps = preset_.warmup_epochs * steps_per_epoch;
    schedule_ = {preset_.base_learning_rate, preset_.end_learning_rate, 2.0, warmup_steps,
                 std::max<int64_t>(1, preset_.train_epochs * steps_per_epoch - warmup_steps)};

    std::vector<double> samples{static_cast<double>(train_loader_->samples_per_epoch()),
                                static_cast<double>(eval_loader_->samples_per_epoch())};
    communicator_->sum(samples);  // each rank counted its own shard
    DataSummary summary;
    summary.train_samples = static_cast<int64_t>(samples[0]);
    summary.eval_samples = static_cast<int64_t>(samples[1]);
    summary.derived_hyperparameters = {
        {std::string(preset_.lars() ? "lars_opt_" : "sgd_opt_") + "learning_rate_decay_steps", schedule_.decay_steps}};
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    trainer_->model()->train();
    TrainingLoop& loop = trainer_->loop();
    return loop.train_epochs(block, control, *train_loader_, [&](data::ImageBatch& batch, int64_t) {
      auto [images, labels] = as_tensors(batch, preset_.image_size, device_);
      return trainer_->step(images, labels, schedule_.at(loop.updates()));
    });
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    trainer_->gradient_exchange()->broadcast_buffers();  // every rank evaluates rank 0's batch-norm statistics
    ResNet& model = trainer_->model();
    model->eval();
    int64_t correct = 0, total = 0;
    eval_loader_->start_epoch(0);
    while (auto batch = eval_loader_->next()) {
      if (batch->size == 0) continue;
      auto [images, labels] = as_tensors(*batch, preset_.image_size, device_);
      correct += model->forward(images).argmax(1).eq(labels).sum().item<int64_t>();
      total += batch->size;
      control.check_interrupt();
    }
    model->train();
    return fraction_over_ranks(static_cast<double>(correct), static_cast<double>(total), settings_.data_dir + "/val",
                               "no readable validation images");
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  const Settings preset_;
  std::unique_ptr<ResNetTrainer> trainer_;
  std::optional<data::ImageLoader> train_loader_, eval_loader_;
  PolyWarmupSchedule schedule_;
};

void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const Settings preset = read_settings<Settings>(config);
  if (!preset.dataset)
    fail("--preset " + config.name(), "has no generated dataset; pass --data with an ImageNet-layout tree");
  data::ImageClassesOptions options;
  options.classes = static_cast<int>(preset.dataset->classes);
  options.train_per_class = static_cast<int>(preset.dataset->train_per_class);
  options.val_per_class = static_cast<int>(preset.dataset->val_per_class);
  options.image_size = static_cast<int>(preset.dataset->image_size);
  options.seed = static_cast<uint64_t>(seed);
  data::make_image_classification_dataset(out_dir, options);
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"resnet", "Image classification: ResNet-50 v1.5 on ImageNet, target top-1 0.759", trainbench_presets_resnet,
          kDataset, construct_workload<ResNetWorkload>, construct_trainer<ResNetTrainer>, make_dataset,
          /*prepare_dataset=*/nullptr};
}

}  // namespace trainbench::resnet
