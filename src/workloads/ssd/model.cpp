#include "workloads/ssd/model.h"

#include <cmath>
#include <limits>

#include "util/error.h"
#include "workloads/detection_common.h"

namespace trainbench::ssd {
namespace {

namespace F = torch::nn::functional;

// The reference's five extra blocks (1x1 conv to `mid`, 3x3 conv to `out`), for a 38 px backbone output.
struct ExtraBlock {
  int64_t mid, out, stride, padding;
};
constexpr ExtraBlock kExtraBlocks[] = {{256, 512, 2, 1}, {256, 512, 2, 1}, {128, 256, 2, 1}, {128, 256, 1, 0}, {128, 256, 1, 0}};
constexpr int kExtraBlockCount = 5;
constexpr int64_t kBackboneChannels[] = {64, 64, 128, 256};  // stem, layer1, layer2, layer3

int64_t backbone_side(int64_t image_size) {
  int64_t side = (image_size - 1) / 2 + 1;  // conv1: 7x7, stride 2, padding 3
  side = (side - 1) / 2 + 1;                // max pool: 3x3, stride 2, padding 1
  return (side - 1) / 2 + 1;                // layer2's first block: 3x3, stride 2, padding 1
}

// How many leading extra blocks a backbone output of `side` skips: 38 -> 0, 19 -> 1, 10 -> 2.
int skipped_blocks(int64_t image_size) {
  switch (backbone_side(image_size)) {
    case 38: return 0;
    case 19: return 1;
    case 10: return 2;
    default:
      fail("image_size " + std::to_string(image_size),
           "gives a " + std::to_string(backbone_side(image_size)) +
               " px backbone output; SSD's extra blocks need 38, 19 or 10 (e.g. 300, 150 or 75 px input)");
  }
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(bias));
}

int64_t divided(int64_t channels, const SsdOptions& options) {
  if (options.width_divisor() <= 0 || channels % options.width_divisor() != 0)
    fail("width_divisor " + std::to_string(options.width_divisor()),
         "must divide every channel count of the reference model (64, 128, 256, 512)");
  return channels / options.width_divisor();
}

// A convolution's multiply-accumulates per image: one per weight and output position.
int64_t conv_macs(const torch::nn::Module& layer, int64_t out_side) {
  return layer.as<torch::nn::Conv2dImpl>()->weight.numel() * out_side * out_side;
}

}  // namespace

std::vector<int> feature_sizes(int64_t image_size) {
  std::vector<int> sizes{static_cast<int>(backbone_side(image_size))};
  for (int block = skipped_blocks(image_size); block < kExtraBlockCount; ++block) {
    const ExtraBlock& spec = kExtraBlocks[block];
    sizes.push_back(static_cast<int>((sizes.back() + 2 * spec.padding - 3) / spec.stride + 1));
  }
  return sizes;
}

StateDict official_state(const Ssd& model) {
  static const std::vector<std::pair<std::string, std::string>> renamed = {
      {"backbone.conv1.", "model.layer1.0."}, {"backbone.bn1.", "model.layer1.1."}, {"backbone.layer1.", "model.layer1.4."},
      {"backbone.layer2.", "model.layer1.5."}, {"backbone.layer3.", "model.layer2.0."}};
  StateDict state;
  for (NamedTensor& tensor : module_state(*model))  // the default boxes follow from the geometry: not weights
    if (tensor.name.rfind("default_boxes_", 0) != 0) state.push_back(std::move(tensor));
  return with_renamed_prefixes(std::move(state), renamed);
}

BasicBlockImpl::BasicBlockImpl(int64_t in_channels, int64_t channels, int64_t stride)
    : conv1(register_module("conv1", conv(in_channels, channels, 3, stride, 1, false))),
      conv2(register_module("conv2", conv(channels, channels, 3, 1, 1, false))),
      bn1(register_module("bn1", torch::nn::BatchNorm2d(channels))),
      bn2(register_module("bn2", torch::nn::BatchNorm2d(channels))) {
  if (in_channels != channels || stride != 1)
    downsample = register_module(
        "downsample", torch::nn::Sequential(conv(in_channels, channels, 1, stride, 0, false), torch::nn::BatchNorm2d(channels)));
}

torch::Tensor BasicBlockImpl::forward(const torch::Tensor& input) {
  auto out = torch::relu(bn1(conv1(input)));
  out = bn2(conv2(out));
  return torch::relu(out + (downsample ? downsample->forward(input) : input));
}

