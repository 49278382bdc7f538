#pragma once
// The v1.1 U-Net3D (mlcommons/training image_segmentation/pytorch, model/unet3d.py and layers.py) with its
// loss, score and sliding-window inference. Unet3dOptions{} is the reference model: filters
// [32, 64, 128, 256, 320]; every block Conv3d(3x3x3, padding 1, no bias) -> InstanceNorm3d(affine) -> ReLU;
// an input block (two blocks), one downsampling stage per filter step (a stride-2 block, then a block), a
// bottleneck stage at the last width, as many upsampling stages (ConvTranspose3d(2, stride 2, with bias), the
// skip concatenated after the upsampled tensor, two blocks) and a 1x1x1 output convolution with bias to 3
// classes. Submodules carry the reference's names (input_block.conv1.0.weight, downsample.0..., bottleneck,
// upsample.0.upsample_conv.0.bias, output.conv.weight), so its state dicts line up. The mini and tiny presets
// shorten `filters`: the same code with fewer or narrower stages.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "workloads/training_loop.h"

namespace trainbench::unet3d {

struct Unet3dOptions {
  TORCH_ARG(std::vector<int64_t>, filters) = std::vector<int64_t>{32, 64, 128, 256, 320};
  TORCH_ARG(int64_t, in_channels) = 1;
  TORCH_ARG(int64_t, classes) = 3;
};

// InputBlock and DownsampleBlock: two conv blocks (conv1, conv2), the first with `stride`.
class TwoBlocksImpl : public torch::nn::Module {
 public:
  TwoBlocksImpl(int64_t in, int64_t out, int64_t stride);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Sequential conv1{nullptr}, conv2{nullptr};
};
TORCH_MODULE(TwoBlocks);

// UpsampleBlock: upsample_conv (ConvTranspose3d), cat(upsampled, skip), conv1, conv2.
class UpsampleBlockImpl : public torch::nn::Module {
 public:
  UpsampleBlockImpl(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& skip);
  torch::nn::Sequential upsample_conv{nullptr}, conv1{nullptr}, conv2{nullptr};
};
TORCH_MODULE(UpsampleBlock);

class Unet3dImpl : public torch::nn::Module {
 public:
  explicit Unet3dImpl(Unet3dOptions options = {});
  torch::Tensor forward(torch::Tensor x);  // (N, 1, D, H, W) -> logits (N, 3, D, H, W)

  // The rules' weights_initialization names in the reference's spelling: input_block_{0,1}_{conv,
  // instancenorm}, down{i}_block_{0,1}_..., up{i}_deconv, up{i}_block_{0,1}_..., output_conv (50 for v1.1).
  std::vector<std::string> initialized_tensor_names() const;
  // Multiply-accumulates of one forward pass over a patch (convolutions only).
  int64_t forward_macs(const std::vector<int64_t>& patch) const;
  const Unet3dOptions& options() const { return options_; }

 private:
  Unet3dOptions options_;
  TwoBlocks input_block_{nullptr}, bottleneck_{nullptr};
  torch::nn::ModuleList downsample_{nullptr}, upsample_{nullptr};
  torch::nn::Conv3d output_conv_{nullptr};  // registered as output.conv, as OutputLayer names it
};
TORCH_MODULE(Unet3d);

// DiceCELoss(to_onehot_y, use_softmax, include_background=False): (mean over batch and foreground classes of
// 1 - Dice(softmax) + cross entropy) / 2, Dice = (2 sum(p y) + 1e-6) / (sum y + sum p + 1e-6).
// labels: (N, D, H, W) int64.
torch::Tensor dice_ce_loss(const torch::Tensor& logits, const torch::Tensor& labels);

// DiceScore: argmax, one-hot, the same Dice per sample and foreground class: (N, 2) for kidney and tumour.
// A class absent from both prediction and label scores (0 + 1e-6) / (0 + 1e-6) = 1.
torch::Tensor dice_scores(const torch::Tensor& logits, const torch::Tensor& labels);

// runtime/inference.py sliding_window_inference for one case: volume (D, H, W) float; windows of `roi` at
// overlap, padded with `padding_value`, each output weighted by the Gaussian importance patch; the weighted
// sum over the summed weights, cropped back. The model runs on `window_batch` windows at a time under no_grad
// (the reference: 1), so only that many windows' activations exist at once; the sums are added in the
// reference's window order either way. Returns logits (1, 3, D', H', W') over the cropped region, and the
// cropped region's labels (1, D', H', W') from `labels`.
struct WindowedPrediction {
  torch::Tensor logits, labels;
};
WindowedPrediction sliding_window_inference(Unet3d& model, const torch::Tensor& volume, const torch::Tensor& labels,
                                            const std::vector<int64_t>& roi, double overlap, double padding_value,
                                            int64_t window_batch = 1);

// runtime/training.py's learning rate for epoch e (1-based): lr_warmup sets init_lr + (lr - init_lr) e / warmup
// while e <= warmup_epochs; after it, lr times decay_factor for each decay boundary already passed (MultiStepLR
// steps after every epoch, so boundary b applies from epoch b + 1).
struct LearningRateSchedule {
  double init_lr = 1e-4;
  double lr = 1;
  int64_t warmup_epochs = 0;
  std::vector<int64_t> decay_boundary_epochs;
  double decay_factor = 1;
  double at_epoch(int64_t epoch) const;
};

// One update for the shared training loop: forward and Dice+CE loss per micro-batch, then SGD (Nesterov
// momentum, as the reference's torch.optim.SGD(nesterov=True)) at `learning_rate`.
// labels: (N, D, H, W) int64.
TrainingStep training_step(Unet3d model, torch::optim::SGD& optimizer, torch::Tensor images, torch::Tensor labels,
                           double learning_rate);

}  // namespace trainbench::unet3d
