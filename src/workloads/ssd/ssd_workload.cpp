// The light-weight object detection benchmark (MLPerf "ssd"): SSD300 with a ResNet-34 backbone on COCO 2017,
// target box mAP 0.23, evaluated every 5 epochs from epoch 5.
#include <algorithm>
#include <cmath>
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
#include "workloads/data_pipeline_bench.h"
#include "workloads/detection_common.h"
#include "workloads/ssd/model.h"
#include "workloads/ssd/settings.h"
#include "workloads/trainer.h"

extern const char* const trainbench_presets_ssd;

namespace trainbench::ssd {

namespace {

constexpr const char* kDataset =
    "a COCO 2017 tree (train2017/, val2017/, annotations/instances_{train,val}2017.json)";
// The largest number dividing every channel count of the reference model (64 ... 512).
constexpr int64_t kReferenceChannelGcd = 64;

// `where` names the preset in errors ("ssd/tiny").
detection::DefaultBoxGeometry geometry(const Settings& preset, const std::string& where) {
  detection::DefaultBoxGeometry geometry;
  geometry.figure_size = static_cast<double>(preset.image_size);
  geometry.feature_sizes = feature_sizes(preset.image_size);
  geometry.steps = preset.box_steps;
  geometry.scales = preset.box_scales;
  // settings.json holds it to a list of integer lists, one per level.
  geometry.aspect_ratios = preset.box_aspect_ratios.get<std::vector<std::vector<double>>>();
  geometry.check(where + ": default boxes");
  return geometry;
}

SsdOptions model_options(const Settings& preset, const std::string& where) {
  const int64_t divisor = preset.width_divisor;
  if (divisor < 1 || kReferenceChannelGcd % divisor != 0)
    fail(where + ": width_divisor", "expected a divisor of every channel count of the reference model (64, 128, 256, "
                                    "512): 1, 2, 4, 8, 16, 32 or 64, got " + std::to_string(divisor));
  return SsdOptions()
      .num_classes(preset.num_classes)
      .image_size(preset.image_size)
      .blocks_per_stage(preset.blocks_per_stage)
      .width_divisor(preset.width_divisor)
      .geometry(geometry(preset, where));
}

// What a run and an export start from over the seeded initialization: --weights (a whole model in the
// reference's names), else the preset's ImageNet backbone, which a preset that says pretrained_backbone must name.
void load_starting_weights(Ssd& model, const WorkloadSettings& settings, const Settings& preset) {
  if (!settings.weights.empty())
    load_state_dict(settings.weights, official_state(model));
  else if (!preset.backbone_weights.empty())
    model->load_backbone(preset.backbone_weights);
  else if (preset.pretrained_backbone)
    fail(settings.config.name() + ": backbone_weights",
         "the preset starts from ImageNet weights; pass --set backbone_weights=PATH (docs/ssd.md says how to convert "
         "torchvision's resnet34-333f7ec4.pth) or --weights FILE");
}

// The seeded model with what `purpose` starts from (a bench times the seeded model alone), on `device` in
// training mode.
Ssd starting_model(const WorkloadSettings& settings, const Settings& preset, TrainerPurpose purpose,
                   const torch::Device& device) {
  seed_torch(settings);
  Ssd model(model_options(preset, settings.config.name()));
  if (purpose != TrainerPurpose::kBench) load_starting_weights(model, settings, preset);
  model->to(device);
  model->train();
  return model;
}

DecodeOptions decode_options(const Settings& preset) {
  DecodeOptions options;
  options.score_threshold = preset.score_threshold;
  options.candidates_per_class = preset.candidates_per_class;
  options.nms_iou = preset.nms_iou;
  options.max_detections = preset.max_detections;
  return options;
}

detection::DetectionLoaderOptions loader_options(const Settings& preset, bool train, const WorkloadSettings& settings,
                                                 const parallel::ParallelContext& context) {
  auto options = shared_loader_options<detection::DetectionLoaderOptions>(preset, train, settings, context);
  options.image_size = static_cast<int>(preset.image_size);
  options.crop_attempts = static_cast<int>(preset.max_samples);
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
    auto [matched, matched_labels] =
        match(truth, truth_labels, model->default_boxes_ltrb(), model->default_boxes_xywh());
    boxes.push_back(matched);
    labels.push_back(matched_labels);
  }
  return {torch::stack(boxes), torch::stack(labels)};
}

torch::Tensor batch_images(detection::DetectionBatch& batch, int64_t image_size, torch::Device device) {
  return torch::from_blob(batch.images.data(), {batch.size, 3, image_size, image_size}, torch::kFloat32).to(device);
}

// bench: noise images with three objects each, so the step's matching has boxes to match.
detection::DetectionBatch synthetic_batch(int64_t batch_size, int64_t image_size, int64_t num_classes) {
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
      batch.labels.push_back(1 + (i + k) % (num_classes - 1));
    }
    batch.object_offsets.push_back(static_cast<int64_t>(batch.labels.size()));
  }
  return batch;
}