BackboneImpl::BackboneImpl(const SsdOptions& options) {
  const auto& blocks = options.blocks_per_stage();
  if (blocks.size() != 3 || *std::min_element(blocks.begin(), blocks.end()) < 1)
    fail("blocks_per_stage", "expected three positive block counts (ResNet-34: [3, 4, 6])");
  conv1 = register_module("conv1", conv(3, divided(kBackboneChannels[0], options), 7, 2, 3, false));
  bn1 = register_module("bn1", torch::nn::BatchNorm2d(divided(kBackboneChannels[0], options)));
  int64_t channels = divided(kBackboneChannels[0], options);
  std::vector<torch::nn::Sequential> stages;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t width = divided(kBackboneChannels[stage + 1], options);
    torch::nn::Sequential layer;
    for (int64_t block = 0; block < blocks[stage]; ++block) {
      // Only layer2 strides: the reference sets layer3's first stride to 1, keeping 38 x 38 at 300 px.
      layer->push_back(BasicBlock(channels, width, block == 0 && stage == 1 ? 2 : 1));
      channels = width;
    }
    stages.push_back(layer);
  }
  layer1 = register_module("layer1", stages[0]);
  layer2 = register_module("layer2", stages[1]);
  layer3 = register_module("layer3", stages[2]);
  out_channels_ = channels;
  // torchvision's ResNet initialisation, used when no ImageNet weights are loaded.
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* convolution = module->as<torch::nn::Conv2d>())
      torch::nn::init::kaiming_normal_(convolution->weight, 0, torch::kFanOut, torch::kReLU);
  }
}

