#include "workloads/maskrcnn/model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "detection/box_ops.h"
#include "detection/rcnn_targets.h"
#include "util/error.h"
#include "util/numpy_pickle.h"
#include "workloads/detection_common.h"

namespace trainbench::maskrcnn {

namespace {

namespace F = torch::nn::functional;

// The RPN's box coder weights (1, 1, 1, 1) and the box head's (10, 10, 5, 5), as the reference configures them.
const detection::DetectronBoxCoder kRpnCoder{{1, 1, 1, 1}};
const detection::DetectronBoxCoder kBoxHeadCoder{{10, 10, 5, 5}};

torch::nn::AnyModule make_norm(int64_t channels, bool frozen) {
  if (frozen) return torch::nn::AnyModule(FrozenBatchNorm2d(channels));
  return torch::nn::AnyModule(torch::nn::BatchNorm2d(channels));
}

// The reference's body convolutions: no bias, kaiming_uniform(a=1) (replaced by the weights file when one is given).
torch::nn::Conv2d body_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
  torch::nn::init::kaiming_uniform_(conv->weight, 1);
  return conv;
}

// FPN, fc6/fc7: kaiming_uniform(a=1), bias 0 (the reference's conv_with_kaiming_uniform and make_fc).
torch::nn::Conv2d fpn_conv(int64_t in, int64_t out, int64_t kernel) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(in, out, kernel).padding(kernel / 2));
  torch::nn::init::kaiming_uniform_(conv->weight, 1);
  torch::nn::init::zeros_(conv->bias);
  return conv;
}

torch::nn::Linear uniform_fc(int64_t in, int64_t out) {
  torch::nn::Linear fc(in, out);
  torch::nn::init::kaiming_uniform_(fc->weight, 1);
  torch::nn::init::zeros_(fc->bias);
  return fc;
}

template <typename Layer>
Layer normal_init(Layer layer, double std) {
  torch::nn::init::normal_(layer->weight, 0, std);
  torch::nn::init::zeros_(layer->bias);
  return layer;
}

// The mask head's convolutions: kaiming_normal(fan_out, relu), bias 0.
template <typename Layer>
Layer fan_out_init(Layer layer) {
  torch::nn::init::kaiming_normal_(layer->weight, 0, torch::kFanOut, torch::kReLU);
  torch::nn::init::zeros_(layer->bias);
  return layer;
}

// box_ops' NMS measures boxes without Detectron's +1: one more pixel on the right and bottom edges gives exactly
// the reference's inclusive areas and intersections.
torch::Tensor inclusive_edges(const torch::Tensor& boxes) {
  return boxes + torch::tensor({0.0, 0.0, 1.0, 1.0}, boxes.options());
}

// SmoothL1 as the reference's smooth_l1_loss(size_average=False): summed.
torch::Tensor smooth_l1_sum(const torch::Tensor& input, const torch::Tensor& target, double beta) {
  const auto distance = (input - target).abs();
  return torch::where(distance < beta, 0.5 * distance * distance / beta, distance - 0.5 * beta).sum();
}

torch::Tensor rows_at(const torch::Tensor& values, const torch::Tensor& indices) { return values.index_select(0, indices); }

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The Caffe2 blob of a body tensor: the reference's renaming (utils/c2_model_loading.py,
// _rename_basic_resnet_weights) run backwards. conv1 is conv1 and bn1 res_conv1_bn; layer<i>.<j> is res<i+1>_<j>,
// its conv1..conv3 branch2a..branch2c and downsample.0 branch1, each followed by its batch norm (<conv>_bn); a
// convolution's weight is _w, a batch norm's weight (scale) _s and its bias _b.
std::string caffe2_blob_name(const std::string& name) {
  const size_t field_dot = name.rfind('.');
  const std::string module = name.substr(0, field_dot);
  const std::string norm = name.substr(field_dot + 1) == "weight" ? "_bn_s" : "_bn_b";
  if (module == "conv1") return "conv1_w";
  if (module == "bn1") return "res_conv1" + norm;
  const size_t stage_dot = module.find('.'), block_dot = module.find('.', stage_dot + 1);
  const std::string block = "res" + std::to_string(std::stoi(module.substr(5, stage_dot - 5)) + 1) + "_" +
                            module.substr(stage_dot + 1, block_dot - stage_dot - 1);
  const std::string layer = module.substr(block_dot + 1);  // conv2, bn2, downsample.0 or downsample.1
  if (layer == "downsample.0") return block + "_branch1_w";
  if (layer == "downsample.1") return block + "_branch1" + norm;
  const std::string branch = block + "_branch2" + static_cast<char>('a' + (layer.back() - '1'));
  return layer.rfind("conv", 0) == 0 ? branch + "_w" : branch + norm;
}

}  // namespace

