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

extern const char* const trainbench_presets_resnet;

namespace trainbench::resnet {

namespace {

constexpr const char* kDataset = "an ImageNet-layout tree (train/ with a folder per class, val/)";

// Every size is checked here, naming its setting, before LibTorch would reject it with a c10::Error.
ResNetOptions model_options(const Config& config) {
  const auto blocks_per_stage = config.integers_at_least("blocks_per_stage", 1);
  const auto stage_widths = config.integers_at_least("stage_widths", 1);
  if (blocks_per_stage.size() != stage_widths.size())
    fail(config.name() + ": blocks_per_stage", "expected one block count per stage width (" +
                                                   std::to_string(stage_widths.size()) + "), got " +
                                                   std::to_string(blocks_per_stage.size()));
  return ResNetOptions()
      .blocks_per_stage(blocks_per_stage)
      .stage_widths(stage_widths)
      .stem_width(config.integer_at_least("stem_width", 1))
      .stem_kernel(config.integer_at_least("stem_kernel", 1))
      .stem_stride(config.integer_at_least("stem_stride", 1))
      .stem_max_pool(config.boolean("stem_max_pool"))
      .expansion(config.integer_at_least("expansion", 1))
      .num_classes(config.integer_at_least("num_classes", 2));
}

bool uses_lars(const Config& config) {
  const std::string name = config.string("optimizer");
  if (name != "lars" && name != "sgd") fail(config.name() + ": optimizer", "expected \"lars\" or \"sgd\", got \"" + name + "\"");
  return name == "lars";
}

// Each rank loads its strided share of every global batch (data/image_loader.h), so the global batch is the
// same whatever the number of ranks.
data::ImageLoaderOptions loader_options(const Config& config, bool train, int64_t seed, bool skip_corrupt,
                                        const parallel::Communicator& communicator) {
  data::ImageLoaderOptions options;
  options.mode = train ? data::LoaderMode::Train : data::LoaderMode::Eval;
  options.crop_size = static_cast<int>(config.integer_at_least("image_size", 1));
  options.resize_size = static_cast<int>(config.integer_at_least("eval_resize", 1));
  options.crop.min_scale = config.number("crop_min_scale");
  options.batch_size = local_batch_size(config, "batch_size", communicator.world());
  options.rank = communicator.rank();
  options.world = communicator.world();
  options.drop_last = train;
  options.workers = loader_threads(config, "loader_threads");
  options.prefetch_batches = static_cast<int>(config.integer_at_least("prefetch_batches", 1));
  options.seed = static_cast<uint64_t>(seed);
  options.skip_corrupt = skip_corrupt;
  return options;
}

Lars make_optimizer(ResNet& model, const Config& config) {
  return Lars(optimizer_parameters(model), LarsOptions()
                                       .momentum(config.number("momentum"))
                                       .weight_decay(config.number("weight_decay"))
                                       .eta(config.number("lars_eta"))
                                       .layer_adaptation(uses_lars(config)));
}

// Wraps a loader batch as tensors on `device`: no copy on the CPU (the batch must outlive them), one
// host-to-device copy otherwise.
std::pair<torch::Tensor, torch::Tensor> as_tensors(data::ImageBatch& batch, int64_t image_size, torch::Device device) {
  auto images = torch::from_blob(batch.images.data(), {batch.size, 3, image_size, image_size}, torch::kFloat32);
  auto labels = torch::from_blob(batch.labels.data(), {batch.size}, torch::kInt64);
  return {images.to(device), labels.to(device)};
}

class ResNetWorkload : public WorkloadBase {
 public:
  explicit ResNetWorkload(WorkloadSettings settings) : WorkloadBase(std::move(settings)), lars_(uses_lars(config_)) {
    loader_threads(config_, "loader_threads");  // refused before the log opens
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("img");
    description.schedule.first_block = static_cast<double>(config_.integer("eval_first_epoch"));
    description.schedule.interval = static_cast<double>(config_.integer("eval_interval_epochs"));
    description.schedule.max_epochs = static_cast<double>(config_.integer("max_epochs"));
    const std::string prefix = lars_ ? "lars_opt_" : "sgd_opt_";
    description.hyperparameters = {
        {"global_batch_size", config_.integer("batch_size")},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", lars_ ? "lars" : "sgd"},
        {prefix + "base_learning_rate", config_.number("base_learning_rate")},
        {prefix + "end_learning_rate", config_.number("end_learning_rate")},
        {prefix + "learning_rate_decay_poly_power", 2},
        {prefix + "momentum", config_.number("momentum")},
        {prefix + "weight_decay", config_.number("weight_decay")},
    };
    if (lars_) {
      description.hyperparameters.push_back({"lars_opt_learning_rate_warmup_epochs", config_.integer("warmup_epochs")});
      description.hyperparameters.push_back({"lars_epsilon", 0.0});
    } else {
      description.hyperparameters.push_back({"opt_learning_rate_warmup_epochs", config_.integer("warmup_epochs")});
      description.hyperparameters.push_back({"model_bn_span", config_.integer("batch_size")});
    }
    description.hyperparameters.push_back({"trainbench_model", config_.string("summary")});
    return description;
  }

