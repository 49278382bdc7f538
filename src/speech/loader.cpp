#include "speech/loader.h"

#include <algorithm>
#include <numeric>

#include "data/random.h"
#include "speech/audio.h"
#include "util/error.h"

namespace trainbench::speech {

namespace {
constexpr uint64_t kSamplerStream = 0x52554e54;  // "RUNT": the sampler's stream, apart from the features'
}

std::vector<std::vector<int64_t>> bucketing_batches(const std::vector<double>& durations, int num_buckets,
                                                    int64_t global_batch, uint64_t seed, int64_t epoch) {
  if (num_buckets < 1) fail("num_buckets", "expected at least 1, got " + std::to_string(num_buckets));
  const auto n = static_cast<int64_t>(durations.size());
  if (global_batch < 1 || n < global_batch)
    fail("batch_size", std::to_string(n) + " training utterances do not fill one global batch of " + std::to_string(global_batch));
  data::Rng rng(data::mix_seed(seed, static_cast<uint64_t>(epoch), 0, kSamplerStream));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return durations[a] < durations[b]; });
  // np.array_split: the first n % buckets buckets hold one more.
  int64_t begin = 0;
  for (int b = 0; b < num_buckets; ++b) {
    const int64_t size = n / num_buckets + (b < n % num_buckets ? 1 : 0);
    for (int64_t i = size - 1; i > 0; --i) std::swap(order[begin + i], order[begin + static_cast<int64_t>(rng.below(i + 1))]);
    begin += size;
  }
  // Drop n mod global_batch utterances chosen at random.
  const int64_t to_drop = n % global_batch;
  std::vector<int64_t> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  for (int64_t i = 0; i < to_drop; ++i) std::swap(positions[i], positions[i + static_cast<int64_t>(rng.below(n - i))]);
  std::vector<bool> dropped(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < to_drop; ++i) dropped[positions[i]] = true;
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < n; ++i)
    if (!dropped[i]) kept.push_back(order[i]);
  std::vector<std::vector<int64_t>> batches;
  for (size_t i = 0; i < kept.size(); i += static_cast<size_t>(global_batch))
    batches.emplace_back(kept.begin() + static_cast<std::ptrdiff_t>(i), kept.begin() + static_cast<std::ptrdiff_t>(i + global_batch));
  for (size_t i = batches.size() - 1; i > 0; --i) std::swap(batches[i], batches[rng.below(i + 1)]);
  return batches;
}

std::vector<std::vector<int64_t>> rank_share(const std::vector<std::vector<int64_t>>& batches, int rank, int world) {
  std::vector<std::vector<int64_t>> shares;
  for (const auto& batch : batches) {
    const auto size = static_cast<int64_t>(batch.size());
    shares.emplace_back(batch.begin() + rank * size / world, batch.begin() + (rank + 1) * size / world);
  }
  return shares;
}

std::vector<std::vector<int64_t>> sequential_batches(int64_t begin, int64_t end, int64_t batch_size) {
  if (batch_size < 1) fail("eval_batch_size", "expected at least 1, got " + std::to_string(batch_size));
  std::vector<std::vector<int64_t>> batches;
  for (int64_t first = begin; first < end; first += batch_size) {
    batches.emplace_back();
    for (int64_t i = first; i < std::min(end, first + batch_size); ++i) batches.back().push_back(i);
  }
  return batches;
}

SpeechLoader::SpeechLoader(std::vector<Utterance> utterances, std::vector<std::vector<int>> tokens,
                           const FeatureOptions& features, const SpeechLoaderOptions& options)
    : utterances_(std::move(utterances)),
      tokens_(std::move(tokens)),
      pipeline_(features),
      options_(options),
      workers_(options.workers, options.prefetch_batches) {
  if (tokens_.size() != utterances_.size()) fail("SpeechLoader", "one token list per utterance expected");
  if (options_.workers < 1 || options_.prefetch_batches < 1) fail("SpeechLoader", "workers and prefetch_batches must be positive");
}

void SpeechLoader::start(std::vector<std::vector<int64_t>> batches, int64_t epoch) {
  workers_.stop();  // before the batches its workers read are replaced
  batches_ = std::move(batches);
  workers_.start(static_cast<int64_t>(batches_.size()), [this, epoch](int64_t index, const std::atomic<bool>& stopping) {
    return build(batches_[static_cast<size_t>(index)], epoch, index, stopping);
  });
}

std::optional<SpeechBatch> SpeechLoader::next() { return workers_.next(); }

SpeechBatch SpeechLoader::build(const std::vector<int64_t>& batch, int64_t epoch, int64_t batch_index) const {
  const std::atomic<bool> never_stopping{false};
  return build(batch, epoch, batch_index, never_stopping);
}

SpeechBatch SpeechLoader::build(const std::vector<int64_t>& batch, int64_t epoch, int64_t batch_index,
                                const std::atomic<bool>& stopping) const {
  SpeechBatch out;
  out.size = static_cast<int64_t>(batch.size());
  out.utterances = batch;
  out.feature_dims = pipeline_.options().output_dims();
  std::vector<FeatureMatrix> features;
  std::vector<data::Rng> streams;
  int64_t padded_frames = 0;  // the batch's longest utterance before stacking, which SpecAugment masks over
  for (size_t i = 0; i < batch.size(); ++i) {
    if (stopping) return out;
    const Utterance& utterance = utterances_.at(static_cast<size_t>(batch[i]));
    streams.emplace_back(data::mix_seed(options_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(batch_index), i));
    Audio audio = read_audio(utterance.audio_path, pipeline_.options().sample_rate);
    features.push_back(pipeline_.normalized_log_mel(std::move(audio.samples), options_.train, streams.back()));
    padded_frames = std::max(padded_frames, features.back().frames);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    features[i] = pipeline_.augment_and_stack(std::move(features[i]), options_.train, padded_frames, streams[i]);
    out.max_frames = std::max(out.max_frames, features[i].frames);
    out.max_tokens = std::max(out.max_tokens, static_cast<int64_t>(tokens_[batch[i]].size()));
  }
  out.features.assign(static_cast<size_t>(out.size * out.max_frames * out.feature_dims), 0.0f);
  out.tokens.assign(static_cast<size_t>(out.size * out.max_tokens), 0);
  for (int64_t i = 0; i < out.size; ++i) {
    std::copy(features[i].values.begin(), features[i].values.end(), out.features.begin() + i * out.max_frames * out.feature_dims);
    out.frame_counts.push_back(features[i].frames);
    const std::vector<int>& tokens = tokens_[batch[i]];
    std::copy(tokens.begin(), tokens.end(), out.tokens.begin() + i * out.max_tokens);
    out.token_counts.push_back(static_cast<int64_t>(tokens.size()));
  }
  return out;
}

}  // namespace trainbench::speech
