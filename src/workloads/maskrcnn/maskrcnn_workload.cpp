// The heavy object detection benchmark (MLPerf "maskrcnn"): Mask R-CNN with a ResNet-50-FPN backbone on COCO
// 2017, target box mAP 0.377 and mask mAP 0.339 at the same evaluation, evaluated every epoch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
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

extern const char* const trainbench_presets_maskrcnn;

namespace trainbench::maskrcnn {

namespace {

namespace fs = std::filesystem;

constexpr const char* kCocoTree =
    "a COCO 2017 tree (train2017/, val2017/, annotations/instances_{train,val}2017.json with polygon masks)";

// FPN_POST_NMS_TOP_N_TRAIN, taken over each rank's batch: proposals_per_image_train times the images per rank,
// NVIDIA's 1000 x 12 = 12000 at 8 x 12 images; this is the value the rules log as num_image_candidates.
int64_t batch_proposals(const Config& config, int world) {
  return config.integer("proposals_per_image_train") * local_batch_size(config, "batch_size", world);
}

// backbone_weights_source: the file format and names of the body's ImageNet weights, where each stage's stride
// sits, and the pixels the body is fed (detection::RcnnPixels).
BackboneWeights backbone_weights(const Config& config) {
  return config.string("backbone_weights_source") == "torchvision" ? BackboneWeights::kTorchvision : BackboneWeights::kMsra;
}

MaskRcnnOptions model_options(const Config& config, int world) {
  return MaskRcnnOptions()
      .num_classes(config.integer("num_classes"))
      .body_widths(config.integers("body_widths"))
      .blocks_per_stage(config.integers("blocks_per_stage"))
      .frozen_batch_norm(config.boolean("frozen_batch_norm"))
      .freeze_at(config.integer("freeze_conv_body_at"))
      .backbone_weights(backbone_weights(config))
      .fpn_channels(config.integer("fpn_channels"))
      .anchor_sizes(config.numbers("anchor_sizes"))
      .rpn_pre_nms_top_n_train(config.integer("rpn_pre_nms_top_n_train"))
      .rpn_post_nms_top_n_train(config.integer("rpn_post_nms_top_n_train"))
      .fpn_post_nms_top_n_train(batch_proposals(config, world))
      .rpn_pre_nms_top_n_test(config.integer("rpn_pre_nms_top_n_test"))
      .rpn_post_nms_top_n_test(config.integer("rpn_post_nms_top_n_test"))
      .fpn_post_nms_top_n_test(config.integer("proposals_per_image_test"))
      .rpn_batch_size_per_image(config.integer("rpn_batch_size_per_image"))
      .roi_batch_size_per_image(config.integer("roi_batch_size_per_image"))
      .box_fc_size(config.integer("box_fc_size"))
      .mask_conv_channels(config.integers("mask_conv_channels"));
}

detection::RcnnLoaderOptions loader_options(const Config& config, bool train, int64_t seed,
                                            const parallel::Communicator& communicator) {
  detection::RcnnLoaderOptions options;
  options.mode = train ? data::LoaderMode::Train : data::LoaderMode::Eval;
  options.pixels = backbone_weights(config) == BackboneWeights::kMsra ? detection::RcnnPixels::kBgr255MinusMean
                                                                      : detection::RcnnPixels::kRgbImageNet;
  options.min_size = static_cast<int>(config.integer("min_image_size"));
  options.max_size = static_cast<int>(config.integer("max_image_size"));
  options.batch_size = train ? local_batch_size(config, "batch_size", communicator.world()) : config.integer("eval_batch_size");
  options.drop_last = train;
  options.workers = loader_threads(config, "loader_threads");
  options.prefetch_batches = static_cast<int>(config.integer("prefetch_batches"));
  options.seed = static_cast<uint64_t>(seed);
  options.rank = communicator.rank();
  options.world = communicator.world();
  // Each rank evaluates whole batches of the ones a single rank forms, so the gathered results are the
  // single rank's (evaluate()).
  options.shard_whole_batches = !train;
  return options;
}

torch::Tensor batch_images(detection::RcnnBatch& batch, torch::Device device) {
  return torch::from_blob(batch.images.data(), {batch.size, 3, batch.padded_height, batch.padded_width}, torch::kFloat32)
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
    target.boxes = torch::from_blob(batch.boxes.data() + 4 * first, {count, 4}, torch::kFloat32).to(device, /*non_blocking=*/false, /*copy=*/true);
    target.labels = torch::from_blob(batch.labels.data() + first, {count}, torch::kInt64).to(device, false, true);
    target.polygons.assign(batch.polygons.begin() + first, batch.polygons.begin() + first + count);
    targets.push_back(std::move(target));
  }
  return targets;
}

// SGD with momentum in two groups as the reference's make_optimizer: weights at the base rate with weight
// decay, biases at bias_lr_factor x the base rate without. Frozen stages are left out.
torch::optim::SGD make_optimizer(MaskRcnn& model, const Config& config) {
  std::vector<torch::Tensor> weights, biases;
  for (const auto& item : model->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const std::string& name = item.key();
    (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0 ? biases : weights).push_back(item.value());
  }
  const double rate = config.number("base_learning_rate"), momentum = config.number("momentum");
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(weights, std::make_unique<torch::optim::SGDOptions>(
                                   torch::optim::SGDOptions(rate).momentum(momentum).weight_decay(config.number("weight_decay"))));
  groups.emplace_back(biases, std::make_unique<torch::optim::SGDOptions>(
                                  torch::optim::SGDOptions(rate * config.number("bias_lr_factor")).momentum(momentum).weight_decay(0)));
  return torch::optim::SGD(std::move(groups), torch::optim::SGDOptions(rate));
}

// What no range of settings.json can say, refused before the log opens: mlperf_linear's warm-up starts at
// base_learning_rate - warmup_steps x warmup_factor, which must not be negative.
void check_warmup(const Config& config) {
  const double base = config.number("base_learning_rate"), factor = config.number("warmup_factor");
  const double start_drop = static_cast<double>(config.integer("warmup_steps")) * factor;
  // The presets' factor is base / warmup_steps in decimal (0.12 / 625 = 0.000192), exact only to rounding.
  if (start_drop > base * (1 + 1e-9))
    fail(config.name() + ": warmup_factor",
         "warmup_steps x warmup_factor (" + nlohmann::json(start_drop).dump() + ") must be at most base_learning_rate (" +
             nlohmann::json(base).dump() + "): the warm-up would start at a negative learning rate");
}

// NVIDIA's WarmupMultiStepLR with mlperf_linear warm-up for a group whose base rate is `base`, at 1-based
// iteration `iteration` (the reference steps its scheduler before each iteration): (base - (warmup -
// iteration) * factor) * decay^k during the warm-up, base * decay^k after, k = boundaries passed.
double learning_rate(const Config& config, double base, int64_t iteration) {
  int decays = 0;
  for (int64_t boundary : config.integers("decay_steps"))
    if (iteration >= boundary) ++decays;
  const double decay = std::pow(config.number("decay_factor"), decays);
  const int64_t warmup = config.integer("warmup_steps");
  if (iteration < warmup) return (base - static_cast<double>(warmup - iteration) * config.number("warmup_factor")) * decay;
  return base * decay;
}

// The rate of each parameter group (weights, then biases at bias_lr_factor) at 1-based iteration `iteration`.
std::vector<double> group_learning_rates(const Config& config, int64_t iteration) {
  const double base = config.number("base_learning_rate");
  return {learning_rate(config, base, iteration), learning_rate(config, base * config.number("bias_lr_factor"), iteration)};
}

// Boxes of the resized image in the original one, scaled by each side's ratio as BoxList.resize does.
torch::Tensor to_original(const torch::Tensor& boxes, const ImageSize& resized, int original_height, int original_width) {
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

// The model a run starts from: `weights` (a file of official_state's names: the whole model, so
// backbone_weights is not read), else the body's ImageNet weights where the preset names them, else the seeded
// initialization; a preset that says pretrained_backbone needs one of the two files.
void start_from_weights(MaskRcnn& model, const Config& config, const std::string& weights) {
  if (!weights.empty()) {
    const StateDict state = official_state(model);
    load_state_dict(weights, state);
    check_official_anchors(model, state, weights);
    return;
  }
  const std::string backbone = config.string("backbone_weights");
  if (!backbone.empty())
    model->load_backbone(backbone);
  else if (config.boolean("pretrained_backbone"))
    fail(config.name() + ": backbone_weights",
         "the preset starts from ImageNet weights; pass --set backbone_weights=PATH: Detectron's MSRA R-50.pkl, or "
         "torchvision's resnet50 converted by scripts/convert_resnet50_backbone.py with --set "
         "backbone_weights_source=torchvision (docs/maskrcnn.md), or a whole model with --weights");
}

class MaskRcnnWorkload : public WorkloadBase {
 public:
  explicit MaskRcnnWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), generator_(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(settings_.seed))) {
    check_warmup(config_);
    loader_threads(config_, "loader_threads");  // refused before the log opens
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("img");
    description.schedule.first_block = 1;
    description.schedule.interval = 1;
    description.schedule.max_epochs = static_cast<double>(config_.integer("max_epochs"));
    description.hyperparameters = {
        {"global_batch_size", config_.integer("batch_size")},
        {"num_image_candidates", batch_proposals(config_, communicator_->world())},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"opt_name", "sgd_with_momentum"},
        {"opt_base_learning_rate", config_.number("base_learning_rate")},
        {"opt_learning_rate_warmup_steps", config_.integer("warmup_steps")},
        {"opt_learning_rate_warmup_factor", config_.number("warmup_factor")},
        {"opt_learning_rate_decay_factor", config_.number("decay_factor")},
        {"opt_learning_rate_decay_steps", config_.integers("decay_steps")},
        {"min_image_size", config_.integer("min_image_size")},
        {"max_image_size", config_.integer("max_image_size")},
        {"trainbench_model", config_.string("summary")},
        {"trainbench_backbone_weights_source", config_.string("backbone_weights_source")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    seed_torch(settings_);
    require_data_dir(kCocoTree);
    model_ = MaskRcnn(model_options(config_, communicator_->world()));
    start_from_weights(model_, config_, settings_.weights);
    model_->to(device_);
    model_->train();
    optimizer_.emplace(make_optimizer(model_, config_));
    gradients_.emplace(*communicator_, model_->parameters(), model_->buffers());
    loop_.emplace(config_, device_, model_->parameters(), &*gradients_);
    return MaskRcnnImpl::mlperf_tensor_names();
  }

  // --save-model: the trained model under GeneralizedRCNN's names.
  void save_weights(const std::string& path) const override { save_state_dict(official_state(model_), path); }

  DataSummary open_data() override {
    const fs::path root(settings_.data_dir);
    const std::string val_file = (root / "annotations" / "instances_val2017.json").string();
    auto train = detection::load_coco_detection((root / "annotations" / "instances_train2017.json").string(),
                                                (root / "train2017").string());
    auto val = detection::load_coco_detection(val_file, (root / "val2017").string());
    if (static_cast<int64_t>(train.category_ids.size()) + 1 != config_.integer("num_classes") ||
        val.category_ids != train.category_ids)
      fail(settings_.data_dir + "/annotations", "has " + std::to_string(train.category_ids.size()) +
                                                    " categories (train and val must list the same) but " + config_.name() +
                                                    " expects num_classes = " + std::to_string(config_.integer("num_classes")) +
                                                    " with background");
    category_ids_ = train.category_ids;
    auto train_samples = detection::rcnn_samples(train, true);
    auto val_samples = detection::rcnn_samples(val, false);
    DataSummary summary;
    summary.train_samples = static_cast<int64_t>(train_samples.samples.size());
    summary.eval_samples = static_cast<int64_t>(val_samples.samples.size());
    log_dropped_boxes(train, val, summary);
    if (train_samples.dropped_polygons > 0 || val_samples.dropped_polygons > 0)
      summary.derived_hyperparameters.push_back(
          {"trainbench_dropped_polygons", {{"train", train_samples.dropped_polygons}, {"val", val_samples.dropped_polygons}}});
    train_loader_.emplace(std::move(train_samples.samples), loader_options(config_, true, settings_.seed, *communicator_));
    eval_loader_.emplace(std::move(val_samples.samples), loader_options(config_, false, settings_.seed, *communicator_));
    box_evaluator_.emplace(val.ground_truth, coco::IouType::bbox, val_file);
    mask_evaluator_.emplace(std::move(val.ground_truth), coco::IouType::segm, val_file);
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    model_->train();
    return loop_->train_epochs(block, control, *train_loader_, [&](detection::RcnnBatch& batch, int64_t) {
      return training_step(model_, *optimizer_, group_learning_rates(config_, loop_->updates() + 1), batch_images(batch, device_),
                           batch_sizes(batch), batch_targets(batch, device_), generator_);
    });
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    gradients_->broadcast_buffers();  // every rank evaluates rank 0's batch-norm statistics
    model_->eval();
    std::vector<coco::Detection> boxes, masks;
    eval_loader_->start_epoch(0);
    while (auto batch = eval_loader_->next()) {
      if (batch->size == 0) continue;
      const auto sizes = batch_sizes(*batch);
      const auto found = model_->detect(batch_images(*batch, device_), sizes);
      for (int64_t i = 0; i < batch->size; ++i)
        append_results(found[static_cast<size_t>(i)], sizes[static_cast<size_t>(i)], batch->original_heights[i],
                       batch->original_widths[i], batch->image_ids[i], category_ids_, boxes, masks);
      control.check_interrupt();
    }
    model_->train();
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

  MaskRcnn model_{nullptr};
  std::optional<torch::optim::SGD> optimizer_;
  std::optional<parallel::GradientSync> gradients_;
  std::optional<TrainingLoop> loop_;
  std::optional<detection::RcnnLoader> train_loader_, eval_loader_;
  std::optional<coco::Evaluator> box_evaluator_, mask_evaluator_;
  std::vector<int64_t> category_ids_;
  at::Generator generator_;  // the RPN's and the box head's sampling
};

// A batch in memory for the bench: noise images of the preset's short side and its capped long side (4:3),
// three square objects each with its polygon.
detection::RcnnBatch bench_batch(const Config& config, int64_t batch_size) {
  const auto [width, height] = detection::rcnn_resized_size(4 * 1000, 3 * 1000, static_cast<int>(config.integer("min_image_size")),
                                                            static_cast<int>(config.integer("max_image_size")));
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
      const float left = static_cast<float>(width) * 0.25f * static_cast<float>(k), top = static_cast<float>(height) * 0.1f;
      batch.boxes.insert(batch.boxes.end(), {left, top, left + side - 1, top + side - 1});
      batch.labels.push_back(1 + (i + k) % (config.integer("num_classes") - 1));
      batch.polygons.push_back({{left, top, left + side, top, left + side, top + side, left, top + side}});
    }
    batch.object_offsets.push_back(static_cast<int64_t>(batch.labels.size()));
  }
  return batch;
}