// SSD's model, SGD, gradient exchange and loop, as a run, a bench and an export build them.
class SsdTrainer : public TrainerOf<Settings> {
 public:
  SsdTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose purpose)
      : TrainerOf(settings, context),
        model_(starting_model(settings, preset_, purpose, context.device)),
        optimizer_(model_->parameters(), torch::optim::SGDOptions(preset_.base_learning_rate())
                                             .momentum(preset_.momentum)
                                             .weight_decay(preset_.weight_decay)),
        gradients_(*context.world, model_->parameters(), model_->buffers()),  // rank 0's initial weights
        loop_(config_, context.device, model_->parameters(), &gradients_) {}

  // One update on a batch of this rank's images (`images`, on the device) and their objects at `learning_rate`.
  TrainingStep step(detection::DetectionBatch& batch, torch::Tensor images, double learning_rate) {
    const auto [boxes, labels] = batch_targets(model_, batch);
    return training_step(model_, optimizer_, std::move(images), boxes, labels, learning_rate);
  }
  Ssd& model() { return model_; }
  TrainingLoop& loop() { return loop_; }
  parallel::GradientSync* gradient_exchange() override { return &gradients_; }

  std::vector<std::string> initialized_tensors() const override { return model_->mlperf_tensor_names(); }

  void save_model(const std::string& path) const override { save_state_dict(official_state(model_), path); }

  // The whole step (matching, forward, loss, backward, all-reduce, update) on a batch in memory, so its time
  // is the compute side alone; item() in the loop's update waits for the device.
  SyntheticStep synthetic_step(BenchRun& run) override {
    const int64_t image_size = preset_.image_size;
    bench_batch_ = synthetic_batch(run.local_batch, image_size, preset_.num_classes);
    const auto images = batch_images(bench_batch_, image_size, context_.device);  // on the CPU, a view of the batch
    return {[this, images] { loop_.update(step(bench_batch_, images, 1e-3)); }, "img",
            3.0 * 2.0 * static_cast<double>(model_->forward_macs()), std::to_string(image_size) + " px"};
  }

  // The training loader alone (decode, SSD crop, flip, resize, jitter, batch); measured per process.
  void bench_after_training(BenchRun& run, std::ostream& out, double step_seconds) override {
    if (!run.measures_data_pipeline(out)) return;
    detection::DetectionLoader loader(load_coco_split(run.settings.data_dir, "train2017").samples,
                                      loader_options(preset_, true, run.settings, context_));
    loader.start_epoch(1);
    print_data_pipeline(out, run.bench, preset_.loader_threads, static_cast<double>(run.local_batch) / step_seconds,
                        [&] { return loader.next(); });
  }

 private:
  Ssd model_;
  torch::optim::SGD optimizer_;
  parallel::GradientSync gradients_;
  TrainingLoop loop_;
  detection::DetectionBatch bench_batch_;  // bench: the synthetic batch the step matches each time
};

