// The heavy object detection benchmark (MLPerf "maskrcnn"): Mask R-CNN with a ResNet-50-FPN backbone on COCO
// 2017, target box mAP 0.377 and mask mAP 0.339 at the same evaluation, evaluated every epoch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "coco/evaluator.h"
#include "detection/coco_detection.h"
#include "detection/rcnn_data.h"
#include "parallel/communicator.h"
#include "parallel/gather.h"
#include "parallel/gradient_sync.h"
#include "util/error.h"
#include "workloads/common.h"
#include "workloads/detection_common.h"
#include "workloads/maskrcnn/model.h"
#include "workloads/maskrcnn/settings.h"
#include "workloads/trainer.h"

extern const char* const trainbench_presets_maskrcnn;

namespace trainbench::maskrcnn {

namespace {

constexpr const char* kCocoTree =
    "a COCO 2017 tree (train2017/, val2017/, annotations/instances_{train,val}2017.json with polygon masks)";

// FPN_POST_NMS_TOP_N_TRAIN, taken over each rank's batch: proposals_per_image_train times the images per rank,
// NVIDIA's 1000 x 12 = 12000 at 8 x 12 images; this is the value the rules log as num_image_candidates.
int64_t batch_proposals(const Config& config, const Settings& preset, int world) {
  return preset.proposals_per_image_train * local_batch_size(config, "batch_size", world);
}

// backbone_weights_source: the file format and names of the body's ImageNet weights, where each stage's stride
// sits, and the pixels the body is fed (detection::RcnnPixels).
BackboneWeights backbone_weights(const Settings& preset) {
  return preset.backbone_weights_source == "torchvision" ? BackboneWeights::kTorchvision : BackboneWeights::kMsra;
}

MaskRcnnOptions model_options(const Config& config, const Settings& preset, int world) {
  return MaskRcnnOptions()
      .num_classes(preset.num_classes)
      .body_widths(preset.body_widths)
      .blocks_per_stage(preset.blocks_per_stage)
      .frozen_batch_norm(preset.frozen_batch_norm)
      .freeze_at(preset.freeze_conv_body_at)
      .backbone_weights(backbone_weights(preset))
      .fpn_channels(preset.fpn_channels)
      .anchor_sizes(preset.anchor_sizes)
      .rpn_pre_nms_top_n_train(preset.rpn_pre_nms_top_n_train)
      .rpn_post_nms_top_n_train(preset.rpn_post_nms_top_n_train)
      .fpn_post_nms_top_n_train(batch_proposals(config, preset, world))
      .rpn_pre_nms_top_n_test(preset.rpn_pre_nms_top_n_test)
      .rpn_post_nms_top_n_test(preset.rpn_post_nms_top_n_test)
      .fpn_post_nms_top_n_test(preset.proposals_per_image_test)
      .rpn_batch_size_per_image(preset.rpn_batch_size_per_image)
      .roi_batch_size_per_image(preset.roi_batch_size_per_image)
      .box_fc_size(preset.box_fc_size)
      .mask_conv_channels(preset.mask_conv_channels);
}

detection::RcnnLoaderOptions loader_options(const Settings& preset, bool train, const WorkloadSettings& settings,
                                            const parallel::ParallelContext& context) {
  auto options = shared_loader_options<detection::RcnnLoaderOptions>(preset, train, settings, context);
  options.pixels = backbone_weights(preset) == BackboneWeights::kMsra ? detection::RcnnPixels::kBgr255MinusMean
                                                                      : detection::RcnnPixels::kRgbImageNet;
  options.min_size = static_cast<int>(preset.min_image_size);
  options.max_size = static_cast<int>(preset.max_image_size);
  // Each rank evaluates whole batches of the ones a single rank forms, so the gathered results are the
  // single rank's (evaluate()).
  options.shard_whole_batches = !train;
  return options;
}

torch::Tensor batch_images(detection::RcnnBatch& batch, torch::Device device) {
  return torch::from_blob(batch.images.data(), {batch.size, 3, batch.padded_height, batch.padded_width},
                          torch::kFloat32)
      .to(device);
}

std::vector<ImageSize> batch_sizes(const detection::RcnnBatch& batch) {
  std::vector<ImageSize> sizes;
  for (int64_t i = 0; i < batch.size; ++i) sizes.push_back({batch.heights[i], batch.widths[i]});
  return sizes;
}

std::vector<ImageTarget> batch_targets(detection::RcnnBatch& batch, torch::Device device) {
  std::vector<ImageTarget> targets;
  for (int64_t i = 0; i < batch.size; ++i) {
    const int64_t first = batch.object_offsets[i], count = batch.object_offsets[i + 1] - first;
    ImageTarget target;
    target.boxes = torch::from_blob(batch.boxes.data() + 4 * first, {count, 4}, torch::kFloat32)
                       .to(device, /*non_blocking=*/false, /*copy=*/true);
    target.labels = torch::from_blob(batch.labels.data() + first, {count}, torch::kInt64).to(device, false, true);
    target.polygons.assign(batch.polygons.begin() + first, batch.polygons.begin() + first + count);
    targets.push_back(std::move(target));
  }
  return targets;
}

// SGD with momentum in two groups as the reference's make_optimizer: weights at the base rate with weight
// decay, biases at bias_lr_factor x the base rate without. Frozen stages are left out.
torch::optim::SGD make_optimizer(MaskRcnn& model, const Settings& preset) {
  std::vector<torch::Tensor> weights, biases;
  for (const auto& item : model->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const std::string& name = item.key();
    (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0 ? biases : weights).push_back(item.value());
  }
  const double rate = preset.base_learning_rate, momentum = preset.momentum;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  const auto weight_options = torch::optim::SGDOptions(rate).momentum(momentum).weight_decay(preset.weight_decay);
  const auto bias_options = torch::optim::SGDOptions(rate * preset.bias_lr_factor).momentum(momentum).weight_decay(0);
  groups.emplace_back(weights, std::make_unique<torch::optim::SGDOptions>(weight_options));
  groups.emplace_back(biases, std::make_unique<torch::optim::SGDOptions>(bias_options));
  return torch::optim::SGD(std::move(groups), torch::optim::SGDOptions(rate));
}

// What no range of settings.json can say, refused before the log opens: mlperf_linear's warm-up starts at
// base_learning_rate - warmup_steps x warmup_factor, which must not be negative. `where` names the preset.
void check_warmup(const Settings& preset, const std::string& where) {
  const double base = preset.base_learning_rate, factor = preset.warmup_factor;
  const double start_drop = static_cast<double>(preset.warmup_steps) * factor;
  // The presets' factor is base / warmup_steps in decimal (0.12 / 625 = 0.000192), exact only to rounding.
  if (start_drop > base * (1 + 1e-9))
    fail(where + ": warmup_factor", "warmup_steps x warmup_factor (" + nlohmann::json(start_drop).dump() +
                                        ") must be at most base_learning_rate (" + nlohmann::json(base).dump() +
                                        "): the warm-up would start at a negative learning rate");
}

// NVIDIA's WarmupMultiStepLR with mlperf_linear warm-up for a group whose base rate is `base`, at 1-based
// iteration `iteration` (the reference steps its scheduler before each iteration): (base - (warmup -
// iteration) * factor) * decay^k during the warm-up, base * decay^k after, k = boundaries passed.
double learning_rate(const Settings& preset, double base, int64_t iteration) {
  int decays = 0;
  for (int64_t boundary : preset.decay_steps)
    if (iteration >= boundary) ++decays;
  const double decay = std::pow(preset.decay_factor, decays);
  const int64_t warmup = preset.warmup_steps;
  if (iteration < warmup) return (base - static_cast<double>(warmup - iteration) * preset.warmup_factor) * decay;
  return base * decay;
}

// The rate of each parameter group (weights, then biases at bias_lr_factor) at 1-based iteration `iteration`.
std::vector<double> group_learning_rates(const Settings& preset, int64_t iteration) {
  const double base = preset.base_learning_rate;
  return {learning_rate(preset, base, iteration), learning_rate(preset, base * preset.bias_lr_factor, iteration)};
}

// Boxes of the resized image in the original one, scaled by each side's ratio as BoxList.resize does.
torch::Tensor to_original(const torch::Tensor& boxes, const ImageSize& resized, int original_height,
                          int original_width) {
  const double x_ratio = static_cast<double>(original_width) / static_cast<double>(resized.width);
  const double y_ratio = static_cast<double>(original_height) / static_cast<double>(resized.height);
  return boxes * torch::tensor({x_ratio, y_ratio, x_ratio, y_ratio}, boxes.options());
}

// The reference's COCO results of one image: boxes as xywh with the inclusive width x2 - x1 + 1, and the masks
// pasted into the original image as RLEs.
void append_results(const ImageDetections& found, const ImageSize& resized, int original_height, int original_width,
                    int64_t image_id, const std::vector<int64_t>& category_ids, std::vector<coco::Detection>& boxes_out,
                    std::vector<coco::Detection>& masks_out) {
  if (found.boxes.size(0) == 0) return;
  const auto boxes = to_original(found.boxes, resized, original_height, original_width);
  // paste_masks gives (K, H, W); the RLE walks columns, so each mask goes out transposed.
  const auto pasted = detection::paste_masks(found.masks, boxes, original_height, original_width)
                          .permute({0, 2, 1})
                          .to(torch::kCPU)
                          .contiguous();
  const auto box_values = boxes.to(torch::kCPU, torch::kFloat64).contiguous();
  const auto scores = found.scores.to(torch::kCPU, torch::kFloat64).contiguous();
  const auto labels = found.labels.to(torch::kCPU).contiguous();
  const auto box = box_values.accessor<double, 2>();
  const size_t pixels = static_cast<size_t>(original_height) * static_cast<size_t>(original_width);
  for (int64_t k = 0; k < labels.size(0); ++k) {
    const int64_t category = category_ids.at(static_cast<size_t>(labels[k].item<int64_t>() - 1));
    const double score = scores[k].item<double>();
    boxes_out.push_back(coco::box_detection(
        image_id, category, {box[k][0], box[k][1], box[k][2] - box[k][0] + 1, box[k][3] - box[k][1] + 1}, score));
    const uint8_t* mask = pasted.data_ptr<uint8_t>() + static_cast<size_t>(k) * pixels;
    masks_out.push_back(coco::mask_detection(
        image_id, category,
        coco::encode(std::vector<uint8_t>(mask, mask + pixels), static_cast<uint32_t>(original_height),
                     static_cast<uint32_t>(original_width)),
        score));
  }
}

// What a run and an export start from: --weights (a file of official_state's names: the whole model, so
// backbone_weights is not read), else the body's ImageNet weights where the preset names them, else the seeded
// initialization; a preset that says pretrained_backbone needs one of the two files.
void start_from_weights(MaskRcnn& model, const WorkloadSettings& settings, const Settings& preset) {
  if (!settings.weights.empty()) {
    const StateDict state = official_state(model);
    load_state_dict(settings.weights, state);
    check_official_anchors(model, state, settings.weights);
    return;
  }
  if (!preset.backbone_weights.empty())
    model->load_backbone(preset.backbone_weights);
  else if (preset.pretrained_backbone)
    fail(settings.config.name() + ": backbone_weights",
         "the preset starts from ImageNet weights; pass --set backbone_weights=PATH: Detectron's MSRA R-50.pkl, or "
         "torchvision's resnet50 converted by scripts/convert_resnet50_backbone.py with --set "
         "backbone_weights_source=torchvision (docs/maskrcnn.md), or a whole model with --weights");
}

// The seeded model with what `purpose` starts from (a bench times the seeded model alone), on the context's
// device in training mode.
MaskRcnn starting_model(const WorkloadSettings& settings, const Settings& preset, TrainerPurpose purpose,
                        const parallel::ParallelContext& context) {
  seed_torch(settings);
  MaskRcnn model(model_options(settings.config, preset, context.world_size()));
  if (purpose != TrainerPurpose::kBench) start_from_weights(model, settings, preset);
  model->to(context.device);
  model->train();
  return model;
}

// A batch in memory for the bench: noise images of the preset's short side and its capped long side (4:3),
// three square objects each with its polygon.
detection::RcnnBatch bench_batch(const Settings& preset, int64_t batch_size) {
  const auto [width, height] = detection::rcnn_resized_size(4 * 1000, 3 * 1000, static_cast<int>(preset.min_image_size),
                                                            static_cast<int>(preset.max_image_size));
  detection::RcnnBatch batch;
  batch.size = batch_size;
  batch.padded_height = (height + 31) / 32 * 32;
  batch.padded_width = (width + 31) / 32 * 32;
  const auto noise = torch::randn({batch_size, 3, batch.padded_height, batch.padded_width}) * 50;
  batch.images.assign(noise.data_ptr<float>(), noise.data_ptr<float>() + noise.numel());
  batch.object_offsets.push_back(0);
  for (int64_t i = 0; i < batch_size; ++i) {
    batch.heights.push_back(height);
    batch.widths.push_back(width);
    batch.original_heights.push_back(height);
    batch.original_widths.push_back(width);
    batch.image_ids.push_back(i + 1);
    for (int k = 0; k < 3; ++k) {
      const float side = static_cast<float>(height) * (0.2f + 0.1f * static_cast<float>(k));
      const float left = static_cast<float>(width) * 0.25f * static_cast<float>(k);
      const float top = static_cast<float>(height) * 0.1f;
      batch.boxes.insert(batch.boxes.end(), {left, top, left + side - 1, top + side - 1});
      batch.labels.push_back(1 + (i + k) % (preset.num_classes - 1));
      batch.polygons.push_back({{left, top, left + side, top, left + side, top + side, left, top + side}});
    }
    batch.object_offsets.push_back(static_cast<int64_t>(batch.labels.size()));
  }
  return batch;
}

// bench: the synthetic batch, as the training step and the inference take it.
struct BenchInputs {
  detection::RcnnBatch batch;
  torch::Tensor images;  // on the CPU, a view of batch.images
  std::vector<ImageSize> sizes;
  std::vector<ImageTarget> targets;
  std::string details;  // "WxH px"
};

// Mask R-CNN's model, two-group SGD, gradient exchange, loop and sampling generator, as a run, a bench and an
// export build them.
class MaskRcnnTrainer : public TrainerOf<Settings> {
 public:
  MaskRcnnTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose purpose)
      : TrainerOf(settings, context),
        model_(starting_model(settings, preset_, purpose, context)),
        optimizer_(make_optimizer(model_, preset_)),
        gradients_(*context.world, model_->parameters(), model_->buffers()),  // rank 0's initial weights
        loop_(config_, context.device, model_->parameters(), &gradients_),
        generator_(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(settings.seed))) {}

