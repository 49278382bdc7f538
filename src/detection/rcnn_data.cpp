#include "detection/rcnn_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "coco/mask.h"
#include "data/image_transforms.h"
#include "data/random.h"
#include "util/error.h"

namespace trainbench::detection {
namespace {

constexpr uint64_t kRcnnShuffleStream = 1;
constexpr uint64_t kRcnnFlipStream = 2;

// The reference's _quantize(aspect_ratios, bins=[1]) with bisect_right: square images join the tall ones.
int aspect_group(const RcnnSample& sample) { return double(sample.height) / sample.width >= 1.0 ? 1 : 0; }

// False where the reference's training would raise on the annotation's polygons (rcnn_samples in rcnn_data.h):
// pycocotools' frPyObjects reads a first part of 4 numbers as boxes, which frBbox refuses in a list, and refuses
// a shorter one.
bool trainable_polygons(const coco::Annotation& annotation, size_t index, const std::string& file) {
  const auto& polygons = annotation.segmentation.polygons;
  for (size_t j = 0; j < polygons.size(); ++j)
    for (size_t k = 0; k < polygons[j].size(); ++k)
      if (!(std::fabs(polygons[j][k]) <= coco::kMaxPolygonCoordinate))
        fail(file + ": annotations[" + std::to_string(index) + "] (id " + std::to_string(annotation.id) +
                 ").segmentation[" + std::to_string(j) + "][" + std::to_string(k) + "]",
             "coordinate " + std::to_string(polygons[j][k]) + " is not a pixel position within +-1e6");
  return polygons.empty() || polygons[0].size() > 4;
}

// The reference's BoxList(xywh).convert("xyxy").clip_to_image(remove_empty=True) for one box, in float32
// as its tensors are; false when the clipped box is empty.
bool inclusive_clipped_box(const coco::Box& xywh, int width, int height, std::array<float, 4>& box) {
  const float x1 = static_cast<float>(xywh.x), y1 = static_cast<float>(xywh.y);
  const float x2 = x1 + std::max(static_cast<float>(xywh.width) - 1.0f, 0.0f);
  const float y2 = y1 + std::max(static_cast<float>(xywh.height) - 1.0f, 0.0f);
  const float max_x = static_cast<float>(width - 1), max_y = static_cast<float>(height - 1);
  box = {std::clamp(x1, 0.0f, max_x), std::clamp(y1, 0.0f, max_y), std::clamp(x2, 0.0f, max_x),
         std::clamp(y2, 0.0f, max_y)};
  return box[2] > box[0] && box[3] > box[1];
}

const RcnnLoaderOptions& checked(const RcnnLoaderOptions& options) {
  data::require_positive(options.min_size, "min_size");
  data::require_positive(options.max_size, "max_size");
  if (options.size_divisibility < 0)
    fail("size_divisibility", "expected 0 (no rounding) or a positive number, got " +
                                  std::to_string(options.size_divisibility));
  data::require_positive(options.batch_size, "batch_size");
  data::require_positive(options.workers, "workers");
  data::require_positive(options.prefetch_batches, "prefetch_batches");
  if (options.shard_whole_batches && options.mode != data::LoaderMode::Eval)
    fail("shard_whole_batches", "deals batches out unevenly over the ranks, which only evaluation (mode Eval) can take");
  data::require_positive(options.world, "world");
  if (options.rank < 0 || options.rank >= options.world)
    fail("rank", "expected 0.." + std::to_string(options.world - 1) + ", got " + std::to_string(options.rank));
  if (!(options.flip_probability >= 0 && options.flip_probability <= 1))
    fail("flip_probability", "expected a probability in [0, 1], got " + std::to_string(options.flip_probability));
  return options;
}

int64_t round_up(int64_t value, int multiple) { return multiple > 0 ? (value + multiple - 1) / multiple * multiple : value; }

}  // namespace

RcnnSamples rcnn_samples(const CocoDetectionSet& set, bool training) {
  const coco::GroundTruth& truth = set.ground_truth;
  RcnnSamples result;
  size_t next_annotated = 0;  // set.samples are the annotated images, in the same file order
  for (const coco::Image& image : truth.images) {
    RcnnSample sample;
    sample.path = (std::filesystem::path(set.image_dir) / image.file_name).string();
    sample.image_id = image.id;
    sample.width = static_cast<int>(image.width);
    sample.height = static_cast<int>(image.height);
    if (next_annotated < set.samples.size() && set.samples[next_annotated].image_id == image.id) {
      const DetectionSample& annotated = set.samples[next_annotated++];
      for (size_t k = 0; k < annotated.annotations.size(); ++k) {
        const coco::Annotation& annotation = truth.annotations[annotated.annotations[k]];
        if (annotation.iscrowd) continue;
        if (!trainable_polygons(annotation, annotated.annotations[k], set.annotation_file)) {
          ++result.dropped_polygons;
          continue;
        }
        if (training && annotation.segmentation.polygons.empty()) continue;
        RcnnObject object;
        if (!inclusive_clipped_box(annotation.bbox, sample.width, sample.height, object.box)) continue;
        object.label = annotated.labels[k];
        object.polygons = annotation.segmentation.polygons;
        sample.objects.push_back(std::move(object));
      }
    }
    if (training && sample.objects.empty()) continue;
    result.samples.push_back(std::move(sample));
  }
  return result;
}

std::array<int, 2> rcnn_resized_size(int width, int height, int min_size, int max_size) {
  int size = min_size;
  const double min_original = std::min(width, height), max_original = std::max(width, height);
  if (max_original / min_original * size > max_size)
    size = static_cast<int>(std::nearbyint(max_size * min_original / max_original));  // half to even, as round()
  if ((width <= height && width == size) || (height <= width && height == size)) return {width, height};
  if (width < height) return {size, static_cast<int>(double(int64_t(size) * height) / width)};
  return {static_cast<int>(double(int64_t(size) * width) / height), size};
}

RcnnLoader::RcnnLoader(std::vector<RcnnSample> samples, const RcnnLoaderOptions& options)
    : samples_(std::move(samples)), options_(checked(options)), pipeline_(options.workers, options.prefetch_batches) {
  if (samples_.empty()) fail("RcnnLoader", "no samples to load");
  std::array<int64_t, 2> group_sizes{0, 0};
  for (const RcnnSample& sample : samples_) {
    if (sample.width <= 0 || sample.height <= 0)
      fail(sample.path, "needs a positive width and height from the annotation file");
    groups_.push_back(options_.group_by_aspect_ratio ? aspect_group(sample) : 0);
    ++group_sizes[groups_.back()];
  }
  if (options_.shard_whole_batches) {
    // Eval's order is the file order every epoch, so the batches this rank gets are known now.
    const auto batches = rank_batches(data::EpochSharding::order(samples_.size(), false, options_.seed, 0, kRcnnShuffleStream));
    batches_per_epoch_ = static_cast<int64_t>(batches.size());
    for (const auto& batch : batches) samples_per_epoch_ += static_cast<int64_t>(batch.size());
    return;
  }
  // Per group: full global batches, then (without drop_last) this rank's share of the partial one.
  const int64_t global = options_.world * options_.batch_size;
  for (int64_t count : group_sizes) {
    const int64_t full = count / global, rest = count % global;
    batches_per_epoch_ += full;
    samples_per_epoch_ += full * options_.batch_size;
    if (!options_.drop_last && rest > options_.rank) {
      ++batches_per_epoch_;
      samples_per_epoch_ += (rest - options_.rank + options_.world - 1) / options_.world;
    }
  }
  if (options_.drop_last && batches_per_epoch_ == 0)
    fail("batch_size", std::to_string(samples_.size()) + " samples over " + std::to_string(options_.world) +
                           " rank(s) do not fill one batch of " + std::to_string(options_.batch_size) +
                           (options_.group_by_aspect_ratio ? " per aspect-ratio group" : "") + " with drop_last");
}

RcnnLoader::~RcnnLoader() { pipeline_.stop(); }

int64_t RcnnLoader::batches_per_epoch() const { return batches_per_epoch_; }
int64_t RcnnLoader::samples_per_epoch() const { return samples_per_epoch_; }

void RcnnLoader::start_epoch(int64_t epoch) {
  pipeline_.stop();  // the workers read order_ and batches_
  epoch_ = epoch;
  order_ = data::EpochSharding::order(samples_.size(), options_.mode == data::LoaderMode::Train, options_.seed,
                                      epoch, kRcnnShuffleStream);
  batches_ = rank_batches(order_);
  pipeline_.start(static_cast<int64_t>(batches_.size()),
                  [this](int64_t index, const std::atomic<bool>& stopping) { return build_batch(index, stopping); });
}

std::vector<std::vector<int64_t>> RcnnLoader::rank_batches(const std::vector<int64_t>& order) const {
  // Global batches of world x batch_size positions (one rank's batch_size when whole batches are dealt out),
  // each from one group, in the order the epoch yields them.
  const size_t global = size_t(options_.shard_whole_batches ? 1 : options_.world) * options_.batch_size;
  std::vector<std::vector<int64_t>> global_batches, filling(2);
  for (int64_t position = 0; position < int64_t(order.size()); ++position) {
    std::vector<int64_t>& batch = filling[groups_[order[position]]];
    batch.push_back(position);
    if (batch.size() == global) global_batches.push_back(std::exchange(batch, {}));
  }
  if (!options_.drop_last)
    for (auto& batch : filling)
      if (!batch.empty()) global_batches.push_back(std::move(batch));
  std::stable_sort(global_batches.begin(), global_batches.end(),
                   [](const auto& a, const auto& b) { return a.front() < b.front(); });
  std::vector<std::vector<int64_t>> batches;
  for (size_t index = 0; index < global_batches.size(); ++index) {
    if (options_.shard_whole_batches) {
      if (index % size_t(options_.world) == size_t(options_.rank)) batches.push_back(std::move(global_batches[index]));
      continue;
    }
    std::vector<int64_t> share;
    for (size_t j = options_.rank; j < global_batches[index].size(); j += options_.world) share.push_back(global_batches[index][j]);
    if (!share.empty()) batches.push_back(std::move(share));
  }
  return batches;
}

std::optional<RcnnBatch> RcnnLoader::next() {
  if (epoch_ < 0) fail("RcnnLoader", "next() called before start_epoch()");
  return pipeline_.next();
}

RcnnBatch RcnnLoader::build_batch(int64_t batch_index, const std::atomic<bool>& stopping) const {
  const std::vector<int64_t>& positions = batches_[batch_index];
  RcnnBatch batch;
  std::vector<std::array<int, 2>> sizes;
  for (int64_t position : positions) {
    const RcnnSample& sample = samples_[order_[position]];
    sizes.push_back(rcnn_resized_size(sample.width, sample.height, options_.min_size, options_.max_size));
    batch.padded_width = std::max<int64_t>(batch.padded_width, sizes.back()[0]);
    batch.padded_height = std::max<int64_t>(batch.padded_height, sizes.back()[1]);
  }
  batch.padded_width = round_up(batch.padded_width, options_.size_divisibility);
  batch.padded_height = round_up(batch.padded_height, options_.size_divisibility);
  const size_t padded_plane = size_t(batch.padded_height) * batch.padded_width;
  batch.images.assign(positions.size() * 3 * padded_plane, 0.0f);
  batch.object_offsets.push_back(0);

  // resize_normalize writes RGB planes: for BGR the mean is given in RGB order and the planes are swapped. Its
  // default Normalization is ImageNet's mean and std in 0..255 units, which is torchvision's on RGB 0..1.
  const bool bgr = options_.pixels == RcnnPixels::kBgr255MinusMean;
  const data::Normalization normalization =
      bgr ? data::Normalization{{kRcnnPixelMeanBgr[2], kRcnnPixelMeanBgr[1], kRcnnPixelMeanBgr[0]}, {1, 1, 1}}
          : data::Normalization{};
  thread_local std::vector<float> resized;
  for (size_t i = 0; i < positions.size() && !stopping; ++i) {
    const int64_t position = positions[i];
    const RcnnSample& sample = samples_[order_[position]];
    const auto [width, height] = sizes[i];
    const data::Image image = decode_sample_image(sample.path, sample.width, sample.height);
    bool flip = false;
    if (options_.mode == data::LoaderMode::Train) {
      data::Rng rng(data::mix_seed(options_.seed, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(position),
                                   kRcnnFlipStream));
      flip = rng.uniform() < options_.flip_probability;
    }
    resized.resize(size_t(3) * width * height);
    data::resize_normalize(image, width, height, flip, normalization, resized.data());
    for (int c = 0; c < 3; ++c) {
      const float* source = resized.data() + size_t(bgr ? 2 - c : c) * width * height;
      float* target = batch.images.data() + (i * 3 + c) * padded_plane;
      for (int y = 0; y < height; ++y)
        std::memcpy(target + size_t(y) * batch.padded_width, source + size_t(y) * width, sizeof(float) * width);
    }

    // BoxList.resize / Polygons.resize multiply coordinates by float32 ratios; FLIP_LEFT_RIGHT mirrors them
    // with TO_REMOVE = 1 in the resized image.
    const float ratio_x = static_cast<float>(double(width) / sample.width);
    const float ratio_y = static_cast<float>(double(height) / sample.height);
    const float flipped_width = static_cast<float>(width);
    for (const RcnnObject& object : sample.objects) {
      float box[4] = {object.box[0] * ratio_x, object.box[1] * ratio_y, object.box[2] * ratio_x,
                      object.box[3] * ratio_y};
      if (flip) {
        const float x1 = box[0];
        box[0] = flipped_width - box[2] - 1.0f;
        box[2] = flipped_width - x1 - 1.0f;
      }
      batch.boxes.insert(batch.boxes.end(), box, box + 4);
      batch.labels.push_back(object.label);
      std::vector<std::vector<double>> polygons = object.polygons;
      for (auto& polygon : polygons)
        for (size_t k = 0; k + 1 < polygon.size(); k += 2) {
          const float x = static_cast<float>(polygon[k]) * ratio_x;
          polygon[k] = flip ? flipped_width - x - 1.0f : x;
          polygon[k + 1] = static_cast<float>(polygon[k + 1]) * ratio_y;
        }
      batch.polygons.push_back(std::move(polygons));
    }
    batch.object_offsets.push_back(static_cast<int64_t>(batch.labels.size()));
    batch.widths.push_back(width);
    batch.heights.push_back(height);
    batch.original_widths.push_back(sample.width);
    batch.original_heights.push_back(sample.height);
    batch.image_ids.push_back(sample.image_id);
    ++batch.size;
  }
  batch.images.resize(size_t(batch.size) * 3 * padded_plane);
  return batch;
}

}  // namespace trainbench::detection