torch::Tensor BackboneImpl::forward(const torch::Tensor& input) {
  auto out = torch::relu(bn1(conv1(input)));
  out = F::max_pool2d(out, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
  return layer3->forward(layer2->forward(layer1->forward(out)));
}

SsdImpl::SsdImpl(const SsdOptions& options) : options_(options) {
  backbone = register_module("backbone", Backbone(options));
  const std::vector<int> sizes = feature_sizes(options.image_size());
  const auto& geometry = options.geometry();
  geometry.check("default_boxes");
  if (std::vector<int>(geometry.feature_sizes) != sizes) {
    std::string expected;
    for (int size : sizes) expected += (expected.empty() ? "" : ", ") + std::to_string(size);
    fail("default_boxes.feature_sizes", "must be the model's feature sizes for image_size " +
                                            std::to_string(options.image_size()) + ": [" + expected + "]");
  }
  if (options.num_classes() < 2) fail("num_classes", "expected at least 2 (background and one category)");

  level_channels_ = {backbone->out_channels()};
  additional_blocks = register_module("additional_blocks", torch::nn::ModuleList());
  for (int block = skipped_blocks(options.image_size()); block < kExtraBlockCount; ++block) {
    const ExtraBlock& spec = kExtraBlocks[block];
    const int64_t mid = divided(spec.mid, options), out = divided(spec.out, options);
    additional_blocks->push_back(torch::nn::Sequential(conv(level_channels_.back(), mid, 1, 1, 0, true), torch::nn::ReLU(),
                                                       conv(mid, out, 3, spec.stride, spec.padding, true), torch::nn::ReLU()));
    level_channels_.push_back(out);
  }
  loc = register_module("loc", torch::nn::ModuleList());
  conf = register_module("conf", torch::nn::ModuleList());
  for (size_t level = 0; level < level_channels_.size(); ++level) {
    const int64_t boxes = geometry.boxes_per_location(level);
    loc->push_back(conv(level_channels_[level], boxes * 4, 3, 1, 1, true));
    conf->push_back(conv(level_channels_[level], boxes * options.num_classes(), 3, 1, 1, true));
  }
  // The reference's _init_weights: xavier_uniform on the weights of the extra blocks and heads; biases keep
  // PyTorch's default.
  for (auto* list : {&additional_blocks, &loc, &conf})
    for (auto& parameter : (*list)->parameters())
      if (parameter.dim() > 1) torch::nn::init::xavier_uniform_(parameter);

  const std::vector<float> boxes = detection::default_boxes_xywh(geometry);
  boxes_xywh_ = register_buffer("default_boxes_xywh",
                                torch::from_blob(const_cast<float*>(boxes.data()), {static_cast<int64_t>(boxes.size() / 4), 4},
                                                 torch::kFloat32).clone());
  boxes_ltrb_ = register_buffer("default_boxes_ltrb", detection::xywh_to_ltrb(boxes_xywh_));
}

std::pair<torch::Tensor, torch::Tensor> SsdImpl::forward(const torch::Tensor& images) {
  std::vector<torch::Tensor> features{backbone->forward(images)};
  for (const auto& block : *additional_blocks) features.push_back(block->as<torch::nn::Sequential>()->forward(features.back()));
  std::vector<torch::Tensor> locations, scores;
  const int64_t batch = images.size(0);
  for (size_t level = 0; level < features.size(); ++level) {
    locations.push_back(loc[level]->as<torch::nn::Conv2d>()->forward(features[level]).view({batch, 4, -1}));
    scores.push_back(conf[level]->as<torch::nn::Conv2d>()->forward(features[level]).view({batch, options_.num_classes(), -1}));
  }
  return {torch::cat(locations, 2).contiguous(), torch::cat(scores, 2).contiguous()};
}

int64_t SsdImpl::forward_macs() const {
  int64_t macs = 0;
  int64_t side = (options_.image_size() - 1) / 2 + 1;
  macs += conv_macs(*backbone->conv1, side);
  side = (side - 1) / 2 + 1;
  for (const auto* layer : {&backbone->layer1, &backbone->layer2, &backbone->layer3})
    for (const auto& child : (*layer)->children()) {
      const auto& block = *child->as<BasicBlockImpl>();
      const int64_t out_side = (side - 1) / block.conv1->options.stride()->at(0) + 1;
      macs += conv_macs(*block.conv1, out_side) + conv_macs(*block.conv2, out_side);
      if (block.downsample) macs += conv_macs(*block.downsample->ptr(0), out_side);
      side = out_side;
    }
  const std::vector<int> sizes = feature_sizes(options_.image_size());
  for (size_t block = 0; block < additional_blocks->size(); ++block) {
    const auto& layers = *additional_blocks->ptr(block)->as<torch::nn::SequentialImpl>();
    macs += conv_macs(*layers.ptr(0), sizes[block]) + conv_macs(*layers.ptr(2), sizes[block + 1]);
  }
  for (size_t level = 0; level < sizes.size(); ++level)
    macs += conv_macs(*loc->ptr(level), sizes[level]) + conv_macs(*conf->ptr(level), sizes[level]);
  return macs;
}

void SsdImpl::load_backbone(const std::string& path) {
  load_module_state(path, *backbone, "torchvision's resnet34-333f7ec4.pth, as it is; docs/ssd.md");
}

std::vector<std::string> SsdImpl::mlperf_tensor_names() const {
  // The rules name the backbone's convolutions and batch norms by their order within a stage (a block's conv1,
  // conv2, then its shortcut conv), the extra blocks' 1x1 convs expand_trans_conv and 3x3 convs expand_conv,
  // and each level's predictor (the reference's loc and conf convs are one fused conv in MXNet) convpredictor.
  const std::string prefix = "ssd0_resnetmlperf0_";
  std::vector<std::string> names{prefix + "conv0_weight", prefix + "batchnorm0_gamma", prefix + "batchnorm0_beta"};
  int stage = 1;
  for (const auto* layer : {&backbone->layer1, &backbone->layer2, &backbone->layer3}) {
    int index = 0;
    auto add = [&] {
      const std::string stem = prefix + "stage" + std::to_string(stage) + "_";
      names.push_back(stem + "conv" + std::to_string(index) + "_weight");
      names.push_back(stem + "batchnorm" + std::to_string(index) + "_gamma");
      names.push_back(stem + "batchnorm" + std::to_string(index) + "_beta");
      ++index;
    };
    for (const auto& child : (*layer)->children()) {
      add();
      add();
      if (child->as<BasicBlockImpl>()->downsample) add();
    }
    ++stage;
  }
  for (size_t block = 0; block < additional_blocks->size(); ++block)
    for (const char* kind : {"expand_trans_conv", "expand_conv"})
      for (const char* tensor : {"_weight", "_bias"}) names.push_back("ssd0_" + std::string(kind) + std::to_string(block) + tensor);
  for (size_t level = 0; level < loc->size(); ++level)
    for (const char* tensor : {"_weight", "_bias"})
      names.push_back("ssd0_convpredictor" + std::to_string(level) + "_conv0" + tensor);
  return names;
}

std::pair<torch::Tensor, torch::Tensor> match(const torch::Tensor& truth_ltrb, const torch::Tensor& truth_labels,
                                              const torch::Tensor& default_ltrb, const torch::Tensor& default_xywh,
                                              double criterion) {
  const auto ious = detection::box_iou(truth_ltrb, default_ltrb);  // (M, B)
  auto [best_truth_iou, best_truth] = ious.max(0);                 // per default box
  const auto best_box = std::get<1>(ious.max(1));                  // per ground truth
  best_truth_iou.index_fill_(0, best_box, 2.0);
  // Forced matches override the IoU choice (the reference's best_dbox_idx[best_bbox_idx[idx]] = idx).
  best_truth.index_put_({best_box}, torch::arange(best_box.size(0), best_box.options()));
  const auto matched = best_truth_iou > criterion;
  auto labels = torch::zeros({default_ltrb.size(0)}, truth_labels.options());
  labels.index_put_({matched}, truth_labels.index({best_truth.index({matched})}));
  auto boxes = default_ltrb.clone();
  boxes.index_put_({matched}, truth_ltrb.index({best_truth.index({matched})}));
  return {detection::ltrb_to_xywh(boxes), labels};
}

torch::Tensor ssd_loss(const torch::Tensor& locations, const torch::Tensor& scores, const torch::Tensor& matched_xywh,
                       const torch::Tensor& labels, const torch::Tensor& default_xywh) {
  const auto positive = labels > 0;                // (N, B)
  const auto positives = positive.sum(1);          // (N)
  const auto targets = detection::encode_boxes(matched_xywh, default_xywh).transpose(1, 2);  // (N, 4, B)
  const auto box_loss = (F::smooth_l1_loss(locations, targets, F::SmoothL1LossFuncOptions().reduction(torch::kNone)).sum(1) *
                         positive.to(locations.scalar_type()))
                            .sum(1);
  const auto class_loss = F::cross_entropy(scores, labels, F::CrossEntropyFuncOptions().reduction(torch::kNone));  // (N, B)
  // Hard negatives: the 3P background boxes with the highest loss (positives excluded by zeroing them).
  const auto negative_loss = class_loss.detach().masked_fill(positive, 0);
  const auto rank = std::get<1>(negative_loss.sort(1, /*descending=*/true)).argsort(/*dim=*/1, /*descending=*/false);
  const auto negative = rank < (3 * positives).clamp_max(labels.size(1)).unsqueeze(1);
  // Added, not or-ed: when 3P exceeds the negatives a positive is also "mined" and counts twice, as in the reference.
  const auto selected = positive.to(class_loss.scalar_type()) + negative.to(class_loss.scalar_type());
  const auto total = box_loss + (class_loss * selected).sum(1);
  const auto has_positives = (positives > 0).to(total.scalar_type());
  return (total * has_positives / positives.to(total.scalar_type()).clamp_min(1e-6)).mean();
}

ImageDetections decode(const torch::Tensor& locations, const torch::Tensor& scores, const torch::Tensor& default_xywh,
                       const DecodeOptions& options) {
  const auto boxes = detection::xywh_to_ltrb(detection::decode_boxes(locations.t(), default_xywh));  // (B, 4)
  const auto probabilities = torch::softmax(scores.t(), 1);                                             // (B, C)
  std::vector<torch::Tensor> kept_boxes, kept_scores, kept_labels;
  for (int64_t label = 1; label < probabilities.size(1); ++label) {
    const auto class_scores = probabilities.select(1, label);
    const auto candidates = torch::nonzero(class_scores > options.score_threshold).squeeze(1);
    if (candidates.numel() == 0) continue;
    const auto order = std::get<1>(class_scores.index_select(0, candidates).sort(/*stable=*/true, 0, /*descending=*/true));
    const auto best = candidates.index_select(0, order.narrow(0, 0, std::min(options.candidates_per_class, order.numel())));
    kept_boxes.push_back(boxes.index_select(0, best));
    kept_scores.push_back(class_scores.index_select(0, best));
    kept_labels.push_back(torch::full({best.numel()}, label, best.options()));
  }
  const auto long_options = torch::TensorOptions(torch::kInt64).device(locations.device());
  if (kept_boxes.empty())
    return {torch::empty({0, 4}, locations.options()), torch::empty({0}, long_options), torch::empty({0}, locations.options())};
  auto all_boxes = torch::cat(kept_boxes), all_scores = torch::cat(kept_scores), all_labels = torch::cat(kept_labels);
  // The reference keeps a box when its IoU with every kept one is < nms_iou; NMS drops IoU > threshold, and
  // for float IoUs "> the float just below nms_iou" is exactly ">= nms_iou".
  const double threshold = std::nextafter(static_cast<float>(options.nms_iou), 0.0f);
  auto keep = detection::batched_nms(all_boxes, all_scores, all_labels, threshold);
  keep = keep.narrow(0, 0, std::min(options.max_detections, keep.numel()));  // batched_nms returns best first
  return {all_boxes.index_select(0, keep), all_labels.index_select(0, keep), all_scores.index_select(0, keep)};
}

// One update: forward and the reference loss per micro-batch, then the SGD update at `learning_rate`.
TrainingStep training_step(Ssd model, torch::optim::SGD& optimizer, torch::Tensor images, torch::Tensor matched_boxes,
                           torch::Tensor matched_labels, double learning_rate) {
  TrainingStep step;
  step.samples = images.size(0);
  step.loss = [=](const BatchSlice& slice) mutable {
    const auto [locations, scores] = model->forward(slice.of(images));
    return ssd_loss(locations, scores, slice.of(matched_boxes), slice.of(matched_labels), model->default_boxes_xywh());
  };
  step.update = [&optimizer, learning_rate] {
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(learning_rate);
    optimizer.step();
  };
  return step;
}

}  // namespace trainbench::ssd