  // One update on this rank's images at each parameter group's rate (group_learning_rates).
  TrainingStep step(std::vector<double> rates, torch::Tensor images, std::vector<ImageSize> sizes,
                    std::vector<ImageTarget> targets) {
    return training_step(model_, optimizer_, std::move(rates), std::move(images), std::move(sizes),
                         std::move(targets), generator_);
  }
  MaskRcnn& model() { return model_; }
  TrainingLoop& loop() { return loop_; }
  parallel::GradientSync* gradient_exchange() override { return &gradients_; }

  std::vector<std::string> initialized_tensors() const override { return MaskRcnnImpl::mlperf_tensor_names(); }

  // The model under GeneralizedRCNN's names.
  void save_model(const std::string& path) const override { save_state_dict(official_state(model_), path); }

  // The whole step (anchor matching, sampling, proposals, mask targets, forward, the five losses, backward,
  // all-reduce, update) on a batch in memory, so its time is the compute side alone.
  SyntheticStep synthetic_step(BenchRun& run) override {
    bench_.batch = bench_batch(preset_, run.local_batch);
    bench_.images = batch_images(bench_.batch, context_.device);
    bench_.sizes = batch_sizes(bench_.batch);
    bench_.targets = batch_targets(bench_.batch, context_.device);
    const int64_t height = bench_.batch.padded_height, width = bench_.batch.padded_width;
    bench_.details = std::to_string(width) + "x" + std::to_string(height) + " px";
    const int64_t rois = preset_.roi_batch_size_per_image;
    return {[this] {
              loop_.update(step(group_learning_rates(preset_, preset_.warmup_steps), bench_.images, bench_.sizes,
                                bench_.targets));
            },
            "img", 3.0 * 2.0 * model_->forward_macs(height, width, rois, rois / 4), bench_.details};
  }

