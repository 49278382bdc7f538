#include "detection/detection_loader.h"

#include <algorithm>
#include <utility>

#include "data/random.h"
#include "util/error.h"

namespace trainbench::detection {
namespace {

constexpr uint64_t kShuffleStream = 1;
constexpr uint64_t kAugmentationStream = 2;

const DetectionLoaderOptions& checked(const DetectionLoaderOptions& options) {
  data::require_positive(options.image_size, "image_size");
  data::require_positive(options.workers, "workers");
  data::require_positive(options.prefetch_batches, "prefetch_batches");
  data::require_positive(options.crop_attempts, "crop_attempts");
  return options;
}

}  // namespace

DetectionLoader::DetectionLoader(std::vector<DetectionSample> samples, const DetectionLoaderOptions& options)
    : samples_(std::move(samples)),
      options_(checked(options)),
      sharding_(static_cast<int64_t>(samples_.size()), options.batch_size, options.rank, options.world, options.drop_last),
      pipeline_(options.workers, options.prefetch_batches) {}

DetectionLoader::~DetectionLoader() { pipeline_.stop(); }

void DetectionLoader::start_epoch(int64_t epoch) {
  pipeline_.stop();  // the workers read order_
  epoch_ = epoch;
  order_ = sharding_.order(samples_.size(), options_.mode == data::LoaderMode::Train, options_.seed, epoch, kShuffleStream);
  pipeline_.start(sharding_.batches_per_epoch,
                  [this](int64_t index, const std::atomic<bool>& stopping) { return build_batch(index, stopping); });
}

std::optional<DetectionBatch> DetectionLoader::next() {
  if (epoch_ < 0) fail("DetectionLoader", "next() called before start_epoch()");
  return pipeline_.next();
}

DetectionBatch DetectionLoader::build_batch(int64_t batch_index, const std::atomic<bool>& stopping) const {
  const int64_t begin = batch_index * options_.batch_size;
  const int64_t end = std::min(begin + options_.batch_size, sharding_.samples_per_epoch);
  const int size = options_.image_size;
  const int64_t pixels = int64_t(size) * size;
  DetectionBatch batch;
  batch.images.resize(size_t(end - begin) * 3 * pixels);
  batch.object_offsets.push_back(0);
  for (int64_t shard_position = begin; shard_position < end && !stopping; ++shard_position) {
    const int64_t position = sharding_.position(shard_position);
    const DetectionSample& sample = samples_[order_[position]];
    const data::Image image = decode_sample_image(sample.path, sample.width, sample.height);
    float* out = batch.images.data() + size_t(batch.size) * 3 * pixels;
    Objects objects{sample.boxes, sample.labels};
    if (options_.mode == data::LoaderMode::Train) {
      data::Rng rng(data::mix_seed(options_.seed, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(position),
                                   kAugmentationStream));
      const data::CropBox crop = ssd_random_crop(objects, image.width, image.height, options_.crop_attempts, rng);
      const bool flip = rng.uniform() < 0.5;
      if (flip) flip_boxes(objects.boxes);
      data::crop_resize_normalize(image, crop, size, flip, data::Normalization{{0, 0, 0}, {1, 1, 1}}, out);
      color_jitter(out, pixels, options_.jitter, rng);
      normalize(out, pixels, options_.normalization);
    } else {
      data::crop_resize_normalize(image, {0, 0, image.width, image.height}, size, false, options_.normalization, out);
    }
    batch.boxes.insert(batch.boxes.end(), objects.boxes.begin(), objects.boxes.end());
    batch.labels.insert(batch.labels.end(), objects.labels.begin(), objects.labels.end());
    batch.object_offsets.push_back(static_cast<int64_t>(batch.labels.size()));
    batch.image_ids.push_back(sample.image_id);
    batch.widths.push_back(sample.width);
    batch.heights.push_back(sample.height);
    ++batch.size;
  }
  batch.images.resize(size_t(batch.size) * 3 * pixels);
  return batch;
}

}  // namespace trainbench::detection
