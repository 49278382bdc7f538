#include "workloads/unet3d/model.h"

#include <cmath>

#include "medical/patches.h"
#include "util/error.h"

namespace trainbench::unet3d {

namespace {

namespace nn = torch::nn;

// layers.py conv_block_factory with instance norm: Conv3d (no bias) -> InstanceNorm3d(affine) -> ReLU.
nn::Sequential conv_block(int64_t in, int64_t out, int64_t stride = 1) {
  return nn::Sequential(nn::Conv3d(nn::Conv3dOptions(in, out, 3).stride(stride).padding(1).bias(false)),
                        nn::InstanceNorm3d(nn::InstanceNorm3dOptions(out).affine(true).track_running_stats(false)),
                        nn::ReLU());
}

int64_t conv_macs(int64_t in, int64_t out, int64_t kernel_volume, int64_t output_voxels) {
  return in * out * kernel_volume * output_voxels;
}

// (2 sum(p y) + 1e-6) / (sum y + sum p + 1e-6) over the spatial axes, background excluded: (N, classes - 1).
torch::Tensor dice(const torch::Tensor& prediction, const torch::Tensor& target) {
  const auto p = prediction.slice(1, 1), y = target.slice(1, 1);
  const std::vector<int64_t> spatial{2, 3, 4};
  const auto intersection = (p * y).sum(spatial), target_sum = y.sum(spatial), prediction_sum = p.sum(spatial);
  return (2.0 * intersection + 1e-6) / (target_sum + prediction_sum + 1e-6);
}

// (N, D, H, W) class indices as (N, classes, D, H, W) float indicators.
torch::Tensor one_hot_channels(const torch::Tensor& labels, int64_t classes) {
  return torch::one_hot(labels.to(torch::kInt64), classes).permute({0, 4, 1, 2, 3}).to(torch::kFloat32);
}

}  // namespace

TwoBlocksImpl::TwoBlocksImpl(int64_t in, int64_t out, int64_t stride)
    : conv1(register_module("conv1", conv_block(in, out, stride))), conv2(register_module("conv2", conv_block(out, out))) {}

torch::Tensor TwoBlocksImpl::forward(const torch::Tensor& x) { return conv2->forward(conv1->forward(x)); }

UpsampleBlockImpl::UpsampleBlockImpl(int64_t in, int64_t out)
    : upsample_conv(register_module(
          "upsample_conv", nn::Sequential(nn::ConvTranspose3d(nn::ConvTranspose3dOptions(in, out, 2).stride(2).bias(true))))),
      conv1(register_module("conv1", conv_block(2 * out, out))),
      conv2(register_module("conv2", conv_block(out, out))) {}

torch::Tensor UpsampleBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& skip) {
  return conv2->forward(conv1->forward(torch::cat({upsample_conv->forward(x), skip}, 1)));
}

Unet3dImpl::Unet3dImpl(Unet3dOptions options) : options_(std::move(options)) {
  const std::vector<int64_t>& filters = options_.filters();
  if (filters.empty()) fail("unet3d filters", "needs at least one width");
  input_block_ = register_module("input_block", TwoBlocks(options_.in_channels(), filters[0], 1));
  downsample_ = register_module("downsample", nn::ModuleList());
  for (size_t i = 0; i + 1 < filters.size(); ++i) downsample_->push_back(TwoBlocks(filters[i], filters[i + 1], 2));
  bottleneck_ = register_module("bottleneck", TwoBlocks(filters.back(), filters.back(), 2));
  upsample_ = register_module("upsample", nn::ModuleList());
  upsample_->push_back(UpsampleBlock(filters.back(), filters.back()));
  for (size_t i = filters.size() - 1; i > 0; --i) upsample_->push_back(UpsampleBlock(filters[i], filters[i - 1]));
  output_conv_ = nn::Conv3d(nn::Conv3dOptions(filters[0], options_.classes(), 1).bias(true));
  register_module("output", nn::ModuleDict(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
                                {"conv", output_conv_.ptr()}}));
}