  // Inference with the reference's post-processing: detection, mask paste at the image size and RLE encoding.
  // An untrained model's scores hardly pass 0.05 on noise, so this model keeps every score: each image then
  // yields the detections_per_image limit, the post-processing's full load (a trained COCO model's usual case).
  void bench_after_training(BenchRun& run, std::ostream& out, double) override {
    MaskRcnn inference(model_options(config_, preset_, context_.world_size()).score_threshold(0.0));
    inference->to(context_.device);
    inference->eval();
    std::vector<int64_t> category_ids(static_cast<size_t>(preset_.num_classes - 1));
    for (size_t c = 0; c < category_ids.size(); ++c) category_ids[c] = static_cast<int64_t>(c + 1);
    int64_t detected = 0;
    const double seconds = run.median_step_seconds([&] { detected = detect_and_encode(inference, category_ids); });
    char line[256];
    std::snprintf(line, sizeof line,
                  "inference     %10.1f img/s  (batch %lld, %s, %s, %d threads/rank, median of %lld steps: %.5f "
                  "s/step, %lld detections per batch)\n",
                  static_cast<double>(run.local_batch) / seconds, static_cast<long long>(run.local_batch),
                  bench_.details.c_str(), context_.device.str().c_str(), run.settings.threads,
                  static_cast<long long>(run.bench.steps), seconds, static_cast<long long>(detected));
    out << line;
  }