FrozenBatchNorm2dImpl::FrozenBatchNorm2dImpl(int64_t channels) {
  weight = register_buffer("weight", torch::ones({channels}));
  bias = register_buffer("bias", torch::zeros({channels}));
  running_mean = register_buffer("running_mean", torch::zeros({channels}));
  running_var = register_buffer("running_var", torch::ones({channels}));
}

torch::Tensor FrozenBatchNorm2dImpl::forward(const torch::Tensor& input) {
  const auto scale = weight * running_var.rsqrt();
  const auto shift = bias - running_mean * scale;
  return input * scale.view({1, -1, 1, 1}) + shift.view({1, -1, 1, 1});
}

BottleneckImpl::BottleneckImpl(int64_t in_channels, int64_t width, int64_t stride, bool frozen_batch_norm,
                               bool stride_in_1x1) {
  const int64_t out_channels = 4 * width;
  conv1 = register_module("conv1", body_conv(in_channels, width, 1, stride_in_1x1 ? stride : 1));
  bn1 = make_norm(width, frozen_batch_norm);
  register_module("bn1", bn1.ptr());
  conv2 = register_module("conv2", body_conv(width, width, 3, stride_in_1x1 ? 1 : stride));
  bn2 = make_norm(width, frozen_batch_norm);
  register_module("bn2", bn2.ptr());
  conv3 = register_module("conv3", body_conv(width, out_channels, 1, 1));
  bn3 = make_norm(out_channels, frozen_batch_norm);
  register_module("bn3", bn3.ptr());
  if (in_channels != out_channels || stride != 1) {
    downsample = torch::nn::Sequential();
    downsample->push_back(body_conv(in_channels, out_channels, 1, stride));
    downsample->push_back(make_norm(out_channels, frozen_batch_norm));
    register_module("downsample", downsample);
  }
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& input) {
  auto x = torch::relu(bn1.forward(conv1(input)));
  x = torch::relu(bn2.forward(conv2(x)));
  x = bn3.forward(conv3(x));
  return torch::relu(x + (downsample ? downsample->forward(input) : input));
}

BodyImpl::BodyImpl(const MaskRcnnOptions& options) {
  const auto& widths = options.body_widths();
  const auto& blocks = options.blocks_per_stage();
  if (widths.size() != 4 || blocks.size() != 4)
    fail("MaskRcnnOptions", "body_widths and blocks_per_stage need 4 entries (res2..res5)");
  conv1 = register_module("conv1", body_conv(3, widths[0], 7, 2));
  bn1 = make_norm(widths[0], options.frozen_batch_norm());
  register_module("bn1", bn1.ptr());
  int64_t channels = widths[0];
  torch::nn::Sequential* stages[] = {&layer1, &layer2, &layer3, &layer4};
  for (size_t stage = 0; stage < 4; ++stage) {
    torch::nn::Sequential layer;
    for (int64_t block = 0; block < blocks[stage]; ++block) {
      const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
      layer->push_back(Bottleneck(channels, widths[stage], stride, options.frozen_batch_norm(), options.stride_in_1x1()));
      channels = 4 * widths[stage];
    }
    *stages[stage] = register_module("layer" + std::to_string(stage + 1), layer);
    out_channels_.push_back(channels);
  }
}

std::vector<torch::Tensor> BodyImpl::forward(const torch::Tensor& images) {
  auto x = torch::max_pool2d(torch::relu(bn1.forward(conv1(images))), 3, 2, 1);
  const auto c2 = layer1->forward(x);
  const auto c3 = layer2->forward(c2);
  const auto c4 = layer3->forward(c3);
  return {c2, c3, c4, layer4->forward(c4)};
}

MaskRcnnImpl::MaskRcnnImpl(const MaskRcnnOptions& options) : options_(options) {
  if (options.anchor_sizes().size() != 5) fail("MaskRcnnOptions", "anchor_sizes needs one size per level P2..P6 (5)");
  anchor_options_.strides = MaskRcnnOptions::strides();
  anchor_options_.sizes = options.anchor_sizes();
  anchor_options_.aspect_ratios = options.aspect_ratios();
  anchor_options_.straddle_threshold = options.straddle_threshold();

  body = register_module("body", Body(options));
  const int64_t channels = options.fpn_channels();
  for (size_t level = 0; level < 4; ++level) {
    const std::string suffix = std::to_string(level + 1);
    fpn_inner.push_back(register_module("fpn_inner" + suffix, fpn_conv(body->out_channels()[level], channels, 1)));
    fpn_layer.push_back(register_module("fpn_layer" + suffix, fpn_conv(channels, channels, 3)));
  }
  const auto anchors_per_location = static_cast<int64_t>(options.aspect_ratios().size());
  rpn_conv = register_module(
      "rpn_conv", normal_init(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, 3).padding(1)), 0.01));
  rpn_cls_logits = register_module(
      "rpn_cls_logits", normal_init(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, anchors_per_location, 1)), 0.01));
  rpn_bbox_pred = register_module(
      "rpn_bbox_pred", normal_init(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, 4 * anchors_per_location, 1)), 0.01));

  const int64_t pooled = options.box_pooled_size(), fc = options.box_fc_size(), classes = options.num_classes();
  fc6 = register_module("fc6", uniform_fc(channels * pooled * pooled, fc));
  fc7 = register_module("fc7", uniform_fc(fc, fc));
  cls_score = register_module("cls_score", normal_init(torch::nn::Linear(fc, classes), 0.01));
  bbox_pred = register_module("bbox_pred", normal_init(torch::nn::Linear(fc, 4 * classes), 0.001));

  int64_t in = channels;
  for (size_t layer = 0; layer < options.mask_conv_channels().size(); ++layer) {
    const int64_t out = options.mask_conv_channels()[layer];
    mask_fcn.push_back(register_module("mask_fcn" + std::to_string(layer + 1),
                                       fan_out_init(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)))));
    in = out;
  }
  conv5_mask = register_module("conv5_mask",
                               fan_out_init(torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(in, in, 2).stride(2))));
  mask_fcn_logits = register_module("mask_fcn_logits", fan_out_init(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, classes, 1))));
  freeze_stages();
}

