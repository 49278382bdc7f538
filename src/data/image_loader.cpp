#include "data/image_loader.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "data/image_decode.h"
#include "data/random.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

// Distinct streams derived from the same (seed, epoch).
constexpr uint64_t kShuffleStream = 1;
constexpr uint64_t kAugmentationStream = 2;

void validate(const ImageLoaderOptions& options) {
  require_positive(options.crop_size, "crop_size");
  require_positive(options.workers, "workers");
  require_positive(options.prefetch_batches, "prefetch_batches");
  if (options.mode == LoaderMode::Eval && options.resize_size < options.crop_size)
    fail("resize_size", "expected at least crop_size (" + std::to_string(options.crop_size) + "), got " +
                            std::to_string(options.resize_size));
}

}  // namespace

ImageLoader::ImageLoader(std::vector<ImageSample> samples, const ImageLoaderOptions& options)
    : samples_(std::move(samples)),
      options_((validate(options), options)),
      sharding_(static_cast<int64_t>(samples_.size()), options.batch_size, options.rank, options.world, options.drop_last),
      pipeline_(options.workers, options.prefetch_batches) {}

ImageLoader::~ImageLoader() { pipeline_.stop(); }

void ImageLoader::start_epoch(int64_t epoch) {
  const int64_t batches = sharding_.batches_per_epoch;
  // In training the stream runs on into the next epoch: when the last one was read to its end, this epoch's
  // first batches were built while the last ones trained, and it starts without waiting. An evaluation pass
  // ends its stream (nothing is known to follow it), so no batch is decoded for nothing.
  const bool streams_on = options_.mode == LoaderMode::Train;
  const bool stream_is_at_epoch = streaming_from_ >= 0 && (epoch_ - streaming_from_) * batches + returned_in_epoch_ ==
                                                              (epoch - streaming_from_) * batches;
  epoch_ = epoch;
  returned_in_epoch_ = 0;
  if (batches == 0) return;  // this rank's share is empty: next() has nothing to hand out
  if (streams_on && stream_is_at_epoch) return;
  pipeline_.stop();
  streaming_from_ = epoch;
  {
    const std::lock_guard<std::mutex> lock(orders_mutex_);
    orders_.clear();
  }
  const int64_t stream_batches = streams_on ? std::numeric_limits<int64_t>::max() : sharding_.batches_per_epoch;
  pipeline_.start(stream_batches, [this](int64_t index, const std::atomic<bool>& stopping) {
    return build_batch(streaming_from_ + index / sharding_.batches_per_epoch, index % sharding_.batches_per_epoch, stopping);
  });
}

std::shared_ptr<const std::vector<int64_t>> ImageLoader::order(int64_t epoch) const {
  const std::lock_guard<std::mutex> lock(orders_mutex_);
  auto& cached = orders_[epoch];
  if (!cached)
    cached = std::make_shared<const std::vector<int64_t>>(
        sharding_.order(samples_.size(), options_.mode == LoaderMode::Train, options_.seed, epoch, kShuffleStream));
  while (orders_.size() > 2 && orders_.begin()->first < epoch) orders_.erase(orders_.begin());  // workers run one epoch ahead at most
  return cached;
}

ImageBatch ImageLoader::build_batch(int64_t epoch, int64_t batch_index, const std::atomic<bool>& stopping) const {
  const std::shared_ptr<const std::vector<int64_t>> epoch_order = order(epoch);
  const int64_t begin = batch_index * options_.batch_size;
  const int64_t end = std::min(begin + options_.batch_size, sharding_.samples_per_epoch);
  const size_t floats_per_image = size_t(3) * options_.crop_size * options_.crop_size;
  ImageBatch batch;
  batch.images.resize(size_t(end - begin) * floats_per_image);
  batch.labels.reserve(end - begin);
  for (int64_t shard_position = begin; shard_position < end && !stopping; ++shard_position) {
    // Position in the epoch's order shared by all ranks; it alone seeds this sample's augmentation.
    const int64_t position = sharding_.position(shard_position);
    const ImageSample& sample = samples_[(*epoch_order)[static_cast<size_t>(position)]];
    float* out = batch.images.data() + size_t(batch.size) * floats_per_image;
    try {
      const Image image = decode_image_file(sample.path);
      if (options_.mode == LoaderMode::Train) {
        Rng rng(mix_seed(options_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(position),
                         kAugmentationStream));
        random_resized_crop_flip(image, options_.crop_size, rng, options_.normalization, out, options_.crop);
      } else {
        resize_center_crop(image, options_.resize_size, options_.crop_size, options_.normalization, out);
      }
    } catch (const Error&) {
      if (!options_.skip_corrupt) throw;
      ++batch.skipped;
      continue;
    }
    batch.labels.push_back(sample.label);
    ++batch.size;
  }
  batch.images.resize(size_t(batch.size) * floats_per_image);
  return batch;
}

std::optional<ImageBatch> ImageLoader::next() {
  if (epoch_ < 0) fail("ImageLoader", "next() called before start_epoch()");
  if (returned_in_epoch_ >= sharding_.batches_per_epoch) return std::nullopt;
  ++returned_in_epoch_;  // counted before next(), which may rethrow a worker's error for this batch
  return pipeline_.next();
}

}  // namespace trainbench::data
