#include "data/image_loader.h"

#include <algorithm>
#include <numeric>
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

void validate(const ImageLoaderOptions& options, size_t sample_count) {
  auto positive = [](int64_t value, const char* field) {
    if (value <= 0) fail(field, "expected a positive number, got " + std::to_string(value));
  };
  if (sample_count == 0) fail("ImageLoader", "no samples to load");
  positive(options.crop_size, "crop_size");
  positive(options.batch_size, "batch_size");
  positive(options.workers, "workers");
  positive(options.prefetch_batches, "prefetch_batches");
  positive(options.world, "world");
  if (options.rank < 0 || options.rank >= options.world)
    fail("rank", "expected 0.." + std::to_string(options.world - 1) + ", got " + std::to_string(options.rank));
  if (options.mode == LoaderMode::Eval && options.resize_size < options.crop_size)
    fail("resize_size", "expected at least crop_size (" + std::to_string(options.crop_size) + "), got " +
                            std::to_string(options.resize_size));
}

}  // namespace

ImageLoader::ImageLoader(std::vector<ImageSample> samples, const ImageLoaderOptions& options)
    : samples_(std::move(samples)), options_(options) {
  validate(options_, samples_.size());
  const auto total = static_cast<int64_t>(samples_.size());
  const int64_t world = options_.world;
  const int64_t batch = options_.batch_size;
  if (options_.drop_last) {
    batches_per_epoch_ = total / (world * batch);
    samples_per_epoch_ = batches_per_epoch_ * batch;
    if (batches_per_epoch_ == 0)
      fail("batch_size", std::to_string(total) + " samples over " + std::to_string(world) +
                             " rank(s) do not fill one batch of " + std::to_string(batch) + " with drop_last");
  } else {
    samples_per_epoch_ = options_.rank < total ? (total - options_.rank + world - 1) / world : 0;
    batches_per_epoch_ = (samples_per_epoch_ + batch - 1) / batch;
  }
}

ImageLoader::~ImageLoader() { stop_workers(); }

void ImageLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  room_available_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

void ImageLoader::start_epoch(int64_t epoch) {
  stop_workers();
  epoch_ = epoch;
  order_.resize(samples_.size());
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (options_.mode == LoaderMode::Train) {
    Rng rng(mix_seed(options_.seed, static_cast<uint64_t>(epoch), 0, kShuffleStream));
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[rng.below(i + 1)]);
  }
  next_to_build_ = 0;
  next_to_return_ = 0;
  slots_.assign(options_.prefetch_batches, Slot{});
  stopping_ = false;
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

void ImageLoader::worker_loop() {
  const int64_t depth = options_.prefetch_batches;
  while (true) {
    int64_t batch_index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      room_available_.wait(lock, [&] {
        return stopping_ || next_to_build_ >= batches_per_epoch_ || next_to_build_ < next_to_return_ + depth;
      });
      if (stopping_ || next_to_build_ >= batches_per_epoch_) return;
      batch_index = next_to_build_++;
    }
    Slot result;
    try {
      result.batch = build_batch(batch_index);
    } catch (...) {
      result.error = std::current_exception();
    }
    result.ready = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_[batch_index % depth] = std::move(result);
    }
    batch_ready_.notify_all();
  }
}

ImageBatch ImageLoader::build_batch(int64_t batch_index) const {
  const int64_t begin = batch_index * options_.batch_size;
  const int64_t end = std::min(begin + options_.batch_size, samples_per_epoch_);
  const size_t floats_per_image = size_t(3) * options_.crop_size * options_.crop_size;
  ImageBatch batch;
  batch.images.resize(size_t(end - begin) * floats_per_image);
  batch.labels.reserve(end - begin);
  for (int64_t shard_position = begin; shard_position < end && !stopping_; ++shard_position) {
    // Position in the epoch's order shared by all ranks; it alone seeds this sample's augmentation.
    const int64_t position = options_.rank + shard_position * options_.world;
    const ImageSample& sample = samples_[order_[position]];
    float* out = batch.images.data() + size_t(batch.size) * floats_per_image;
    try {
      const Image image = decode_image_file(sample.path);
      if (options_.mode == LoaderMode::Train) {
        Rng rng(mix_seed(options_.seed, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(position),
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
  std::unique_lock<std::mutex> lock(mutex_);
  if (next_to_return_ >= batches_per_epoch_) return std::nullopt;
  Slot& slot = slots_[next_to_return_ % options_.prefetch_batches];
  batch_ready_.wait(lock, [&] { return slot.ready; });
  Slot taken = std::move(slot);
  slot = Slot{};
  ++next_to_return_;
  lock.unlock();
  room_available_.notify_all();
  if (taken.error) std::rethrow_exception(taken.error);
  return std::move(taken.batch);
}

}  // namespace trainbench::data
