#include "speech/features.h"

#include <algorithm>
#include <cmath>

#include "speech/audio.h"
#include "util/error.h"

namespace trainbench::speech {

namespace {

double hz_to_mel(double hz) {  // Slaney's scale: linear below 1 kHz, logarithmic above (librosa htk=False)
  constexpr double kLinearStep = 200.0 / 3, kLogStep = 0.06875177742094912;  // log(6.4) / 27
  return hz < 1000 ? hz / kLinearStep : 1000 / kLinearStep + std::log(hz / 1000) / kLogStep;
}

double mel_to_hz(double mel) {
  constexpr double kLinearStep = 200.0 / 3, kLogStep = 0.06875177742094912, kBreak = 1000 / kLinearStep;
  return mel < kBreak ? mel * kLinearStep : 1000 * std::exp(kLogStep * (mel - kBreak));
}

// Reflect an index into [0, n) as numpy's and torch's "reflect" padding do (the edge sample not repeated).
int64_t reflect(int64_t i, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

// DALI nonsilent_region's defaults: the window of its moving mean square and how often the running sum is
// recomputed (window_length, reset_interval).
constexpr int64_t kPowerWindow = 2048, kPowerResetInterval = 8192;

}  // namespace

double standard_normal(data::Rng& rng) {
  const double u1 = 1.0 - rng.uniform();  // (0, 1]
  const double u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

FeaturePipeline::FeaturePipeline(const FeatureOptions& options) : options_(options) {
  const int n = options_.n_fft;
  if (n < 2 || (n & (n - 1)) != 0) fail("n_fft", "expected a power of two, got " + std::to_string(n));
  if (options_.window_length < 1 || options_.window_length > n)
    fail("window_length", "expected 1.." + std::to_string(n) + ", got " + std::to_string(options_.window_length));
  if (options_.hop_length < 1 || options_.mel_bands < 1 || options_.stacking < 1 || options_.subsampling < 1)
    fail("features", "hop_length, mel_bands, stacking and subsampling must be positive");
  // torch.hann_window(window_length, periodic=False), zero-padded on both sides to n_fft as torch.stft does.
  window_.assign(static_cast<size_t>(n), 0.0);
  const int offset = (n - options_.window_length) / 2;
  for (int i = 0; i < options_.window_length; ++i)
    window_[static_cast<size_t>(offset + i)] =
        options_.window_length == 1 ? 1.0 : 0.5 - 0.5 * std::cos(2.0 * M_PI * i / (options_.window_length - 1));
  twiddles_.resize(static_cast<size_t>(n / 2));
  for (int k = 0; k < n / 2; ++k) twiddles_[static_cast<size_t>(k)] = std::polar(1.0, -2.0 * M_PI * k / n);

  // librosa.filters.mel(sr, n_fft, n_mels, fmin=0, fmax=sr/2, htk=False, norm="slaney").
  const int bins = n / 2 + 1;
  const double max_hz = options_.sample_rate / 2.0;
  std::vector<double> band_hz(static_cast<size_t>(options_.mel_bands + 2));
  for (size_t i = 0; i < band_hz.size(); ++i)
    band_hz[i] = mel_to_hz(hz_to_mel(max_hz) * static_cast<double>(i) / static_cast<double>(options_.mel_bands + 1));
  filterbank_.assign(static_cast<size_t>(options_.mel_bands * bins), 0.0f);
  for (int m = 0; m < options_.mel_bands; ++m) {
    const double lower = band_hz[m], center = band_hz[m + 1], upper = band_hz[m + 2];
    const double area_norm = 2.0 / (upper - lower);
    for (int k = 0; k < bins; ++k) {
      const double hz = max_hz * k / (bins - 1);
      const double rising = (hz - lower) / (center - lower), falling = (upper - hz) / (upper - center);
      filterbank_[static_cast<size_t>(m * bins + k)] = static_cast<float>(std::max(0.0, std::min(rising, falling)) * area_norm);
    }
    int first = 0, last = bins;
    while (first < bins && filterbank_[static_cast<size_t>(m * bins + first)] == 0) ++first;
    while (last > first && filterbank_[static_cast<size_t>(m * bins + last - 1)] == 0) --last;
    band_bins_.emplace_back(first, last);
  }
}

void FeaturePipeline::fft(std::vector<std::complex<double>>& data) const {
  const size_t n = data.size();
  for (size_t i = 1, j = 0; i < n; ++i) {  // bit-reversal permutation
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(data[i], data[j]);
  }
  for (size_t length = 2; length <= n; length <<= 1) {
    const size_t stride = n / length;
    for (size_t start = 0; start < n; start += length)
      for (size_t k = 0; k < length / 2; ++k) {
        const std::complex<double> odd = data[start + k + length / 2] * twiddles_[k * stride];
        data[start + k + length / 2] = data[start + k] - odd;
        data[start + k] += odd;
      }
  }
}

std::pair<size_t, size_t> FeaturePipeline::nonsilent_region(const std::vector<float>& samples) const {
  if (options_.trim_db <= 0 || samples.empty()) return {0, samples.size()};
  // DALI v1.5.0 dali/operators/audio/nonsilence_op.h on kernels/signal/moving_mean_square.cc, in float as
  // there: the mean square of every window [k, k + W), W = min(2048, n), k = 0 .. n - W, by a running sum
  // recomputed from scratch every reset interval - W + 1 windows.
  const auto n = static_cast<int64_t>(samples.size());
  const int64_t window = std::min(kPowerWindow, n);
  std::vector<float> power(static_cast<size_t>(n - window + 1));
  const float mean_factor = 1.0f / static_cast<float>(window);
  for (int64_t k = 0; k <= n - window;) {
    float sum = 0;
    for (int64_t i = k; i < k + window; ++i) sum += samples[i] * samples[i];
    power[static_cast<size_t>(k)] = sum * mean_factor;
    const int64_t stop = std::min(k + kPowerResetInterval, n) - window + 1;
    for (++k; k < stop; ++k) {
      sum += samples[k + window - 1] * samples[k + window - 1] - samples[k - 1] * samples[k - 1];
      power[static_cast<size_t>(k)] = sum * mean_factor;
    }
  }
  // Against the loudest window (reference_power unset), cutoff_db = -trim_db; the region runs from the first
  // window at or above the threshold to the end of the last one. All zeros are not trimmed (0 >= 0).
  const float loudest = *std::max_element(power.begin(), power.end());
  const float threshold = loudest * std::pow(10.0f, static_cast<float>(-options_.trim_db) * (1.0f / 10.0f));
  const auto loud = [&](float p) { return p >= threshold; };
  const auto first = std::find_if(power.begin(), power.end(), loud);
  if (first == power.end()) return {0, 0};
  const auto last = std::find_if(power.rbegin(), power.rend(), loud);
  return {static_cast<size_t>(first - power.begin()), static_cast<size_t>(power.rend() - last - 1 + window)};
}

FeatureMatrix FeaturePipeline::log_mel(const std::vector<float>& samples) const {
  const int64_t n = static_cast<int64_t>(samples.size());
  const int n_fft = options_.n_fft, bins = n_fft / 2 + 1;
  FeatureMatrix out;
  out.dims = options_.mel_bands;
  if (n == 0) return out;
  std::vector<double> emphasized(static_cast<size_t>(n));
  emphasized[0] = samples[0];
  for (int64_t i = 1; i < n; ++i) emphasized[i] = samples[i] - options_.preemphasis * samples[i - 1];
  out.frames = 1 + n / options_.hop_length;
  out.values.assign(static_cast<size_t>(out.frames * out.dims), 0.0f);
  std::vector<std::complex<double>> frame(static_cast<size_t>(n_fft));
  std::vector<double> spectrum(static_cast<size_t>(bins));
  for (int64_t f = 0; f < out.frames; ++f) {
    const int64_t start = f * options_.hop_length - n_fft / 2;  // centred frames
    for (int i = 0; i < n_fft; ++i) frame[i] = emphasized[static_cast<size_t>(reflect(start + i, n))] * window_[i];
    fft(frame);
    for (int k = 0; k < bins; ++k) spectrum[k] = std::norm(frame[k]);
    for (int m = 0; m < out.dims; ++m) {
      const float* weights = filterbank_.data() + static_cast<size_t>(m) * bins;
      double energy = 0;
      for (int k = band_bins_[static_cast<size_t>(m)].first; k < band_bins_[static_cast<size_t>(m)].second; ++k)
        energy += weights[k] * spectrum[k];
      out.at(f, m) = static_cast<float>(std::log(std::max(energy, options_.log_floor)));
    }
  }
  return out;
}

void FeaturePipeline::normalize(FeatureMatrix& features) const {
  for (int64_t d = 0; d < features.dims; ++d) {
    double sum = 0;
    for (int64_t f = 0; f < features.frames; ++f) sum += features.at(f, d);
    const double mean = sum / static_cast<double>(std::max<int64_t>(1, features.frames));
    double squares = 0;
    for (int64_t f = 0; f < features.frames; ++f) squares += (features.at(f, d) - mean) * (features.at(f, d) - mean);
    const double std = features.frames > 1 ? std::sqrt(squares / static_cast<double>(features.frames - 1)) : 0.0;
    for (int64_t f = 0; f < features.frames; ++f)
      features.at(f, d) = static_cast<float>((features.at(f, d) - mean) / (std + 1e-5));
  }
}

void FeaturePipeline::spec_augment(FeatureMatrix& features, int64_t padded_frames, data::Rng& rng) const {
  // Start positions as the reference draws them (common/data/features.py): randint(0, max(1, size - width
  // + 1)), size being the padded batch's bands or frames; a time mask's width is bounded by this
  // utterance's own length.
  for (int i = 0; i < options_.freq_masks; ++i) {
    const int64_t width = rng.uniform_int(0, options_.freq_mask_max);
    const int64_t start = rng.uniform_int(0, std::max<int64_t>(1, features.dims - width + 1) - 1);
    for (int64_t f = 0; f < features.frames; ++f)
      for (int64_t d = start; d < std::min(features.dims, start + width); ++d) features.at(f, d) = 0;
  }
  const auto max_time = static_cast<int64_t>(std::llround(options_.time_mask_max_fraction * static_cast<double>(features.frames)));
  for (int i = 0; i < options_.time_masks; ++i) {
    const int64_t width = rng.uniform_int(0, max_time);
    const int64_t start = rng.uniform_int(0, std::max<int64_t>(1, padded_frames - width + 1) - 1);
    for (int64_t f = start; f < std::min(features.frames, start + width); ++f)
      for (int64_t d = 0; d < features.dims; ++d) features.at(f, d) = 0;
  }
}

FeatureMatrix FeaturePipeline::stack_and_subsample(const FeatureMatrix& features) const {
  const int64_t stacking = options_.stacking, step = options_.subsampling;
  FeatureMatrix out;
  out.dims = features.dims * stacking;
  out.frames = (features.frames + step - 1) / step;
  out.values.assign(static_cast<size_t>(out.frames * out.dims), 0.0f);
  for (int64_t t = 0; t < out.frames; ++t)
    for (int64_t s = 0; s < stacking && t * step + s < features.frames; ++s)
      std::copy_n(&features.values[static_cast<size_t>((t * step + s) * features.dims)], features.dims,
                  &out.values[static_cast<size_t>(t * out.dims + s * features.dims)]);
  return out;
}

int64_t FeaturePipeline::output_frames(int64_t samples) const {
  const int64_t frames = 1 + samples / options_.hop_length;
  return (frames + options_.subsampling - 1) / options_.subsampling;
}

FeatureMatrix FeaturePipeline::normalized_log_mel(std::vector<float> samples, bool train, data::Rng& rng) const {
  // The reference's decoders.audio(sample_rate=16000 * U(speed_min, speed_max)): a float32 rate, DALI's resampler.
  if (train && (options_.speed_min != 1 || options_.speed_max != 1))
    samples = dali_resample(samples, options_.sample_rate,
                            static_cast<float>(options_.sample_rate * rng.uniform(options_.speed_min, options_.speed_max)));
  const auto [begin, end] = nonsilent_region(samples);
  if (begin > 0 || end < samples.size())
    samples = std::vector<float>(samples.begin() + static_cast<std::ptrdiff_t>(begin), samples.begin() + static_cast<std::ptrdiff_t>(end));
  if (samples.empty()) samples.assign(1, 0.0f);  // all silence: one frame of the floor, not an empty utterance
  if (options_.dither > 0)
    for (float& sample : samples) sample += static_cast<float>(options_.dither * standard_normal(rng));
  FeatureMatrix features = log_mel(samples);
  normalize(features);
  return features;
}

FeatureMatrix FeaturePipeline::augment_and_stack(FeatureMatrix features, bool train, int64_t padded_frames, data::Rng& rng) const {
  if (train) spec_augment(features, padded_frames, rng);
  return stack_and_subsample(features);
}

FeatureMatrix FeaturePipeline::compute(std::vector<float> samples, bool train, data::Rng& rng) const {
  FeatureMatrix features = normalized_log_mel(std::move(samples), train, rng);
  const int64_t frames = features.frames;
  return augment_and_stack(std::move(features), train, frames, rng);
}

}  // namespace trainbench::speech