void MaskRcnnImpl::freeze_stages() {
  std::vector<std::shared_ptr<torch::nn::Module>> frozen;
  if (options_.freeze_at() >= 1) frozen = {body->conv1.ptr(), body->bn1.ptr()};
  if (options_.freeze_at() >= 2) frozen.push_back(body->layer1.ptr());
  for (const auto& module : frozen)
    for (auto& parameter : module->parameters()) parameter.set_requires_grad(false);
}

std::vector<torch::Tensor> MaskRcnnImpl::features(const torch::Tensor& images) {
  const auto c = body->forward(images);
  auto last_inner = fpn_inner[3](c[3]);
  std::vector<torch::Tensor> levels(4);
  levels[3] = fpn_layer[3](last_inner);
  for (int level = 2; level >= 0; --level) {
    const auto top_down = F::interpolate(
        last_inner, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest));
    last_inner = fpn_inner[level](c[level]) + top_down;
    levels[level] = fpn_layer[level](last_inner);
  }
  levels.push_back(torch::max_pool2d(levels[3], 1, 2));  // P6
  return levels;
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> MaskRcnnImpl::rpn_head(
    const std::vector<torch::Tensor>& features) {
  std::vector<torch::Tensor> objectness, deltas;
  for (const auto& level : features) {
    const auto hidden = torch::relu(rpn_conv(level));
    const auto logits = rpn_cls_logits(hidden);
    const auto boxes = rpn_bbox_pred(hidden);
    const int64_t n = logits.size(0), a = logits.size(1), h = logits.size(2), w = logits.size(3);
    objectness.push_back(logits.permute({0, 2, 3, 1}).reshape({n, -1}));
    deltas.push_back(boxes.view({n, a, 4, h, w}).permute({0, 3, 4, 1, 2}).reshape({n, -1, 4}));
  }
  return {objectness, deltas};
}

std::vector<torch::Tensor> MaskRcnnImpl::anchors(const std::vector<torch::Tensor>& features) const {
  std::vector<std::array<int64_t, 2>> sizes;
  for (const auto& level : features) sizes.push_back({level.size(2), level.size(3)});
  return detection::grid_anchors(anchor_options_, sizes, features.front().device());
}

