#pragma once
// Multi-threaded, prefetching batch loader for image classification. Worker threads each build whole
// batches (read, decode, transform into the batch's float buffer); next() hands them out strictly in
// order. Everything random is derived from (seed, epoch, position in the epoch's order), never from
// which thread ran first, so a run is reproducible bit for bit with any number of workers.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

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

  // Abandons any unfinished epoch and starts producing batches for `epoch`. The shuffle depends only on
  // (seed, epoch). Every rank sees a disjoint, strided share of that order: positions rank, rank + world,
  // ... With drop_last all ranks get the same number of full batches; without it ranks may differ by
  // one sample and the last batch may be partial.
  void start_epoch(int64_t epoch);

  // The next batch of the current epoch, or nullopt after the last one. Rethrows, on this thread, the
  // Error a worker hit (e.g. a corrupt file without skip_corrupt); that batch is then lost and the
  // following call continues with the batch after it.
  std::optional<ImageBatch> next();

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t samples_per_epoch() const { return samples_per_epoch_; }  // for this rank, before skipping

 private:
  struct Slot {
    bool ready = false;
    ImageBatch batch;
    std::exception_ptr error;
  };

  void stop_workers();
  void worker_loop();
  ImageBatch build_batch(int64_t batch_index) const;

  const std::vector<ImageSample> samples_;
  const ImageLoaderOptions options_;
  int64_t samples_per_epoch_ = 0;
  int64_t batches_per_epoch_ = 0;

  // Fixed while the workers of an epoch run.
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;  // the epoch's permutation of sample indices (all ranks)

  std::mutex mutex_;
  std::condition_variable room_available_;  // workers wait for a free slot
  std::condition_variable batch_ready_;     // next() waits for its batch
  std::atomic<bool> stopping_{false};  // also polled between samples so shutdown is quick
  int64_t next_to_build_ = 0;
  int64_t next_to_return_ = 0;
  std::vector<Slot> slots_;  // batch b lives in slots_[b % prefetch_batches]
  std::vector<std::thread> workers_;
};

}  // namespace trainbench::data