// An image's detections as evaluate() gathers them: a fixed row of a count, then x, y, w, h (pixels of the
// original image), score and label per detection.
void write_row(const ImageDetections& found, double width, double height, double* out) {
  const auto boxes = found.boxes_ltrb.to(torch::kCPU, torch::kFloat64).contiguous();
  const auto labels = found.labels.to(torch::kCPU).contiguous();
  const auto probabilities = found.scores.to(torch::kCPU, torch::kFloat64).contiguous();
  const auto box = boxes.accessor<double, 2>();
  const auto label = labels.accessor<int64_t, 1>();
  const auto probability = probabilities.accessor<double, 1>();
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

class SsdWorkload : public WorkloadBase {
 public:
  // The model's geometry (image_size, default boxes, width_divisor) and the loader threads are refused here,
  // before the log opens.
  explicit SsdWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(read_settings<Settings>(config_)) {
    model_options(preset_, config_.name());
    loader_threads(config_, "loader_threads");
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("img");
    description.schedule.first_block = static_cast<double>(preset_.eval_first_epoch);
    description.schedule.interval = static_cast<double>(preset_.eval_interval_epochs);
    description.schedule.max_epochs = static_cast<double>(preset_.max_epochs);
    description.hyperparameters = {
        {"global_batch_size", preset_.batch_size},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_base_learning_rate", preset_.base_learning_rate()},
        {"opt_weight_decay", preset_.weight_decay},
        {"opt_learning_rate_warmup_factor", preset_.warmup_factor},
        {"opt_learning_rate_decay_boundary_epochs", preset_.decay_epochs},
        {"model_bn_span", local_batch("batch_size")},  // no batch-norm synchronisation, as in the reference
        {"max_samples", preset_.max_samples},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    require_data_dir(kDataset);
    trainer_ = std::make_unique<SsdTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override {
    auto train = load_coco_split(settings_.data_dir, "train2017");
    auto val = load_coco_split(settings_.data_dir, "val2017");
    check_coco_categories(train, val, settings_.data_dir, config_.name(), preset_.num_classes);
    category_ids_ = train.category_ids;
    val_samples_ = static_cast<int64_t>(val.samples.size());
    for (size_t i = 0; i < val.samples.size(); ++i) val_index_[val.samples[i].image_id] = static_cast<int64_t>(i);
    const int64_t train_samples = static_cast<int64_t>(train.samples.size());
    train_loader_.emplace(std::move(train.samples), loader_options(preset_, true, settings_, parallel_context()));
    eval_loader_.emplace(std::move(val.samples), loader_options(preset_, false, settings_, parallel_context()));
    evaluator_.emplace(std::move(val.ground_truth), coco::IouType::bbox,
                       coco_annotation_file(settings_.data_dir, "val2017"));

    // The reference's warm-up length: int(warmup_epochs * train images / global batch) iterations.
    warmup_steps_ = static_cast<int64_t>(preset_.warmup_epochs * static_cast<double>(train_samples) /
                                         static_cast<double>(preset_.batch_size));
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
    const double base = preset_.base_learning_rate(), factor = static_cast<double>(preset_.warmup_factor);
    if (step < warmup_steps_)
      return base - static_cast<double>(warmup_steps_ - step) * base /
                        (static_cast<double>(warmup_steps_) * std::pow(2.0, factor));
    double rate = base;
    for (int64_t boundary : preset_.decay_epochs)
      if (epoch - 1 >= boundary) rate *= preset_.decay_factor;
    return rate;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    trainer_->model()->train();
    TrainingLoop& loop = trainer_->loop();
    return loop.train_epochs(block, control, *train_loader_, [&](detection::DetectionBatch& batch, int64_t epoch) {
      return trainer_->step(batch, batch_images(batch, preset_.image_size, device_),
                            learning_rate(loop.updates(), epoch));
    });
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    average_running_statistics();
    Ssd& model = trainer_->model();
    model->eval();
    const DecodeOptions decoding = decode_options(preset_);
    // Each rank decodes its share of the images into fixed rows (write_row) at the image's place, so one sum
    // over the ranks gathers every detection.
    const size_t row = 1 + 6 * static_cast<size_t>(decoding.max_detections);
    std::vector<double> rows(static_cast<size_t>(val_samples_) * row, 0.0);
    eval_loader_->start_epoch(0);
    while (auto batch = eval_loader_->next()) {
      if (batch->size == 0) continue;
      const auto [locations, scores] = model->forward(batch_images(*batch, preset_.image_size, device_));
      for (int64_t i = 0; i < batch->size; ++i)
        write_row(decode(locations[i], scores[i], model->default_boxes_xywh(), decoding), batch->widths[i],
                  batch->heights[i], rows.data() + static_cast<size_t>(val_index_.at(batch->image_ids[i])) * row);
      control.check_interrupt();
    }
    if (communicator_->world() > 1) communicator_->sum(rows);
    model->train();
    const auto threads = static_cast<unsigned>(settings_.threads);
    return evaluator_->evaluate(gathered_detections(rows, row), "ssd detections", threads).stats[0];
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  // The COCO detections of evaluate()'s rows, `row` values each.
  std::vector<coco::Detection> gathered_detections(const std::vector<double>& rows, size_t row) const {
    std::vector<coco::Detection> detections;
    for (const auto& [image_id, index] : val_index_) {
      const double* out = rows.data() + static_cast<size_t>(index) * row;
      for (int64_t k = 0; k < static_cast<int64_t>(out[0]); ++k) {
        const double* detection = out + 1 + 6 * k;
        detections.push_back(coco::box_detection(image_id, category_ids_[static_cast<size_t>(detection[5]) - 1],
                                                 {detection[0], detection[1], detection[2], detection[3]},
                                                 detection[4]));
      }
    }
    return detections;
  }

  // As the reference's train.py before each evaluation: every rank's batch-norm running mean and variance
  // summed over the ranks and divided by their number, kept in the model afterwards.
  void average_running_statistics() {
    std::vector<torch::Tensor> statistics;
    for (const auto& buffer : trainer_->model()->named_buffers())
      if (buffer.key().find("running_mean") != std::string::npos ||
          buffer.key().find("running_var") != std::string::npos)
        statistics.push_back(buffer.value());
    parallel::average_over_ranks(*communicator_, statistics);
  }

  const Settings preset_;
  std::unique_ptr<SsdTrainer> trainer_;
  std::optional<detection::DetectionLoader> train_loader_, eval_loader_;
  std::optional<coco::Evaluator> evaluator_;
  std::vector<int64_t> category_ids_;
  std::unordered_map<int64_t, int64_t> val_index_;  // image id -> position among the evaluated images
  int64_t val_samples_ = 0;
  int64_t warmup_steps_ = 0;
};

}  // namespace

WorkloadEntry registry_entry() {
  return {"ssd",
          "Object detection: SSD300 with a ResNet-34 backbone on COCO 2017, target box mAP 0.23",
          trainbench_presets_ssd,
          kDataset,
          construct_workload<SsdWorkload>,
          construct_trainer<SsdTrainer>,
          make_generated_coco_dataset<Settings>,
          /*prepare_dataset=*/nullptr};
}

}  // namespace trainbench::ssd