std::vector<torch::Tensor> MaskRcnnImpl::proposals(const std::vector<torch::Tensor>& objectness,
                                                   const std::vector<torch::Tensor>& deltas,
                                                   const std::vector<torch::Tensor>& anchors,
                                                   const std::vector<ImageSize>& sizes, bool training) const {
  torch::NoGradGuard no_grad;
  const int64_t pre_nms = training ? options_.rpn_pre_nms_top_n_train() : options_.rpn_pre_nms_top_n_test();
  const int64_t post_nms = training ? options_.rpn_post_nms_top_n_train() : options_.rpn_post_nms_top_n_test();
  const auto images = static_cast<int64_t>(sizes.size());
  std::vector<std::vector<torch::Tensor>> boxes(sizes.size()), scores(sizes.size());
  for (size_t level = 0; level < objectness.size(); ++level) {
    const auto probabilities = objectness[level].detach().sigmoid();
    const auto [top, order] = probabilities.topk(std::min(pre_nms, probabilities.size(1)), 1, true, true);
    for (int64_t i = 0; i < images; ++i) {
      const auto& size = sizes[static_cast<size_t>(i)];
      auto decoded = kRpnCoder.decode(rows_at(deltas[level][i].detach(), order[i]), rows_at(anchors[level], order[i]));
      decoded = detection::clip_boxes_inclusive(decoded, size.width, size.height);
      const auto large = detection::keep_boxes_of_min_size(decoded, options_.rpn_min_size());
      decoded = rows_at(decoded, large);
      const auto level_scores = rows_at(top[i], large);
      auto keep = detection::nms(inclusive_edges(decoded), level_scores, options_.rpn_nms_threshold());
      keep = keep.slice(0, 0, post_nms);
      boxes[static_cast<size_t>(i)].push_back(rows_at(decoded, keep));
      scores[static_cast<size_t>(i)].push_back(rows_at(level_scores, keep));
    }
  }
  std::vector<torch::Tensor> image_boxes, image_scores;
  for (int64_t i = 0; i < images; ++i) {
    image_boxes.push_back(torch::cat(boxes[static_cast<size_t>(i)]));
    image_scores.push_back(torch::cat(scores[static_cast<size_t>(i)]));
  }
  std::vector<torch::Tensor> selected;
  if (training) {
    // The top FPN_POST_NMS_TOP_N_TRAIN over the whole batch, each image keeping its boxes' order.
    const auto all_scores = torch::cat(image_scores);
    const auto best = std::get<1>(all_scores.topk(std::min(options_.fpn_post_nms_top_n_train(), all_scores.size(0)), 0, true, true));
    auto chosen = torch::zeros_like(all_scores, torch::kBool);
    chosen.index_fill_(0, best, true);
    int64_t offset = 0;
    for (int64_t i = 0; i < images; ++i) {
      const int64_t count = image_scores[static_cast<size_t>(i)].size(0);
      selected.push_back(image_boxes[static_cast<size_t>(i)].index({chosen.slice(0, offset, offset + count)}));
      offset += count;
    }
  } else {
    for (int64_t i = 0; i < images; ++i) {
      const auto& level_scores = image_scores[static_cast<size_t>(i)];
      const auto best = std::get<1>(level_scores.topk(std::min(options_.fpn_post_nms_top_n_test(), level_scores.size(0)), 0, true, true));
      selected.push_back(rows_at(image_boxes[static_cast<size_t>(i)], best));
    }
  }
  return selected;
}

std::pair<torch::Tensor, torch::Tensor> MaskRcnnImpl::box_head(const std::vector<torch::Tensor>& features,
                                                               const torch::Tensor& rois) {
  const std::vector<torch::Tensor> levels(features.begin(), features.begin() + 4);
  auto x = detection::multilevel_roi_align(levels, rois, {1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32}, options_.box_pooled_size(),
                                           options_.sampling_ratio());
  x = torch::relu(fc6(x.flatten(1)));
  x = torch::relu(fc7(x));
  return {cls_score(x), bbox_pred(x)};
}

torch::Tensor MaskRcnnImpl::mask_head(const std::vector<torch::Tensor>& features, const torch::Tensor& rois) {
  const std::vector<torch::Tensor> levels(features.begin(), features.begin() + 4);
  auto x = detection::multilevel_roi_align(levels, rois, {1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32}, options_.mask_pooled_size(),
                                           options_.sampling_ratio());
  for (auto& conv : mask_fcn) x = torch::relu(conv(x));
  return mask_fcn_logits(torch::relu(conv5_mask(x)));
}

