#pragma once
// Threaded, seeded batch loader for detection, built like data::ImageLoader (same worker pool, same sharding
// over ranks, all randomness from (seed, epoch, position)). Train: decode, SSD random crop, flip, resize to
// size x size, colour jitter, normalise (ssd_augment.h). Eval: decode, resize to size x size, normalise.
// Boxes come out relative to the transformed image, as the model's matching wants them.
#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "data/batch_pipeline.h"
#include "data/image_loader.h"
#include "detection/coco_detection.h"
#include "detection/ssd_augment.h"

namespace trainbench::detection {

struct DetectionLoaderOptions {
  data::LoaderMode mode = data::LoaderMode::Train;
  int image_size = 300;
  int64_t batch_size = 32;
  bool drop_last = true;  // eval wants false, so that every image counts
  int workers = 2;
  int prefetch_batches = 4;
  uint64_t seed = 1;
  int rank = 0;
  int world = 1;
  int crop_attempts = 1;  // the rules' max_samples
  ColorJitterOptions jitter;
  data::Normalization normalization;
};

struct DetectionBatch {
  std::vector<float> images;            // size * 3 * image_size * image_size floats, NCHW
  std::vector<float> boxes;             // every object of the batch, 4 floats (l, t, r, b) each
  std::vector<int64_t> labels;          // one per object, 1..C
  std::vector<int64_t> object_offsets;  // size + 1 entries: image i holds objects [offsets[i], offsets[i+1])
  std::vector<int64_t> image_ids;
  std::vector<int> widths, heights;     // each image's size in the annotation file
  int64_t size = 0;
};

class DetectionLoader {
 public:
  DetectionLoader(std::vector<DetectionSample> samples, const DetectionLoaderOptions& options);
  ~DetectionLoader();
  DetectionLoader(const DetectionLoader&) = delete;
  DetectionLoader& operator=(const DetectionLoader&) = delete;

  // Abandons any unfinished epoch and starts `epoch` (train: shuffled from (seed, epoch); eval: file order).
  void start_epoch(int64_t epoch);
  // The next batch, or nullopt after the last; rethrows a worker's Error (e.g. a corrupt image).
  std::optional<DetectionBatch> next();

  int64_t batches_per_epoch() const { return sharding_.batches_per_epoch; }
  int64_t samples_per_epoch() const { return sharding_.samples_per_epoch; }  // for this rank

 private:
  DetectionBatch build_batch(int64_t batch_index, const std::atomic<bool>& stopping) const;

  const std::vector<DetectionSample> samples_;
  const DetectionLoaderOptions options_;
  const data::EpochSharding sharding_;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;
  data::BatchPipeline<DetectionBatch> pipeline_;
};

}  // namespace trainbench::detection
