#pragma once
// Multi-threaded, prefetching batch loader for image classification. Worker threads each build whole
// batches (read, decode, transform into the batch's float buffer); next() hands them out strictly in
// order. Everything random is derived from (seed, epoch, position in the epoch's order), never from
// which thread ran first, so a run is reproducible bit for bit with any number of workers.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "data/batch_pipeline.h"
#include "data/image_folder.h"
#include "data/image_transforms.h"

namespace trainbench::data {

enum class LoaderMode {
  Train,  // shuffled each epoch; random resized crop + horizontal flip at crop_size
  Eval,   // fixed order; resize shorter side to resize_size, centre crop crop_size
};

struct ImageLoaderOptions {
  LoaderMode mode = LoaderMode::Train;
  int crop_size = 224;
  int resize_size = 256;  // Eval only
  int64_t batch_size = 256;
  // Leave out a final partial batch (and, with several ranks, equalise them). Eval wants false, so that
  // every validation image counts.
  bool drop_last = true;
  int workers = 2;
  int prefetch_batches = 4;  // batches being built or waiting for next(); keep it >= workers
  uint64_t seed = 1;
  int rank = 0;   // this process's shard ...
  int world = 1;  // ... of this many
  bool skip_corrupt = false;  // leave undecodable files out of their batch instead of throwing
  Normalization normalization;
  RandomResizedCropOptions crop;  // Train only
};

struct ImageBatch {
  std::vector<float> images;    // size * 3 * crop_size * crop_size floats, NCHW
  std::vector<int64_t> labels;  // size entries
  int64_t size = 0;             // images in this batch (fewer than batch_size, even 0, when skipping)
  int64_t skipped = 0;          // corrupt files left out of this batch (skip_corrupt only)
};

class ImageLoader {
 public:
  ImageLoader(std::vector<ImageSample> samples, const ImageLoaderOptions& options);
  ~ImageLoader();  // stops and joins the workers, also in the middle of an epoch
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  // Starts handing out the batches of `epoch`. In training the workers run on from one epoch into the next,
  // so when the last epoch was read to its end and `epoch` follows it, its first batches are already built;
  // otherwise (and always in evaluation) the unfinished stream is abandoned and a new one starts at `epoch`.
  // The shuffle depends only on (seed, epoch). Every rank sees a disjoint, strided share of that order:
  // positions rank, rank + world, ... With drop_last all ranks get the same number of full batches; without
  // it ranks may differ by one sample and the last batch may be partial.
  void start_epoch(int64_t epoch);

  // The next batch of the current epoch, or nullopt after the last one. Rethrows, on this thread, the
  // Error a worker hit (e.g. a corrupt file without skip_corrupt); that batch is then lost and the
  // following call continues with the batch after it.
  std::optional<ImageBatch> next();

  int64_t batches_per_epoch() const { return sharding_.batches_per_epoch; }
  int64_t samples_per_epoch() const { return sharding_.samples_per_epoch; }  // for this rank, before skipping

 private:
  ImageBatch build_batch(int64_t epoch, int64_t batch_index, const std::atomic<bool>& stopping) const;
  // The epoch's permutation of sample indices (all ranks), drawn once and kept while workers may need it.
  std::shared_ptr<const std::vector<int64_t>> order(int64_t epoch) const;

  const std::vector<ImageSample> samples_;
  const ImageLoaderOptions options_;
  const EpochSharding sharding_;

  int64_t epoch_ = -1;              // the epoch next() hands out
  int64_t returned_in_epoch_ = 0;   // its batches handed out so far
  int64_t streaming_from_ = -1;     // the epoch the workers' stream started at (fixed while they run)
  mutable std::mutex orders_mutex_;
  mutable std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> orders_;
  BatchPipeline<ImageBatch> pipeline_;  // last: its workers stop before the members they read go
};

}  // namespace trainbench::data