Losses MaskRcnnImpl::losses(const torch::Tensor& images, const std::vector<ImageSize>& sizes,
                            const std::vector<ImageTarget>& targets, at::Generator generator) {
  const auto levels = features(images);
  const auto [objectness, deltas] = rpn_head(levels);
  const auto level_anchors = anchors(levels);
  const auto all_anchors = torch::cat(level_anchors);
  const auto all_objectness = torch::cat(objectness, 1);
  const auto all_deltas = torch::cat(deltas, 1);
  const auto images_count = static_cast<int64_t>(sizes.size());
  const auto device = images.device();

  // RPN: anchors matched at 0.7 / 0.3 with low-quality matches, those leaving the image ignored, 256 sampled.
  std::vector<torch::Tensor> rpn_logits, rpn_labels, rpn_predicted, rpn_targets;
  for (int64_t i = 0; i < images_count; ++i) {
    const auto& target = targets[static_cast<size_t>(i)];
    const auto& size = sizes[static_cast<size_t>(i)];
    const auto matched = detection::match_predictions(detection::box_iou_inclusive(target.boxes, all_anchors),
                                                      options_.rpn_fg_iou_threshold(), options_.rpn_bg_iou_threshold(), true);
    auto labels = (matched >= 0).to(torch::kInt64);
    labels.masked_fill_(matched == detection::kBetweenThresholds, -1);
    labels.masked_fill_(detection::visible_anchors(all_anchors, size.width, size.height, options_.straddle_threshold())
                            .logical_not(),
                        -1);
    const auto [positive, negative] = detection::sample_positive_negative(labels, options_.rpn_batch_size_per_image(),
                                                                          options_.rpn_positive_fraction(), generator);
    const auto sampled = torch::cat({positive, negative});
    rpn_logits.push_back(rows_at(all_objectness[i], sampled));
    rpn_labels.push_back(torch::cat({torch::ones({positive.size(0)}, images.options()), torch::zeros({negative.size(0)}, images.options())}));
    rpn_predicted.push_back(rows_at(all_deltas[i], positive));
    rpn_targets.push_back(kRpnCoder.encode(rows_at(target.boxes, rows_at(matched, positive)), rows_at(all_anchors, positive)));
  }
  Losses losses;
  const auto sampled_logits = torch::cat(rpn_logits);
  losses.objectness = F::binary_cross_entropy_with_logits(sampled_logits, torch::cat(rpn_labels));
  losses.rpn_box = smooth_l1_sum(torch::cat(rpn_predicted), torch::cat(rpn_targets), 1.0 / 9) /
                   static_cast<double>(sampled_logits.size(0));

  // Box head: proposals plus the ground truth, matched at 0.5, roi_batch_size_per_image sampled (in proposal order).
  const auto image_proposals = proposals(objectness, deltas, level_anchors, sizes, true);
  std::vector<torch::Tensor> sampled_boxes, sampled_labels, box_targets, positive_boxes, positive_labels;
  std::vector<std::vector<int64_t>> positive_objects(sizes.size());
  for (int64_t i = 0; i < images_count; ++i) {
    const auto& target = targets[static_cast<size_t>(i)];
    const auto candidates = torch::cat({image_proposals[static_cast<size_t>(i)], target.boxes});
    const auto matched = detection::match_predictions(detection::box_iou_inclusive(target.boxes, candidates),
                                                      options_.roi_fg_iou_threshold(), options_.roi_bg_iou_threshold(), false);
    auto labels = rows_at(target.labels, matched.clamp_min(0));
    labels.masked_fill_(matched == detection::kBelowLowThreshold, 0);
    labels.masked_fill_(matched == detection::kBetweenThresholds, -1);
    const auto [positive, negative] = detection::sample_positive_negative(labels, options_.roi_batch_size_per_image(),
                                                                          options_.roi_positive_fraction(), generator);
    const auto sampled = std::get<0>(torch::cat({positive, negative}).sort());
    const auto boxes = rows_at(candidates, sampled);
    const auto matched_sampled = rows_at(matched, sampled);
    const auto sampled_label = rows_at(labels, sampled);
    sampled_boxes.push_back(boxes);
    sampled_labels.push_back(sampled_label);
    box_targets.push_back(kBoxHeadCoder.encode(rows_at(target.boxes, matched_sampled.clamp_min(0)), boxes));
    const auto is_positive = (sampled_label > 0).nonzero().squeeze(1);
    positive_boxes.push_back(rows_at(boxes, is_positive));
    positive_labels.push_back(rows_at(sampled_label, is_positive));
    const auto objects = rows_at(matched_sampled, is_positive).to(torch::kCPU).contiguous();
    positive_objects[static_cast<size_t>(i)].assign(objects.data_ptr<int64_t>(), objects.data_ptr<int64_t>() + objects.numel());
  }
  const auto [class_logits, box_deltas] = box_head(levels, rois_of(sampled_boxes));
  const auto labels = torch::cat(sampled_labels);
  losses.classifier = F::cross_entropy(class_logits, labels);
  const auto positive = (labels > 0).nonzero().squeeze(1);
  const auto columns = 4 * rows_at(labels, positive).unsqueeze(1) + torch::arange(4, labels.options());
  losses.box_reg = smooth_l1_sum(rows_at(box_deltas, positive).gather(1, columns), rows_at(torch::cat(box_targets), positive), 1.0) /
                   static_cast<double>(labels.size(0));

  // Mask head on the positive RoIs: the matched object's polygons cropped to the RoI and rasterised.
  const auto mask_labels = torch::cat(positive_labels);
  const int64_t positives = mask_labels.size(0);
  if (positives == 0) {
    losses.mask = class_logits.sum() * 0;  // as the reference: no positive RoI, no mask loss, the graph kept
    return losses;
  }
  const int64_t resolution = options_.mask_resolution();
  std::vector<uint8_t> mask_bytes;
  mask_bytes.reserve(static_cast<size_t>(positives * resolution * resolution));
  for (int64_t i = 0; i < images_count; ++i) {
    const auto boxes = positive_boxes[static_cast<size_t>(i)].to(torch::kCPU, torch::kFloat32).contiguous();
    const auto& objects = positive_objects[static_cast<size_t>(i)];
    for (size_t k = 0; k < objects.size(); ++k) {
      const auto target = detection::polygon_mask_target(targets[static_cast<size_t>(i)].polygons.at(static_cast<size_t>(objects[k])),
                                                         boxes.data_ptr<float>() + 4 * k, static_cast<int>(resolution));
      mask_bytes.insert(mask_bytes.end(), target.begin(), target.end());
    }
  }
  const auto mask_targets =
      torch::from_blob(mask_bytes.data(), {positives, resolution, resolution}, torch::kUInt8).to(device, torch::kFloat32);
  const auto mask_logits = mask_head(levels, rois_of(positive_boxes));
  const auto chosen = mask_logits.index({torch::arange(positives, mask_labels.options()), mask_labels});
  losses.mask = F::binary_cross_entropy_with_logits(chosen, mask_targets);
  return losses;
}