  std::vector<std::string> build() override {
    seed_torch(settings_);
    require_data_dir(kDataset);
    model_ = ResNet(model_options(config_));
    if (!settings_.weights.empty()) load_state_dict(settings_.weights, module_state(*model_));
    model_->to(device_);
    model_->train();
    optimizer_.emplace(make_optimizer(model_, config_));
    gradients_.emplace(*communicator_, model_->parameters(), model_->buffers());  // rank 0's initial weights
    loop_.emplace(config_, device_, model_->parameters(), &*gradients_);
    std::vector<std::string> initialized;
    for (const auto& parameter : model_->named_parameters()) initialized.push_back(mlperf_tensor_name(parameter.key()));
    return initialized;
  }

  void save_weights(const std::string& path) const override { save_state_dict(module_state(*model_), path); }

  DataSummary open_data() override {
    data::ImageFolderIndex index = data::index_imagenet(settings_.data_dir);
    if (static_cast<int64_t>(index.classes.size()) != config_.integer("num_classes"))
      fail(settings_.data_dir + "/train", "has " + std::to_string(index.classes.size()) + " class folders but " +
                                              config_.name() + " expects num_classes = " +
                                              std::to_string(config_.integer("num_classes")));
    train_loader_.emplace(std::move(index.train),
                          loader_options(config_, true, settings_.seed, settings_.skip_corrupt, *communicator_));
    eval_loader_.emplace(std::move(index.val),
                         loader_options(config_, false, settings_.seed, settings_.skip_corrupt, *communicator_));

    const int64_t steps_per_epoch = train_loader_->batches_per_epoch();  // >= 1: the loader rejects smaller sets
    const int64_t warmup_steps = config_.integer("warmup_epochs") * steps_per_epoch;
    schedule_ = {config_.number("base_learning_rate"), config_.number("end_learning_rate"), 2.0, warmup_steps,
                 std::max<int64_t>(1, config_.integer("train_epochs") * steps_per_epoch - warmup_steps)};

    std::vector<double> samples{static_cast<double>(train_loader_->samples_per_epoch()),
                                static_cast<double>(eval_loader_->samples_per_epoch())};
    communicator_->sum(samples);  // each rank counted its own shard
    DataSummary summary;
    summary.train_samples = static_cast<int64_t>(samples[0]);
    summary.eval_samples = static_cast<int64_t>(samples[1]);
    summary.derived_hyperparameters = {
        {std::string(lars_ ? "lars_opt_" : "sgd_opt_") + "learning_rate_decay_steps", schedule_.decay_steps}};
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    model_->train();
    const int64_t image_size = config_.integer("image_size");
    const double label_smoothing = config_.number("label_smoothing");
    return loop_->train_epochs(block, control, *train_loader_, [&](data::ImageBatch& batch, int64_t) {
      auto [images, labels] = as_tensors(batch, image_size, device_);
      return training_step(model_, *optimizer_, images, labels, label_smoothing, schedule_.at(loop_->updates()));
    });
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    gradients_->broadcast_buffers();  // every rank evaluates rank 0's batch-norm statistics
    model_->eval();
    const int64_t image_size = config_.integer("image_size");
    int64_t correct = 0, total = 0;
    eval_loader_->start_epoch(0);
    while (auto batch = eval_loader_->next()) {
      if (batch->size == 0) continue;
      auto [images, labels] = as_tensors(*batch, image_size, device_);
      correct += model_->forward(images).argmax(1).eq(labels).sum().item<int64_t>();
      total += batch->size;
      control.check_interrupt();
    }
    model_->train();
    return fraction_over_ranks(static_cast<double>(correct), static_cast<double>(total), settings_.data_dir + "/val",
                               "no readable validation images");
  }