void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out) {
  const Config& config = settings.config;
  BenchRun run(settings, bench_settings);
  MaskRcnn model(model_options(config, run.communicator->world()));
  model->to(run.device);
  model->train();
  auto optimizer = make_optimizer(model, config);
  parallel::GradientSync gradients(*run.communicator, model->parameters(), model->buffers());
  TrainingLoop loop(config, run.device, model->parameters(), &gradients);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(settings.seed));
  // Training: the whole step (anchor matching, sampling, proposals, mask targets, forward, the five losses,
  // backward, all-reduce, update) on a batch in memory, so the number is the compute side alone.
  auto batch = bench_batch(config, run.local_batch);
  const auto images = batch_images(batch, run.device);
  const auto sizes = batch_sizes(batch);
  const auto targets = batch_targets(batch, run.device);
  const double train_seconds = run.training_step_seconds([&] {
    loop.update(training_step(model, optimizer, group_learning_rates(config, config.integer("warmup_steps")), images, sizes,
                              targets, generator));
  });
  const int64_t rois = config.integer("roi_batch_size_per_image");
  const std::string details = std::to_string(batch.padded_width) + "x" + std::to_string(batch.padded_height) + " px";
  run.print_training(out, train_seconds, "img",
                     3.0 * 2.0 * model->forward_macs(batch.padded_height, batch.padded_width, rois, rois / 4), details);
  if (run.memory_only()) return;
  // Inference with the reference's post-processing: detection, mask paste at the image size and RLE encoding.
  // An untrained model's scores hardly pass 0.05 on noise, so this model keeps every score: each image then
  // yields the detections_per_image limit, the post-processing's full load (a trained COCO model's usual case).
  MaskRcnn inference(model_options(config, run.communicator->world()).score_threshold(0.0));
  inference->to(run.device);
  inference->eval();
  int64_t detected = 0;
  const double infer_seconds = run.median_step_seconds([&] {
    torch::NoGradGuard no_grad;
    const auto found = inference->detect(images, sizes);
    std::vector<coco::Detection> box_results, mask_results;
    std::vector<int64_t> category_ids(static_cast<size_t>(config.integer("num_classes") - 1));
    for (size_t c = 0; c < category_ids.size(); ++c) category_ids[c] = static_cast<int64_t>(c + 1);
    for (size_t i = 0; i < found.size(); ++i)
      append_results(found[i], sizes[i], batch.heights[i], batch.widths[i], batch.image_ids[i], category_ids, box_results,
                     mask_results);
    detected = static_cast<int64_t>(box_results.size());
  });
  char line[256];
  std::snprintf(line, sizeof line,
                "inference     %10.1f img/s  (batch %lld, %s, %s, %d threads/rank, median of %lld steps: %.5f s/step, "
                "%lld detections per batch)\n",
                static_cast<double>(run.local_batch) / infer_seconds, static_cast<long long>(run.local_batch), details.c_str(),
                run.device.str().c_str(), settings.threads, static_cast<long long>(bench_settings.steps), infer_seconds,
                static_cast<long long>(detected));
  out << line;
}

// checkpoint export: the model a run of `settings` starts from (the seeded initialization with the preset's body
// weights, or --weights), under GeneralizedRCNN's names.
void export_weights(const WorkloadSettings& settings, const std::string& out_path) {
  seed_torch(settings);
  MaskRcnn model(model_options(settings.config, 1));
  start_from_weights(model, settings.config, settings.weights);
  save_state_dict(official_state(model), out_path);
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"maskrcnn",
          "Heavy object detection: Mask R-CNN with a ResNet-50-FPN backbone on COCO 2017, target box mAP 0.377 and mask "
          "mAP 0.339",
          trainbench_presets_maskrcnn, kCocoTree, construct_workload<MaskRcnnWorkload>, bench,
          make_generated_coco_dataset, /*prepare_dataset=*/nullptr, export_weights};
}

}  // namespace trainbench::maskrcnn