std::vector<ImageDetections> MaskRcnnImpl::detect(const torch::Tensor& images, const std::vector<ImageSize>& sizes) {
  torch::NoGradGuard no_grad;
  const auto levels = features(images);
  const auto [objectness, deltas] = rpn_head(levels);
  const auto image_proposals = proposals(objectness, deltas, anchors(levels), sizes, false);
  const auto [class_logits, box_deltas] = box_head(levels, rois_of(image_proposals));
  const auto probabilities = torch::softmax(class_logits, -1);
  const int64_t classes = options_.num_classes();
  const auto decoded = kBoxHeadCoder.decode(box_deltas, torch::cat(image_proposals));

  std::vector<ImageDetections> detections;
  std::vector<torch::Tensor> detected_boxes;
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t count = image_proposals[i].size(0);
    const auto boxes = detection::clip_boxes_inclusive(decoded.slice(0, offset, offset + count).reshape({-1, 4}),
                                                       sizes[i].width, sizes[i].height)
                           .view({count, classes, 4});
    const auto scores = probabilities.slice(0, offset, offset + count).slice(1, 1);
    offset += count;
    // Per class j >= 1: score above the threshold, then NMS within the class.
    const auto candidates = (scores > options_.score_threshold()).nonzero();
    const auto rows = candidates.select(1, 0), columns = candidates.select(1, 1);
    auto candidate_boxes = boxes.index({rows, columns + 1});
    auto candidate_scores = scores.index({rows, columns});
    auto candidate_labels = columns + 1;
    const auto keep = detection::batched_nms(inclusive_edges(candidate_boxes), candidate_scores, candidate_labels,
                                             options_.detection_nms_threshold());
    ImageDetections found{rows_at(candidate_boxes, keep), rows_at(candidate_scores, keep), rows_at(candidate_labels, keep), {}};
    // The top detections_per_image by the reference's kthvalue cut, which keeps every detection tied at the cut.
    const int64_t kept = found.scores.size(0), limit = options_.detections_per_image();
    if (kept > limit) {
      const double cut = std::get<0>(found.scores.to(torch::kCPU).kthvalue(kept - limit + 1)).item<double>();
      const auto above = (found.scores >= cut).nonzero().squeeze(1);
      found.boxes = rows_at(found.boxes, above);
      found.scores = rows_at(found.scores, above);
      found.labels = rows_at(found.labels, above);
    }
    detected_boxes.push_back(found.boxes);
    detections.push_back(std::move(found));
  }
  const auto all_boxes = torch::cat(detected_boxes);
  const int64_t resolution = options_.mask_resolution();
  torch::Tensor masks = torch::empty({0, resolution, resolution}, images.options());
  if (all_boxes.size(0) > 0) {
    const auto labels = torch::cat([&] {
      std::vector<torch::Tensor> all;
      for (const auto& found : detections) all.push_back(found.labels);
      return all;
    }());
    masks = mask_head(levels, rois_of(detected_boxes)).index({torch::arange(labels.size(0), labels.options()), labels}).sigmoid();
  }
  offset = 0;
  for (auto& found : detections) {
    found.masks = masks.slice(0, offset, offset + found.boxes.size(0));
    offset += found.boxes.size(0);
  }
  return detections;
}

void MaskRcnnImpl::load_backbone(const std::string& path) {
  if (options_.backbone_weights() == BackboneWeights::kTorchvision) {
    load_module_state(path, *body,
                      "convert torchvision's resnet50 weights with scripts/convert_resnet50_backbone.py; docs/maskrcnn.md");
    return;
  }
  const std::map<std::string, PickledArray> blobs = read_pickled_arrays(path);
  std::set<std::string> used;
  torch::NoGradGuard no_grad;
  const auto copy = [&](const std::string& name, torch::Tensor& target) {
    const std::string blob = caffe2_blob_name(name);
    const auto found = blobs.find(blob);
    if (found == blobs.end())
      fail(path, "has no array '" + blob + "' (the body's " + name +
                     "): expected Detectron's MSRA R-50.pkl (docs/maskrcnn.md)");
    const PickledArray& array = found->second;
    if (c10::IntArrayRef(array.shape) != target.sizes())
      fail(path + ": " + blob, "has shape " + c10::str(c10::IntArrayRef(array.shape)) + ", the body's " + name + " is " +
                                   c10::str(target.sizes()));
    target.copy_(torch::from_blob(const_cast<float*>(array.values.data()), target.sizes(), torch::kFloat32));
    used.insert(blob);
  };
  for (auto& parameter : body->named_parameters()) copy(parameter.key(), parameter.value());
  for (auto& buffer : body->named_buffers()) {
    const std::string& name = buffer.key();
    if (ends_with(name, "running_mean"))
      buffer.value().zero_();
    else if (ends_with(name, "running_var"))
      buffer.value().fill_(1);
    else if (!ends_with(name, "num_batches_tracked"))
      copy(name, buffer.value());
  }
  // The reference would load the first blocks of a deeper ResNet's file and ignore the rest; refusing names the
  // mismatch instead.
  const std::regex block_weight(R"(res\d+_\d+_branch\w+_w)");
  for (const auto& [blob, array] : blobs)
    if (!used.count(blob) && std::regex_match(blob, block_weight))
      fail(path, "holds '" + blob + "', a block the body (blocks_per_stage " +
                     c10::str(c10::IntArrayRef(options_.blocks_per_stage())) + ") does not have");
}

