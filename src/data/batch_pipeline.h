#pragma once
// The worker pool behind the threaded loaders (image_loader.h, detection/detection_loader.h, speech/loader.h): worker threads
// each build whole batches with the loader's builder, at most `prefetch_batches` ahead of the consumer, and
// next() hands them out strictly in index order. Which thread built a batch never matters: builders derive
// everything random from the batch index, so output is reproducible with any number of workers.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/random.h"
#include "util/error.h"

namespace trainbench::data {

// A loader option that must be positive; an Error naming `field` otherwise.
inline void require_positive(int64_t value, const char* field) {
  if (value <= 0) fail(field, "expected a positive number, got " + std::to_string(value));
}

// How the loaders share an epoch among ranks and cut it into batches. Every rank sees a disjoint, strided
// share of the epoch's order (positions rank, rank + world, ...). With drop_last all ranks get the same
// number of full batches; without it ranks may differ by one sample and the last batch may be partial.
struct EpochSharding {
  EpochSharding(int64_t total, int64_t batch_size, int rank_, int world_, bool drop_last)
      : rank(rank_), world(world_) {
    if (total == 0) fail("loader", "no samples to load");
    require_positive(batch_size, "batch_size");
    require_positive(world, "world");
    if (rank < 0 || rank >= world)
      fail("rank", "expected 0.." + std::to_string(world - 1) + ", got " + std::to_string(rank));
    if (drop_last) {
      batches_per_epoch = total / (world * batch_size);
      samples_per_epoch = batches_per_epoch * batch_size;
      if (batches_per_epoch == 0)
        fail("batch_size", std::to_string(total) + " samples over " + std::to_string(world) +
                               " rank(s) do not fill one batch of " + std::to_string(batch_size) + " with drop_last");
    } else {
      samples_per_epoch = rank < total ? (total - rank + world - 1) / world : 0;
      batches_per_epoch = (samples_per_epoch + batch_size - 1) / batch_size;
    }
  }

  // The epoch's order of all ranks' sample indices: a permutation drawn from (seed, epoch, stream) when
  // shuffling, file order otherwise.
  static std::vector<int64_t> order(size_t total, bool shuffle, uint64_t seed, int64_t epoch, uint64_t stream) {
    std::vector<int64_t> indices(total);
    std::iota(indices.begin(), indices.end(), int64_t{0});
    if (shuffle) {
      Rng rng(mix_seed(seed, static_cast<uint64_t>(epoch), 0, stream));
      for (size_t i = indices.size() - 1; i > 0; --i) std::swap(indices[i], indices[rng.below(i + 1)]);
    }
    return indices;
  }

  // Where this rank's shard_position-th sample sits in the epoch's order (shared by all ranks, so it can
  // seed that sample's augmentation).
  int64_t position(int64_t shard_position) const { return rank + shard_position * world; }

  int rank;
  int world;
  int64_t samples_per_epoch = 0;
  int64_t batches_per_epoch = 0;
};

template <typename Batch>
class BatchPipeline {
 public:
  // Builds batch `index`; should return early (with a partial batch) once `stopping` is set.
  using Builder = std::function<Batch(int64_t index, const std::atomic<bool>& stopping)>;

  BatchPipeline(int workers, int prefetch_batches) : workers_count_(workers), depth_(prefetch_batches) {}
  ~BatchPipeline() { stop(); }
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  // Stops and joins the workers, also in the middle of a pass; batches not yet taken are dropped.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    room_available_.notify_all();
    for (auto& worker : workers_) worker.join();
    workers_.clear();
  }

  // Abandons the current pass and starts building batches 0 .. batch_count-1 with `build`.
  void start(int64_t batch_count, Builder build) {
    stop();
    build_ = std::move(build);
    batch_count_ = batch_count;
    next_to_build_ = 0;
    next_to_return_ = 0;
    slots_.assign(depth_, Slot{});
    stopping_ = false;
    for (int i = 0; i < workers_count_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  // The next batch of the pass, or nullopt after the last one. Rethrows, on this thread, what the builder
  // threw for that batch; the batch is then lost and the following call continues with the one after it.
  std::optional<Batch> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (next_to_return_ >= batch_count_) return std::nullopt;
    Slot& slot = slots_[next_to_return_ % depth_];
    batch_ready_.wait(lock, [&] { return slot.ready; });
    Slot taken = std::move(slot);
    slot = Slot{};
    ++next_to_return_;
    lock.unlock();
    room_available_.notify_all();
    if (taken.error) std::rethrow_exception(taken.error);
    return std::move(taken.batch);
  }

 private:
  struct Slot {
    bool ready = false;
    Batch batch;
    std::exception_ptr error;
  };

  void worker_loop() {
    while (true) {
      int64_t index = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        room_available_.wait(lock, [&] {
          return stopping_ || next_to_build_ >= batch_count_ || next_to_build_ < next_to_return_ + depth_;
        });
        if (stopping_ || next_to_build_ >= batch_count_) return;
        index = next_to_build_++;
      }
      Slot result;
      try {
        result.batch = build_(index, stopping_);
      } catch (...) {
        result.error = std::current_exception();
      }
      result.ready = true;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        slots_[index % depth_] = std::move(result);
      }
      batch_ready_.notify_all();
    }
  }

  const int workers_count_;
  const int64_t depth_;
  Builder build_;
  int64_t batch_count_ = 0;
  std::mutex mutex_;
  std::condition_variable room_available_;  // workers wait for a free slot
  std::condition_variable batch_ready_;     // next() waits for its batch
  std::atomic<bool> stopping_{false};       // also polled by builders between samples so shutdown is quick
  int64_t next_to_build_ = 0;
  int64_t next_to_return_ = 0;
  std::vector<Slot> slots_;  // batch b lives in slots_[b % depth_]
  std::vector<std::thread> workers_;
};

}  // namespace trainbench::data
