// The light-weight object detection benchmark (MLPerf "ssd"): SSD300 with a ResNet-34 backbone on COCO 2017,
// target box mAP 0.23, evaluated every 5 epochs from epoch 5.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include <torch/torch.h>

#include "coco/evaluator.h"
#include "detection/coco_detection.h"
#include "detection/detection_loader.h"
#include "parallel/communicator.h"
#include "parallel/gradient_sync.h"
#include "util/error.h"
#include "workloads/common.h"
#include "workloads/detection_common.h"
#include "workloads/data_pipeline_bench.h"
#include "workloads/ssd/model.h"

extern const char* const trainbench_presets_ssd;

namespace trainbench::ssd {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset =
    "a COCO 2017 tree (train2017/, val2017/, annotations/instances_{train,val}2017.json)";
// The largest number dividing every channel count of the reference model (64 ... 512).
constexpr int64_t kReferenceChannelGcd = 64;

detection::DefaultBoxGeometry geometry(const Config& config) {
  detection::DefaultBoxGeometry geometry;
  geometry.figure_size = static_cast<double>(config.integer("image_size"));
  geometry.feature_sizes = feature_sizes(config.integer("image_size"));
  geometry.steps = config.numbers("box_steps");
  geometry.scales = config.numbers("box_scales");
  const std::string where = config.name() + ": box_aspect_ratios";
  const auto& ratios = config.values().at("box_aspect_ratios");
  if (!ratios.is_array()) fail(where, "expected a list of ratio lists, one per feature level");
  for (const auto& level : ratios) {
    if (!level.is_array()) fail(where, "expected a list of ratio lists, got " + level.dump());
    std::vector<double> values;
    for (const auto& ratio : level) {
      if (!ratio.is_number()) fail(where, "expected numbers, got " + ratio.dump());
      values.push_back(ratio.get<double>());
    }
    geometry.aspect_ratios.push_back(values);
  }
  geometry.check(config.name() + ": default boxes");
  return geometry;
}

SsdOptions model_options(const Config& config) {
  const int64_t divisor = config.integer("width_divisor");
  if (divisor < 1 || kReferenceChannelGcd % divisor != 0)
    fail(config.name() + ": width_divisor", "expected a divisor of every channel count of the reference model (64, "
                                            "128, 256, 512): 1, 2, 4, 8, 16, 32 or 64, got " + std::to_string(divisor));
  return SsdOptions()
      .num_classes(config.integer("num_classes"))
      .image_size(config.integer("image_size"))
      .blocks_per_stage(config.integers("blocks_per_stage"))
      .width_divisor(config.integer("width_divisor"))
      .geometry(geometry(config));
}

// What a run starts from over the seeded initialization: --weights (a whole model in the reference's names),
// else the preset's ImageNet backbone, which a preset that says pretrained_backbone must name.
void load_starting_weights(Ssd& model, const WorkloadSettings& settings) {
  const Config& config = settings.config;
  const std::string backbone = config.string("backbone_weights");
  if (!settings.weights.empty())
    load_state_dict(settings.weights, official_state(model));
  else if (!backbone.empty())
    model->load_backbone(backbone);
  else if (config.boolean("pretrained_backbone"))
    fail(config.name() + ": backbone_weights",
         "the preset starts from ImageNet weights; pass --set backbone_weights=PATH (docs/ssd.md says how to convert "
         "torchvision's resnet34-333f7ec4.pth) or --weights FILE");
}

DecodeOptions decode_options(const Config& config) {
  DecodeOptions options;
  options.score_threshold = config.number("score_threshold");
  options.candidates_per_class = config.integer("candidates_per_class");
  options.nms_iou = config.number("nms_iou");
  options.max_detections = config.integer("max_detections");
  return options;
}

// The reference scales --lr by the global batch over 32; the scaled value is the one logged.
double base_learning_rate(const Config& config) {
  return config.number("learning_rate_per_32") * static_cast<double>(config.integer("batch_size")) / 32.0;
}

torch::optim::SGD make_optimizer(Ssd& model, const Config& config) {
  return torch::optim::SGD(model->parameters(), torch::optim::SGDOptions(base_learning_rate(config))
                                                    .momentum(config.number("momentum"))
                                                    .weight_decay(config.number("weight_decay")));
}

detection::DetectionLoaderOptions loader_options(const Config& config, bool train, int64_t seed,
                                                 const parallel::Communicator& communicator) {
  detection::DetectionLoaderOptions options;
  options.mode = train ? data::LoaderMode::Train : data::LoaderMode::Eval;
  options.image_size = static_cast<int>(config.integer("image_size"));
  options.batch_size = train ? local_batch_size(config, "batch_size", communicator.world()) : config.integer("eval_batch_size");
  options.drop_last = train;
  options.workers = loader_threads(config, "loader_threads");
  options.prefetch_batches = static_cast<int>(config.integer("prefetch_batches"));
  options.seed = static_cast<uint64_t>(seed);
  options.rank = communicator.rank();
  options.world = communicator.world();
  options.crop_attempts = static_cast<int>(config.integer("max_samples"));
  return options;
}

// The matched targets of a batch: (N, boxes, 4) xywh and (N, boxes) labels, on the model's device.
std::pair<torch::Tensor, torch::Tensor> batch_targets(Ssd& model, detection::DetectionBatch& batch) {
  const torch::Device device = model->default_boxes_xywh().device();
  std::vector<torch::Tensor> boxes, labels;
  for (int64_t i = 0; i < batch.size; ++i) {
    const int64_t first = batch.object_offsets[i], count = batch.object_offsets[i + 1] - first;
    const auto truth = torch::from_blob(batch.boxes.data() + 4 * first, {count, 4}, torch::kFloat32).to(device);
    const auto truth_labels = torch::from_blob(batch.labels.data() + first, {count}, torch::kInt64).to(device);
    auto [matched, matched_labels] = match(truth, truth_labels, model->default_boxes_ltrb(), model->default_boxes_xywh());
    boxes.push_back(matched);
    labels.push_back(matched_labels);
  }
  return {torch::stack(boxes), torch::stack(labels)};
}

torch::Tensor batch_images(detection::DetectionBatch& batch, int64_t image_size, torch::Device device) {
  return torch::from_blob(batch.images.data(), {batch.size, 3, image_size, image_size}, torch::kFloat32).to(device);
}

class SsdWorkload : public WorkloadBase {
 public:
  // The model's geometry (image_size, default boxes, width_divisor) and the loader threads are refused here,
  // before the log opens.
  explicit SsdWorkload(WorkloadSettings settings) : WorkloadBase(std::move(settings)) {
    model_options(config_);
    loader_threads(config_, "loader_threads");
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("img");
    description.schedule.first_block = static_cast<double>(config_.integer("eval_first_epoch"));
    description.schedule.interval = static_cast<double>(config_.integer("eval_interval_epochs"));
    description.schedule.max_epochs = static_cast<double>(config_.integer("max_epochs"));
    description.hyperparameters = {
        {"global_batch_size", config_.integer("batch_size")},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_base_learning_rate", base_learning_rate(config_)},
        {"opt_weight_decay", config_.number("weight_decay")},
        {"opt_learning_rate_warmup_factor", config_.integer("warmup_factor")},
        {"opt_learning_rate_decay_boundary_epochs", config_.integers("decay_epochs")},
        {"model_bn_span", local_batch("batch_size")},  // no batch-norm synchronisation, as in the reference
        {"max_samples", config_.integer("max_samples")},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    seed_torch(settings_);
    require_data_dir(kDataset);
    model_ = Ssd(model_options(config_));
    load_starting_weights(model_, settings_);
    model_->to(device_);
    model_->train();
    optimizer_.emplace(make_optimizer(model_, config_));
    gradients_.emplace(*communicator_, model_->parameters(), model_->buffers());
    loop_.emplace(config_, device_, model_->parameters(), &*gradients_);
    return model_->mlperf_tensor_names();
  }

  void save_weights(const std::string& path) const override { save_state_dict(official_state(model_), path); }

  DataSummary open_data() override {
    const fs::path root(settings_.data_dir);
    auto train = detection::load_coco_detection((root / "annotations" / "instances_train2017.json").string(),
                                                (root / "train2017").string());
    auto val = detection::load_coco_detection((root / "annotations" / "instances_val2017.json").string(),
                                              (root / "val2017").string());
    const int64_t classes = static_cast<int64_t>(train.category_ids.size()) + 1;
    if (classes != config_.integer("num_classes") || val.category_ids != train.category_ids)
      fail(settings_.data_dir + "/annotations", "has " + std::to_string(train.category_ids.size()) +
                                                    " categories (train and val must list the same) but " +
                                                    config_.name() + " expects num_classes = " +
                                                    std::to_string(config_.integer("num_classes")) + " with background");
    category_ids_ = train.category_ids;
    val_samples_ = static_cast<int64_t>(val.samples.size());
    for (size_t i = 0; i < val.samples.size(); ++i) val_index_[val.samples[i].image_id] = static_cast<int64_t>(i);
    const int64_t train_samples = static_cast<int64_t>(train.samples.size());
    train_loader_.emplace(std::move(train.samples), loader_options(config_, true, settings_.seed, *communicator_));
    eval_loader_.emplace(std::move(val.samples), loader_options(config_, false, settings_.seed, *communicator_));
    evaluator_.emplace(std::move(val.ground_truth), coco::IouType::bbox,
                       (root / "annotations" / "instances_val2017.json").string());

    // The reference's warm-up length: int(warmup_epochs * train images / global batch) iterations.
    warmup_steps_ = static_cast<int64_t>(config_.number("warmup_epochs") * static_cast<double>(train_samples) /
                                         static_cast<double>(config_.integer("batch_size")));
    DataSummary summary;
    summary.train_samples = train_samples;
    summary.eval_samples = val_samples_;
    summary.derived_hyperparameters = {{"opt_learning_rate_warmup_steps", std::max<int64_t>(warmup_steps_, 1)}};
    log_dropped_boxes(train, val, summary);
    return summary;
  }

  // The reference's schedule: linear warm-up from base / 2^warmup_factor below base over warmup_steps
  // iterations, then x decay_factor at the start of each 0-based epoch in decay_epochs.
  double learning_rate(int64_t step, int64_t epoch) const {
    const double base = base_learning_rate(config_);
    if (step < warmup_steps_)
      return base - static_cast<double>(warmup_steps_ - step) * base /
                        (static_cast<double>(warmup_steps_) * std::pow(2.0, config_.number("warmup_factor")));
    double rate = base;
    for (int64_t boundary : config_.integers("decay_epochs"))
      if (epoch - 1 >= boundary) rate *= config_.number("decay_factor");
    return rate;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    model_->train();
    const int64_t image_size = config_.integer("image_size");
    return loop_->train_epochs(block, control, *train_loader_, [&](detection::DetectionBatch& batch, int64_t epoch) {
      const auto [boxes, labels] = batch_targets(model_, batch);
      return training_step(model_, *optimizer_, batch_images(batch, image_size, device_), boxes, labels,
                           learning_rate(loop_->updates(), epoch));
    });
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    average_running_statistics();
    model_->eval();
    const int64_t image_size = config_.integer("image_size");
    const DecodeOptions decoding = decode_options(config_);
    // Each rank decodes its share of the images into fixed rows (count, then x, y, w, h, score, label per
    // detection) at the image's place, so one sum over the ranks gathers every detection.
    const size_t row = 1 + 6 * static_cast<size_t>(decoding.max_detections);
    std::vector<double> rows(static_cast<size_t>(val_samples_) * row, 0.0);
    eval_loader_->start_epoch(0);
    while (auto batch = eval_loader_->next()) {
      if (batch->size == 0) continue;
      const auto [locations, scores] = model_->forward(batch_images(*batch, image_size, device_));
      for (int64_t i = 0; i < batch->size; ++i) {
        const ImageDetections found = decode(locations[i], scores[i], model_->default_boxes_xywh(), decoding);
        const auto boxes = found.boxes_ltrb.to(torch::kCPU, torch::kFloat64).contiguous();
        const auto labels = found.labels.to(torch::kCPU).contiguous();
        const auto probabilities = found.scores.to(torch::kCPU, torch::kFloat64).contiguous();
        const auto box = boxes.accessor<double, 2>();
        const auto label = labels.accessor<int64_t, 1>();
        const auto probability = probabilities.accessor<double, 1>();
        double* out = rows.data() + static_cast<size_t>(val_index_.at(batch->image_ids[i])) * row;
        const double width = batch->widths[i], height = batch->heights[i];
        out[0] = static_cast<double>(labels.size(0));
        for (int64_t k = 0; k < labels.size(0); ++k) {
          double* detection = out + 1 + 6 * k;
          detection[0] = box[k][0] * width;
          detection[1] = box[k][1] * height;
          detection[2] = (box[k][2] - box[k][0]) * width;
          detection[3] = (box[k][3] - box[k][1]) * height;
          detection[4] = probability[k];
          detection[5] = static_cast<double>(label[k]);
        }
      }
      control.check_interrupt();
    }
    if (communicator_->world() > 1) communicator_->sum(rows);
    model_->train();

    std::vector<coco::Detection> detections;
    for (const auto& [image_id, index] : val_index_) {
      const double* out = rows.data() + static_cast<size_t>(index) * row;
      for (int64_t k = 0; k < static_cast<int64_t>(out[0]); ++k) {
        const double* detection = out + 1 + 6 * k;
        detections.push_back(coco::box_detection(image_id, category_ids_[static_cast<size_t>(detection[5]) - 1],
                                                 {detection[0], detection[1], detection[2], detection[3]}, detection[4]));
      }
    }
    return evaluator_->evaluate(detections, "ssd detections", static_cast<unsigned>(settings_.threads)).stats[0];
  }

 private:
  // As the reference's train.py before each evaluation: every rank's batch-norm running mean and variance
  // summed over the ranks and divided by their number, kept in the model afterwards.
  void average_running_statistics() {
    std::vector<torch::Tensor> statistics;
    for (const auto& buffer : model_->named_buffers())
      if (buffer.key().find("running_mean") != std::string::npos || buffer.key().find("running_var") != std::string::npos)
        statistics.push_back(buffer.value());
    parallel::average_over_ranks(*communicator_, statistics);
  }

  Ssd model_{nullptr};
  std::optional<torch::optim::SGD> optimizer_;
  std::optional<parallel::GradientSync> gradients_;
  std::optional<TrainingLoop> loop_;
  std::optional<detection::DetectionLoader> train_loader_, eval_loader_;
  std::optional<coco::Evaluator> evaluator_;
  std::vector<int64_t> category_ids_;
  std::unordered_map<int64_t, int64_t> val_index_;  // image id -> position among the evaluated images
  int64_t val_samples_ = 0;
  int64_t warmup_steps_ = 0;
};

// checkpoint export: the model a run of `settings` starts from, as build() makes it, under the reference
// SSD300's names.
void export_weights(const WorkloadSettings& settings, const std::string& out_path) {
  seed_torch(settings);
  Ssd model(model_options(settings.config));
  load_starting_weights(model, settings);
  save_state_dict(official_state(model), out_path);
}

void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out) {
  const Config& config = settings.config;
  BenchRun run(settings, bench_settings);
  const int64_t image_size = config.integer("image_size"), batch_size = run.local_batch;
  Ssd model(model_options(config));
  model->to(run.device);
  model->train();
  auto optimizer = make_optimizer(model, config);
  parallel::GradientSync gradients(*run.communicator, model->parameters(), model->buffers());
  TrainingLoop loop(config, run.device, model->parameters(), &gradients);
  // Training throughput: the whole step (matching, forward, loss, backward, all-reduce, update) on a batch in
  // memory with three objects per image, so the number is the compute side alone.
  detection::DetectionBatch batch;
  batch.size = batch_size;
  batch.images.resize(static_cast<size_t>(batch_size * 3 * image_size * image_size));
  const auto noise = torch::randn({batch_size, 3, image_size, image_size});
  std::copy(noise.data_ptr<float>(), noise.data_ptr<float>() + noise.numel(), batch.images.begin());
  batch.object_offsets.push_back(0);
  for (int64_t i = 0; i < batch_size; ++i) {
    for (int k = 0; k < 3; ++k) {
      const float left = 0.1f * static_cast<float>(k), top = 0.05f * static_cast<float>((i + k) % 5);
      batch.boxes.insert(batch.boxes.end(), {left, top, left + 0.4f, top + 0.5f});
      batch.labels.push_back(1 + (i + k) % (config.integer("num_classes") - 1));
    }
    batch.object_offsets.push_back(static_cast<int64_t>(batch.labels.size()));
  }
  const auto images = batch_images(batch, image_size, run.device);
  const double step_time = run.training_step_seconds([&] {
    const auto [boxes, labels] = batch_targets(model, batch);
    loop.update(training_step(model, optimizer, images, boxes, labels, 1e-3));
  });
  run.print_training(out, step_time, "img", 3.0 * 2.0 * static_cast<double>(model->forward_macs()),
                     std::to_string(image_size) + " px");
  if (run.memory_only() || run.communicator->world() > 1) return;  // the data pipeline is measured per process
  if (settings.data_dir.empty()) {
    out << "data pipeline   skipped (no dataset: pass --data)\n";
    return;
  }
  // Data pipeline throughput: the training loader alone (decode, SSD crop, flip, resize, jitter, batch).
  const fs::path root(settings.data_dir);
  auto train = detection::load_coco_detection((root / "annotations" / "instances_train2017.json").string(),
                                              (root / "train2017").string());
  detection::DetectionLoader loader(std::move(train.samples), loader_options(config, true, settings.seed, *run.communicator));
  loader.start_epoch(1);
  print_data_pipeline(out, bench_settings, config.integer("loader_threads"), static_cast<double>(batch_size) / step_time,
                      [&] { return loader.next(); });
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"ssd", "Object detection: SSD300 with a ResNet-34 backbone on COCO 2017, target box mAP 0.23",
          trainbench_presets_ssd, kDataset, construct_workload<SsdWorkload>, bench, make_generated_coco_dataset,
          /*prepare_dataset=*/nullptr, export_weights};
}

}  // namespace trainbench::ssd