std::vector<std::string> MaskRcnnImpl::mlperf_tensor_names() {
  std::vector<std::string> names;
  for (int level = 1; level <= 4; ++level) names.push_back("FPN_inner_block" + std::to_string(level));
  for (int level = 1; level <= 4; ++level) names.push_back("FPN_layer_block" + std::to_string(level));
  for (const char* name : {"RPNHead_conv", "RPNHead_cls", "RPNHead_bbox", "ROI_BOX_FEATURE_EXTRACTOR_fc6",
                           "ROI_BOX_FEATURE_EXTRACTOR_fc7", "ROI_BOX_PREDICTOR_cls", "ROI_BOX_PREDICTOR_bbox"})
    names.emplace_back(name);
  for (int layer = 1; layer <= 4; ++layer) names.push_back("ROI_MASK_FEATURE_EXTRACTOR_fcn" + std::to_string(layer));
  names.emplace_back("ROI_MASK_PREDICTOR_fcn5");
  names.emplace_back("ROI_MASK_PREDICTOR_fcn_logits");
  return names;
}

double MaskRcnnImpl::forward_macs(int64_t height, int64_t width, int64_t rois, int64_t mask_rois) const {
  // Each convolution: kernel area x in x out channels x output pixels; a stride halves both sides.
  double macs = 0;
  int64_t h = height / 2, w = width / 2;
  const auto conv = [&](int64_t in, int64_t out, int64_t kernel) {
    macs += static_cast<double>(kernel * kernel * in * out) * static_cast<double>(h * w);
  };
  const auto& widths = options_.body_widths();
  conv(3, widths[0], 7);
  h /= 2, w /= 2;
  int64_t channels = widths[0];
  std::vector<std::array<int64_t, 2>> level_sizes;
  for (size_t stage = 0; stage < 4; ++stage) {
    for (int64_t block = 0; block < options_.blocks_per_stage()[stage]; ++block) {
      const bool strided = stage > 0 && block == 0;
      if (strided && options_.stride_in_1x1()) h /= 2, w /= 2;
      conv(channels, widths[stage], 1);
      if (strided && !options_.stride_in_1x1()) h /= 2, w /= 2;
      conv(widths[stage], widths[stage], 3);
      conv(widths[stage], 4 * widths[stage], 1);
      if (block == 0) conv(channels, 4 * widths[stage], 1);
      channels = 4 * widths[stage];
    }
    level_sizes.push_back({h, w});
    const int64_t fpn = options_.fpn_channels();
    conv(channels, fpn, 1);
    conv(fpn, fpn, 3);
  }
  level_sizes.push_back({h / 2, w / 2});
  const int64_t fpn = options_.fpn_channels(), anchors_per_location = static_cast<int64_t>(options_.aspect_ratios().size());
  for (const auto& size : level_sizes) {
    h = size[0], w = size[1];
    conv(fpn, fpn, 3);
    conv(fpn, 5 * anchors_per_location, 1);
  }
  const double pooled = static_cast<double>(options_.box_pooled_size() * options_.box_pooled_size());
  const double fc = static_cast<double>(options_.box_fc_size()), classes = static_cast<double>(options_.num_classes());
  macs += static_cast<double>(rois) * (pooled * static_cast<double>(fpn) * fc + fc * fc + fc * 5 * classes);
  // The mask head per RoI: 3x3 convolutions at the pooled size, the transposed 2x2 stride-2 convolution (each
  // input pixel feeds a 2x2 patch) and the 1x1 logits at twice that size.
  const double mask_pixels = static_cast<double>(options_.mask_pooled_size() * options_.mask_pooled_size());
  double mask_macs = 0;
  int64_t in = fpn;
  for (int64_t out : options_.mask_conv_channels()) {
    mask_macs += 9.0 * static_cast<double>(in * out) * mask_pixels;
    in = out;
  }
  mask_macs += 4.0 * static_cast<double>(in * in) * mask_pixels;
  mask_macs += static_cast<double>(in) * classes * 4.0 * mask_pixels;
  return macs + static_cast<double>(mask_rois) * mask_macs;
}