 private:
  // One inference of the bench batch into COCO results; returns the box detections.
  int64_t detect_and_encode(MaskRcnn& inference, const std::vector<int64_t>& category_ids) {
    torch::NoGradGuard no_grad;
    const auto found = inference->detect(bench_.images, bench_.sizes);
    std::vector<coco::Detection> box_results, mask_results;
    for (size_t i = 0; i < found.size(); ++i)
      append_results(found[i], bench_.sizes[i], bench_.batch.heights[i], bench_.batch.widths[i],
                     bench_.batch.image_ids[i], category_ids, box_results, mask_results);
    return static_cast<int64_t>(box_results.size());
  }

  MaskRcnn model_;
  torch::optim::SGD optimizer_;
  parallel::GradientSync gradients_;
  TrainingLoop loop_;
  at::Generator generator_;  // the RPN's and the box head's sampling
  BenchInputs bench_;
};

class MaskRcnnWorkload : public WorkloadBase {
 public:
  explicit MaskRcnnWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(read_settings<Settings>(config_)) {
    check_warmup(preset_, config_.name());
    loader_threads(config_, "loader_threads");  // refused before the log opens
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("img");
    description.schedule.first_block = 1;
    description.schedule.interval = 1;
    description.schedule.max_epochs = static_cast<double>(preset_.max_epochs);
    description.hyperparameters = {
        {"global_batch_size", preset_.batch_size},
        {"num_image_candidates", batch_proposals(config_, preset_, communicator_->world())},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", "sgd_with_momentum"},
        {"opt_base_learning_rate", preset_.base_learning_rate},
        {"opt_learning_rate_warmup_steps", preset_.warmup_steps},
        {"opt_learning_rate_warmup_factor", preset_.warmup_factor},
        {"opt_learning_rate_decay_factor", preset_.decay_factor},
        {"opt_learning_rate_decay_steps", preset_.decay_steps},
        {"min_image_size", preset_.min_image_size},
        {"max_image_size", preset_.max_image_size},
        {"trainbench_model", config_.string("summary")},
        {"trainbench_backbone_weights_source", preset_.backbone_weights_source},
    };
    return description;
  }

