#pragma once
// The RNN-T input pipeline: the reference's bucketing sampler and a loader whose worker threads read the
// audio and compute the features (speech/features.h) of whole batches, handed out strictly in order.
// Randomness derives from (seed, epoch, batch, position), never from thread timing, so a run is reproducible
// with any number of workers.
#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "data/batch_pipeline.h"
#include "speech/features.h"
#include "speech/librispeech.h"

namespace trainbench::speech {

// The reference's BucketingSampler for one epoch: utterances sorted by duration and split into num_buckets
// equal parts, each shuffled; random utterances dropped so the epoch is a whole number of global batches; the
// global batches shuffled. Returns the global batches of utterance indices.
std::vector<std::vector<int64_t>> bucketing_batches(const std::vector<double>& durations, int num_buckets,
                                                    int64_t global_batch, uint64_t seed, int64_t epoch);

// Rank `rank`'s contiguous share [rank * B / world, (rank + 1) * B / world) of every batch.
std::vector<std::vector<int64_t>> rank_share(const std::vector<std::vector<int64_t>>& batches, int rank, int world);

// Consecutive batches of batch_size over [begin, end) in order (the last may be partial): evaluation. An Error
// naming eval_batch_size when batch_size is below 1.
std::vector<std::vector<int64_t>> sequential_batches(int64_t begin, int64_t end, int64_t batch_size);

struct SpeechBatch {
  int64_t size = 0;
  int64_t max_frames = 0, feature_dims = 0, max_tokens = 0;
  std::vector<float> features;             // size x max_frames x feature_dims, zero padded
  std::vector<int64_t> frame_counts;       // size
  std::vector<int64_t> tokens;             // size x max_tokens, zero padded
  std::vector<int64_t> token_counts;       // size
  std::vector<int64_t> utterances;         // the utterance indices, in batch order
};

struct SpeechLoaderOptions {
  bool train = false;  // speed perturbation and SpecAugment
  int workers = 1;
  int prefetch_batches = 4;
  uint64_t seed = 1;
};

class SpeechLoader {
 public:
  // tokens[i] are utterance i's transcript tokens.
  SpeechLoader(std::vector<Utterance> utterances, std::vector<std::vector<int>> tokens, const FeatureOptions& features,
               const SpeechLoaderOptions& options);

  // Abandons the current pass and starts building `batches` (utterance indices) for `epoch`.
  void start(std::vector<std::vector<int64_t>> batches, int64_t epoch);
  // The next batch, or nullopt after the last; rethrows a worker's Error (e.g. an unreadable file).
  std::optional<SpeechBatch> next();

  const std::vector<Utterance>& utterances() const { return utterances_; }
  const FeaturePipeline& pipeline() const { return pipeline_; }
  // One batch built on the calling thread (for bench and tests).
  SpeechBatch build(const std::vector<int64_t>& batch, int64_t epoch, int64_t batch_index) const;

 private:
  // As build(), returning early (a partial batch) once `stopping` is set.
  SpeechBatch build(const std::vector<int64_t>& batch, int64_t epoch, int64_t batch_index,
                    const std::atomic<bool>& stopping) const;

  const std::vector<Utterance> utterances_;
  const std::vector<std::vector<int>> tokens_;
  const FeaturePipeline pipeline_;
  const SpeechLoaderOptions options_;
  std::vector<std::vector<int64_t>> batches_;
  data::BatchPipeline<SpeechBatch> workers_;
};

}  // namespace trainbench::speech