 private:
  bool lars_;
  ResNet model_{nullptr};
  std::optional<Lars> optimizer_;
  std::optional<parallel::GradientSync> gradients_;
  std::optional<TrainingLoop> loop_;
  std::optional<data::ImageLoader> train_loader_, eval_loader_;
  PolyWarmupSchedule schedule_;
};

void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  if (!config.values().contains("dataset"))
    fail("--preset " + config.name(), "has no generated dataset; pass --data with an ImageNet-layout tree");
  const Config dataset(config.name() + ": dataset", config.values().at("dataset"));
  data::ImageClassesOptions options;
  options.classes = static_cast<int>(dataset.integer("classes"));
  options.train_per_class = static_cast<int>(dataset.integer("train_per_class"));
  options.val_per_class = static_cast<int>(dataset.integer("val_per_class"));
  options.image_size = static_cast<int>(dataset.integer("image_size"));
  options.seed = static_cast<uint64_t>(seed);
  data::make_image_classification_dataset(out_dir, options);
}

void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out) {
  const Config& config = settings.config;
  BenchRun run(settings, bench_settings);
  const torch::Device device = run.device;
  const auto& communicator = run.communicator;
  const int64_t image_size = config.integer("image_size"), batch_size = run.local_batch;
  ResNet model(model_options(config));
  model->to(device);
  model->train();
  Lars optimizer = make_optimizer(model, config);
  parallel::GradientSync gradients(*communicator, model->parameters(), model->buffers());
  TrainingLoop loop(config, device, model->parameters(), &gradients);
  // Training throughput: the full step (forward, loss, backward, gradient all-reduce, optimizer) on batches
  // already in memory, so the number is the compute and communication side alone.
  const auto images = torch::randn({batch_size, 3, image_size, image_size}, device);
  const auto labels = torch::randint(config.integer("num_classes"), {batch_size}, torch::TensorOptions(torch::kInt64).device(device));
  int64_t calls = 0;
  const double step_time = run.training_step_seconds([&] {
    if (calls++ == bench_settings.warmup_steps) gradients.reset_stats();  // communication of the timed steps only
    // item() waits for the device, so the whole step is timed.
    loop.update(training_step(model, optimizer, images, labels, config.number("label_smoothing"), 0.01));
  });
  run.print_training(out, step_time, "img", 3.0 * 2.0 * static_cast<double>(model->forward_macs(image_size)),
                     std::to_string(image_size) + " px");
  if (run.memory_only()) return;
  // The slowest rank sets the pace: report rank-averaged communication figures.
  std::vector<double> figures{gradients.stats().exposed_wait_seconds, gradients.stats().last_bucket_wait_seconds};
  communicator->sum(figures);
  for (double& figure : figures) figure /= communicator->world();
  char line[384];
  if (communicator->world() > 1) {
    const double steps = static_cast<double>(std::max<int64_t>(1, gradients.stats().steps));
    const double exposed = figures[0] / steps, last_bucket = figures[1] / steps;
    std::snprintf(line, sizeof line,
                  "all-reduce    %d bucket(s), %.2f MB/step over %s; waiting after backward %.2f ms/step (%.1f%% of the step),"
                  " of which %.2f ms on the last bucket, which cannot overlap; overlappable wait %.1f%% of the step\n",
                  gradients.stats().buckets, gradients.stats().bytes_per_step / 1e6, communicator->backend(device).c_str(),
                  exposed * 1e3, 100 * exposed / step_time, last_bucket * 1e3, 100 * (exposed - last_bucket) / step_time);
    out << line;
  }
  if (communicator->world() > 1) return;  // the data pipeline is measured per process

  if (settings.data_dir.empty()) {
    out << "data pipeline   skipped (no dataset: pass --data)\n";
    return;
  }
  // Data pipeline throughput: the training loader alone (decode, augment, batch), as training consumes it.
  data::ImageFolderIndex index = data::index_imagenet(settings.data_dir);
  data::ImageLoader loader(std::move(index.train),
                           loader_options(config, true, settings.seed, settings.skip_corrupt, *communicator));
  loader.start_epoch(1);
  print_data_pipeline(out, bench_settings, config.integer("loader_threads"), batch_size / step_time,
                      [&] { return loader.next(); });
}

// checkpoint export: the model a run of `settings` starts from, as build() makes it, under torchvision's
// state_dict names (the module tree is written with them).
void export_weights(const WorkloadSettings& settings, const std::string& out_path) {
  seed_torch(settings);
  ResNet model(model_options(settings.config));
  if (!settings.weights.empty()) load_state_dict(settings.weights, module_state(*model));
  save_state_dict(module_state(*model), out_path);
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"resnet", "Image classification: ResNet-50 v1.5 on ImageNet, target top-1 0.759", trainbench_presets_resnet,
          kDataset, construct_workload<ResNetWorkload>, bench, make_dataset, /*prepare_dataset=*/nullptr, export_weights};
}

}  // namespace trainbench::resnet