torch::Tensor Unet3dImpl::forward(torch::Tensor x) {
  x = input_block_->forward(x);
  std::vector<torch::Tensor> skips{x};
  for (const auto& stage : *downsample_) {
    x = stage->as<TwoBlocksImpl>()->forward(x);
    skips.push_back(x);
  }
  x = bottleneck_->forward(x);
  for (size_t i = 0; i < upsample_->size(); ++i)
    x = upsample_[i]->as<UpsampleBlockImpl>()->forward(x, skips[skips.size() - 1 - i]);
  return output_conv_->forward(x);
}

std::vector<std::string> Unet3dImpl::initialized_tensor_names() const {
  std::vector<std::string> names;
  const auto blocks = [&](const std::string& prefix) {
    for (const char* block : {"_block_0", "_block_1"})
      for (const char* part : {"_conv", "_instancenorm"}) names.push_back(prefix + block + part);
  };
  names.push_back("input_block_0_conv");
  names.push_back("input_block_0_instancenorm");
  names.push_back("input_block_1_conv");
  names.push_back("input_block_1_instancenorm");
  const size_t stages = options_.filters().size();  // downsampling stages including the bottleneck
  for (size_t i = 0; i < stages; ++i) blocks("down" + std::to_string(i));
  for (size_t i = 0; i < stages; ++i) {
    names.push_back("up" + std::to_string(i) + "_deconv");
    blocks("up" + std::to_string(i));
  }
  names.push_back("output_conv");
  return names;
}

int64_t Unet3dImpl::forward_macs(const std::vector<int64_t>& patch) const {
  const std::vector<int64_t>& filters = options_.filters();
  int64_t voxels = patch.at(0) * patch.at(1) * patch.at(2), macs = 0;
  std::vector<int64_t> level_voxels{voxels};
  macs += conv_macs(options_.in_channels(), filters[0], 27, voxels) + conv_macs(filters[0], filters[0], 27, voxels);
  std::vector<int64_t> widths = filters;
  widths.push_back(filters.back());  // the bottleneck keeps the last width
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    voxels /= 8;
    level_voxels.push_back(voxels);
    macs += conv_macs(widths[i], widths[i + 1], 27, voxels) + conv_macs(widths[i + 1], widths[i + 1], 27, voxels);
  }
  for (size_t i = widths.size() - 1; i > 0; --i) {
    const int64_t out_voxels = level_voxels[i - 1];
    macs += conv_macs(widths[i], widths[i - 1], 8, out_voxels / 8);  // each input voxel feeds 2x2x2 outputs
    macs += conv_macs(2 * widths[i - 1], widths[i - 1], 27, out_voxels) + conv_macs(widths[i - 1], widths[i - 1], 27, out_voxels);
  }
  macs += conv_macs(filters[0], options_.classes(), 1, level_voxels[0]);
  return macs;
}

torch::Tensor dice_ce_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  const auto cross_entropy = torch::nn::functional::cross_entropy(logits, labels);
  const auto dice_loss = (1.0 - dice(torch::softmax(logits, 1), one_hot_channels(labels, logits.size(1)))).mean();
  return (dice_loss + cross_entropy) / 2;
}

torch::Tensor dice_scores(const torch::Tensor& logits, const torch::Tensor& labels) {
  const int64_t classes = logits.size(1);
  return dice(one_hot_channels(logits.argmax(1), classes), one_hot_channels(labels, classes));
}