  std::vector<std::string> build() override {
    require_data_dir(kCocoTree);
    trainer_ = std::make_unique<MaskRcnnTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override {
    const std::string val_file = coco_annotation_file(settings_.data_dir, "val2017");
    auto train = load_coco_split(settings_.data_dir, "train2017");
    auto val = load_coco_split(settings_.data_dir, "val2017");
    check_coco_categories(train, val, settings_.data_dir, config_.name(), preset_.num_classes);
    category_ids_ = train.category_ids;
    auto train_samples = detection::rcnn_samples(train, true);
    auto val_samples = detection::rcnn_samples(val, false);
    DataSummary summary;
    summary.train_samples = static_cast<int64_t>(train_samples.samples.size());
    summary.eval_samples = static_cast<int64_t>(val_samples.samples.size());
    log_dropped_boxes(train, val, summary);
    if (train_samples.dropped_polygons > 0 || val_samples.dropped_polygons > 0)
      summary.derived_hyperparameters.push_back({"trainbench_dropped_polygons",
                                                 {{"train", train_samples.dropped_polygons},
                                                  {"val", val_samples.dropped_polygons}}});
    const parallel::ParallelContext context = parallel_context();
    train_loader_.emplace(std::move(train_samples.samples), loader_options(preset_, true, settings_, context));
    eval_loader_.emplace(std::move(val_samples.samples), loader_options(preset_, false, settings_, context));
    box_evaluator_.emplace(val.ground_truth, coco::IouType::bbox, val_file);
    mask_evaluator_.emplace(std::move(val.ground_truth), coco::IouType::segm, val_file);
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    trainer_->model()->train();
    TrainingLoop& loop = trainer_->loop();
    return loop.train_epochs(block, control, *train_loader_, [&](detection::RcnnBatch& batch, int64_t) {
      return trainer_->step(group_learning_rates(preset_, loop.updates() + 1), batch_images(batch, device_),
                            batch_sizes(batch), batch_targets(batch, device_));
    });
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    trainer_->gradient_exchange()->broadcast_buffers();  // every rank evaluates rank 0's batch-norm statistics
    MaskRcnn& model = trainer_->model();
    model->eval();
    std::vector<coco::Detection> boxes, masks;
    eval_loader_->start_epoch(0);
    while (auto batch = eval_loader_->next()) {
      if (batch->size == 0) continue;
      const auto sizes = batch_sizes(*batch);
      const auto found = model->detect(batch_images(*batch, device_), sizes);
      for (int64_t i = 0; i < batch->size; ++i)
        append_results(found[static_cast<size_t>(i)], sizes[static_cast<size_t>(i)], batch->original_heights[i],
                       batch->original_widths[i], batch->image_ids[i], category_ids_, boxes, masks);
      control.check_interrupt();
    }
    model->train();
    // Rank 0 scores every rank's detections and sends the two mAPs back, so all ranks return one Metric. The
    // order of images in the merged lists does not matter to COCOeval; each image's detections stay in order.
    std::vector<double> maps(2);
    gather_to_rank0(boxes, "maskrcnn box detections");
    gather_to_rank0(masks, "maskrcnn mask detections");
    if (communicator_->rank() == 0) {
      const auto threads = static_cast<unsigned>(settings_.threads);
      maps[0] = box_evaluator_->evaluate(boxes, "maskrcnn box detections", threads).stats[0];
      maps[1] = mask_evaluator_->evaluate(masks, "maskrcnn mask detections", threads).stats[0];
    }
    communicator_->broadcast(maps, 0);
    return Metric::named({{"BBOX", maps[0]}, {"SEGM", maps[1]}});
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  // On rank 0, replaces `detections` with every rank's, in rank order.
  void gather_to_rank0(std::vector<coco::Detection>& detections, const std::string& what) {
    if (communicator_->world() == 1) return;
    const auto buffers = parallel::gather_bytes(*communicator_, coco::serialize_detections(detections), 0);
    if (communicator_->rank() != 0) return;
    detections.clear();
    for (size_t rank = 0; rank < buffers.size(); ++rank) {
      auto part = coco::deserialize_detections(buffers[rank], what + " from rank " + std::to_string(rank));
      detections.insert(detections.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
    }
  }

  const Settings preset_;
  std::unique_ptr<MaskRcnnTrainer> trainer_;
  std::optional<detection::RcnnLoader> train_loader_, eval_loader_;
  std::optional<coco::Evaluator> box_evaluator_, mask_evaluator_;
  std::vector<int64_t> category_ids_;
};

}  // namespace

WorkloadEntry registry_entry() {
  return {"maskrcnn",
          "Heavy object detection: Mask R-CNN with a ResNet-50-FPN backbone on COCO 2017, target box mAP 0.377 and "
          "mask mAP 0.339",
          trainbench_presets_maskrcnn,
          kCocoTree,
          construct_workload<MaskRcnnWorkload>,
          construct_trainer<MaskRcnnTrainer>,
          make_generated_coco_dataset<Settings>,
          /*prepare_dataset=*/nullptr};
}

}  // namespace trainbench::maskrcnn