torch::Tensor rois_of(const std::vector<torch::Tensor>& boxes_per_image) {
  std::vector<torch::Tensor> rois;
  for (size_t i = 0; i < boxes_per_image.size(); ++i) {
    const auto& boxes = boxes_per_image[i];
    rois.push_back(torch::cat({torch::full({boxes.size(0), 1}, static_cast<double>(i), boxes.options()), boxes}, 1));
  }
  return torch::cat(rois);
}

namespace {

// The rows of `values` (one per image) that `slice` covers.
template <typename Value>
std::vector<Value> rows_of(const std::vector<Value>& values, const BatchSlice& slice) {
  return {values.begin() + slice.begin, values.begin() + slice.begin + slice.size};
}

}  // namespace

TrainingStep training_step(MaskRcnn model, torch::optim::SGD& optimizer, std::vector<double> group_learning_rates,
                           torch::Tensor images, std::vector<ImageSize> sizes, std::vector<ImageTarget> targets,
                           at::Generator& generator) {
  if (group_learning_rates.size() != optimizer.param_groups().size())
    fail("maskrcnn training step", std::to_string(group_learning_rates.size()) + " learning rates for " +
                                       std::to_string(optimizer.param_groups().size()) + " parameter groups");
  TrainingStep step;
  step.samples = images.size(0);
  step.loss = [=, &generator](const BatchSlice& slice) mutable {
    return model->losses(slice.of(images), rows_of(sizes, slice), rows_of(targets, slice), generator).total();
  };
  step.update = [&optimizer, group_learning_rates] {
    for (size_t group = 0; group < group_learning_rates.size(); ++group)
      static_cast<torch::optim::SGDOptions&>(optimizer.param_groups()[group].options()).lr(group_learning_rates[group]);
    optimizer.step();
  };
  return step;
}


namespace {

// The cell anchors of the reference's AnchorGenerator, level by level, as this model's options make them.
std::vector<torch::Tensor> model_cell_anchors(const MaskRcnnOptions& options) {
  std::vector<torch::Tensor> anchors;
  const std::vector<int64_t> strides = MaskRcnnOptions::strides();
  for (size_t level = 0; level < strides.size(); ++level)
    anchors.push_back(detection::cell_anchors(strides[level], options.anchor_sizes()[level], options.aspect_ratios()));
  return anchors;
}

constexpr const char* kCellAnchors = "rpn.anchor_generator.cell_anchors.";

}  // namespace

StateDict official_state(const MaskRcnn& model) {
  StateDict own;
  for (const NamedTensor& named : module_state(*model))
    if (named.name.find("num_batches_tracked") == std::string::npos) own.push_back(named);
  StateDict state = with_renamed_prefixes(std::move(own), {{"body.conv1.", "backbone.body.stem.conv1."},
                                                           {"body.bn1.", "backbone.body.stem.bn1."},
                                                           {"body.", "backbone.body."},
                                                           {"fpn_", "backbone.fpn.fpn_"},
                                                           {"rpn_conv.", "rpn.head.conv."},
                                                           {"rpn_cls_logits.", "rpn.head.cls_logits."},
                                                           {"rpn_bbox_pred.", "rpn.head.bbox_pred."},
                                                           {"fc6.", "roi_heads.box.feature_extractor.fc6."},
                                                           {"fc7.", "roi_heads.box.feature_extractor.fc7."},
                                                           {"cls_score.", "roi_heads.box.predictor.cls_score."},
                                                           {"bbox_pred.", "roi_heads.box.predictor.bbox_pred."},
                                                           {"mask_fcn_logits.", "roi_heads.mask.predictor.mask_fcn_logits."},
                                                           {"mask_fcn", "roi_heads.mask.feature_extractor.mask_fcn"},
                                                           {"conv5_mask.", "roi_heads.mask.predictor.conv5_mask."}});
  const std::vector<torch::Tensor> anchors = model_cell_anchors(model->options());
  for (size_t level = 0; level < anchors.size(); ++level)
    state.push_back({kCellAnchors + std::to_string(level), anchors[level].clone()});
  return state;
}

void check_official_anchors(const MaskRcnn& model, const StateDict& state, const std::string& path) {
  const std::vector<torch::Tensor> anchors = model_cell_anchors(model->options());
  for (const NamedTensor& named : state) {
    if (named.name.rfind(kCellAnchors, 0) != 0) continue;
    const size_t level = std::stoul(named.name.substr(std::string(kCellAnchors).size()));
    if (!torch::allclose(named.tensor.to(torch::kCPU, torch::kFloat32), anchors.at(level).to(torch::kFloat32)))
      fail(path, named.name + " differs from this model's anchors (anchor_sizes and aspect_ratios): the file is of another configuration");
  }
}

}  // namespace trainbench::maskrcnn