WindowedPrediction sliding_window_inference(Unet3d& model, const torch::Tensor& volume, const torch::Tensor& labels,
                                            const std::vector<int64_t>& roi, double overlap, double padding_value,
                                            int64_t window_batch) {
  torch::NoGradGuard no_grad;
  const medical::Shape3 shape{volume.size(0), volume.size(1), volume.size(2)};
  const medical::Shape3 window{roi.at(0), roi.at(1), roi.at(2)};
  const medical::WindowPlan plan = medical::plan_sliding_windows(shape, window, overlap);
  using torch::indexing::Slice;
  const auto crop = [&](const torch::Tensor& t) {
    return t.index({Slice(plan.crop_low[0], plan.crop_low[0] + plan.cropped[0]),
                    Slice(plan.crop_low[1], plan.crop_low[1] + plan.cropped[1]),
                    Slice(plan.crop_low[2], plan.crop_low[2] + plan.cropped[2])});
  };
  const auto device = volume.device();
  auto padded = torch::full({1, 1, plan.padded[0], plan.padded[1], plan.padded[2]}, padding_value, volume.options());
  padded.index({0, 0, Slice(plan.pad_low[0], plan.pad_low[0] + plan.cropped[0]),
                Slice(plan.pad_low[1], plan.pad_low[1] + plan.cropped[1]), Slice(plan.pad_low[2], plan.pad_low[2] + plan.cropped[2])})
      .copy_(crop(volume));
  const std::vector<float> importance_values = medical::gaussian_importance(window);
  const auto importance = torch::from_blob(const_cast<float*>(importance_values.data()), {window[0], window[1], window[2]},
                                           torch::kFloat32).to(device);
  const int64_t classes = model->options().classes();
  auto result = torch::zeros({1, classes, plan.padded[0], plan.padded[1], plan.padded[2]}, volume.options());
  // One channel of weights: the reference keeps three identical ones.
  auto weight_sum = torch::zeros({plan.padded[0], plan.padded[1], plan.padded[2]}, volume.options());
  const auto region_of = [&](const std::array<int64_t, 3>& origin) {
    return std::vector<torch::indexing::TensorIndex>{Slice(), Slice(), Slice(origin[0], origin[0] + window[0]),
                                                     Slice(origin[1], origin[1] + window[1]),
                                                     Slice(origin[2], origin[2] + window[2])};
  };
  const auto batch_size = static_cast<size_t>(std::max<int64_t>(1, window_batch));
  for (size_t first = 0; first < plan.origins.size(); first += batch_size) {
    const size_t last = std::min(plan.origins.size(), first + batch_size);
    std::vector<torch::Tensor> windows;
    for (size_t w = first; w < last; ++w) windows.push_back(padded.index(region_of(plan.origins[w])));
    const torch::Tensor outputs = model->forward(torch::cat(windows, 0));
    // Added window by window in the reference's order, so batching does not change the sums.
    for (size_t w = first; w < last; ++w) {
      auto region = region_of(plan.origins[w]);
      result.index(region).add_(outputs.slice(0, static_cast<int64_t>(w - first), static_cast<int64_t>(w - first + 1)) * importance);
      region.erase(region.begin(), region.begin() + 2);
      weight_sum.index(region).add_(importance);
    }
  }
  result.div_(weight_sum);
  return {result.index({Slice(), Slice(), Slice(plan.pad_low[0], plan.pad_low[0] + plan.cropped[0]),
                        Slice(plan.pad_low[1], plan.pad_low[1] + plan.cropped[1]),
                        Slice(plan.pad_low[2], plan.pad_low[2] + plan.cropped[2])}),
          crop(labels).unsqueeze(0)};
}

double LearningRateSchedule::at_epoch(int64_t epoch) const {
  if (warmup_epochs > 0 && epoch <= warmup_epochs)
    return init_lr + (lr - init_lr) * static_cast<double>(epoch) / static_cast<double>(warmup_epochs);
  double rate = lr;
  for (const int64_t boundary : decay_boundary_epochs)
    if (boundary <= epoch - 1) rate *= decay_factor;
  return rate;
}

TrainingStep training_step(Unet3d model, torch::optim::SGD& optimizer, torch::Tensor images, torch::Tensor labels,
                           double learning_rate) {
  TrainingStep step;
  step.samples = images.size(0);
  step.loss = [=](const BatchSlice& slice) mutable { return dice_ce_loss(model->forward(slice.of(images)), slice.of(labels)); };
  step.update = [&optimizer, learning_rate] {
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(learning_rate);
    optimizer.step();
  };
  return step;
}

}  // namespace trainbench::unet3d
