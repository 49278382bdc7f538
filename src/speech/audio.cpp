#include "speech/audio.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "util/error.h"

namespace trainbench::speech {

namespace {

struct SndfileCloser {
  void operator()(SNDFILE* file) const { sf_close(file); }
};
using SndfileHandle = std::unique_ptr<SNDFILE, SndfileCloser>;

SndfileHandle open_for_reading(const std::string& path, SF_INFO& info) {
  info = SF_INFO{};
  SndfileHandle file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) fail(path, std::string("cannot read audio (") + sf_strerror(nullptr) + ")");
  return file;
}

}  // namespace

AudioInfo read_audio_info(const std::string& path) {
  SF_INFO info;
  const SndfileHandle file = open_for_reading(path, info);
  return {static_cast<int64_t>(info.frames), info.samplerate};
}

Audio read_audio(const std::string& path, int expected_rate) {
  SF_INFO info;
  const SndfileHandle file = open_for_reading(path, info);
  if (info.channels != 1) fail(path, "expected mono audio, got " + std::to_string(info.channels) + " channels");
  if (expected_rate > 0 && info.samplerate != expected_rate)
    fail(path, "expected a sample rate of " + std::to_string(expected_rate) + " Hz, got " + std::to_string(info.samplerate));
  Audio audio;
  audio.sample_rate = info.samplerate;
  audio.samples.resize(static_cast<size_t>(info.frames));
  const sf_count_t read = sf_readf_float(file.get(), audio.samples.data(), info.frames);
  if (read != info.frames)
    fail(path, "truncated audio: read " + std::to_string(read) + " of " + std::to_string(info.frames) + " frames");
  return audio;
}

void write_flac(const std::string& path, const std::vector<float>& samples, int sample_rate) {
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
  SndfileHandle file(sf_open(path.c_str(), SFM_WRITE, &info));
  if (!file) fail(path, std::string("cannot write FLAC (") + sf_strerror(nullptr) + ")");
  // Clip instead of letting libsndfile wrap values outside [-1, 1].
  sf_command(file.get(), SFC_SET_CLIPPING, nullptr, SF_TRUE);
  if (sf_writef_float(file.get(), samples.data(), static_cast<sf_count_t>(samples.size())) !=
      static_cast<sf_count_t>(samples.size()))
    fail(path, std::string("short write (") + sf_strerror(file.get()) + ")");
}

namespace {

// The resampling kernel sinc(y) * hann(y / zero_crossings) as a function of y = cutoff * distance, tabulated
// once so the inner loop is a lookup and a linear interpolation instead of a sine and a cosine per tap.
constexpr int kZeroCrossings = 16;
constexpr int kTableSteps = 512;  // entries per unit of y

const std::vector<double>& kernel_table() {
  static const std::vector<double> table = [] {
    std::vector<double> values(kZeroCrossings * kTableSteps + 2, 0.0);
    for (int i = 0; i <= kZeroCrossings * kTableSteps; ++i) {
      const double y = static_cast<double>(i) / kTableSteps;
      const double sinc = i == 0 ? 1.0 : std::sin(M_PI * y) / (M_PI * y);
      values[static_cast<size_t>(i)] = sinc * (0.5 + 0.5 * std::cos(M_PI * y / kZeroCrossings));
    }
    return values;
  }();
  return table;
}

}  // namespace

std::vector<float> resample(const std::vector<float>& samples, double ratio) {
  if (!(ratio > 0)) fail("resample", "the ratio must be positive, got " + std::to_string(ratio));
  const auto out_size = static_cast<int64_t>(std::llround(static_cast<double>(samples.size()) * ratio));
  std::vector<float> out(static_cast<size_t>(out_size));
  const std::vector<double>& table = kernel_table();
  const double cutoff = std::min(1.0, ratio);  // relative to the input's Nyquist frequency
  const double half_width = kZeroCrossings / cutoff;  // in input samples
  const auto n = static_cast<int64_t>(samples.size());
  for (int64_t j = 0; j < out_size; ++j) {
    const double center = static_cast<double>(j) / ratio;
    const auto first = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(center - half_width)));
    const auto last = std::min<int64_t>(n - 1, static_cast<int64_t>(std::floor(center + half_width)));
    double sum = 0;
    for (int64_t k = first; k <= last; ++k) {
      const double position = std::abs(static_cast<double>(k) - center) * cutoff * kTableSteps;
      const auto index = static_cast<size_t>(position);
      const double fraction = position - static_cast<double>(index);
      sum += samples[static_cast<size_t>(k)] * (table[index] + fraction * (table[index + 1] - table[index]));
    }
    out[static_cast<size_t>(j)] = static_cast<float>(sum * cutoff);
  }
  return out;
}

namespace {

// DALI's resampling window as its audio decoder sets it up at the default quality 50 (v1.5.0
// dali/kernels/signal/resampling.h windowed_sinc, audio_decoder_op.h: 16 lobes, 16 * 64 + 1 entries):
// sinc(x) * hann(y) at x = k / 32, y = 2k / 1025, k = -512..512, in float as DALI tabulates it, with a zero
// entry at either end.
struct DaliWindow {
  static constexpr int kLobes = 16, kEntries = kLobes * 64 + 1;

  DaliWindow() : lookup(kEntries + 2, 0.0f) {
    const float step = 2.0f * kLobes / (kEntries - 1), envelope_step = 2.0f / kEntries;
    const int middle = (kEntries - 1) / 2;
    for (int i = 0; i < kEntries; ++i) {
      const float x = static_cast<float>(i - middle) * step, y = static_cast<float>(i - middle) * envelope_step;
      const auto px = static_cast<float>(x * M_PI);
      const float sinc = std::abs(px) < 1e-5f ? 1.0f - px * px * (1.0f / 6) : std::sin(px) / px;
      lookup[static_cast<size_t>(i) + 1] = static_cast<float>(sinc * (0.5 * (1 + std::cos(y * M_PI))));
    }
    scale = 1 / step;
    center = static_cast<float>(middle + 1);
  }

  // The scalar path: the entry below (truncation; the table index is positive), interpolated.
  float at(float x) const {
    const float fi = x * scale + center;
    const int i = static_cast<int>(fi);
    return interpolate(i, fi - static_cast<float>(i));
  }
  // The SSE2 path's lanes: _mm_cvtps_epi32 rounds to the nearest entry, so the fraction is in [-0.5, 0.5] and
  // half the taps extrapolate the segment above (DALI rounded here until 2022). Adding and removing 1.5 * 2^23
  // rounds a float of this range to the nearest integer, ties to even, as the instruction does.
  float at_rounded(float x) const {
    const float fi = x * scale + center;
    const float nearest = (fi + 12582912.0f) - 12582912.0f;
    return interpolate(static_cast<int>(nearest), fi - nearest);
  }

  std::vector<float> lookup;
  float scale = 0, center = 0;

 private:
  float interpolate(int i, float fraction) const {
    const auto index = static_cast<size_t>(i);
    return lookup[index] + fraction * (lookup[index + 1] - lookup[index]);
  }
};

}  // namespace

std::vector<float> dali_resample(const std::vector<float>& samples, double in_rate, double out_rate) {
  if (!(in_rate > 0) || !(out_rate > 0))
    fail("dali_resample", "the rates must be positive, got " + std::to_string(in_rate) + " and " + std::to_string(out_rate));
  if (in_rate == out_rate) return samples;  // the decoder resamples only when the rates differ
  static const DaliWindow window;
  const auto n = static_cast<int64_t>(samples.size());
  const auto out_size = static_cast<int64_t>(std::ceil(static_cast<double>(n) * out_rate / in_rate));
  std::vector<float> out(static_cast<size_t>(out_size));
  const double scale = in_rate / out_rate;
  const auto step = static_cast<float>(scale);
  // DALI's Resampler::Resample, single channel: each block of 1024 outputs starts from its exact input
  // position, and within the block the position advances by the float step.
  constexpr int64_t kBlock = 1024;
  for (int64_t block = 0; block < out_size; block += kBlock) {
    const double start = static_cast<double>(block) * scale;
    const auto base = static_cast<int64_t>(std::floor(start));
    auto position = static_cast<float>(start - static_cast<double>(base));
    for (int64_t j = block; j < std::min(block + kBlock, out_size); ++j, position += step) {
      const int64_t first = std::max<int64_t>(static_cast<int64_t>(std::ceil(position)) - DaliWindow::kLobes, -base);
      const int64_t last = std::min<int64_t>(static_cast<int64_t>(std::floor(position)) + DaliWindow::kLobes, n - 1 - base);
      // The SSE2 loop: taps four at a time, each lane with its own running offset and sum, the lanes added as
      // (0 + 2) + (1 + 3); then the remaining taps one by one.
      float lane[4] = {0, 0, 0, 0}, offset[4];
      int64_t i = first;
      for (int k = 0; k < 4; ++k) offset[k] = static_cast<float>(i + k) - position;
      for (; i + 3 <= last; i += 4)
        for (int k = 0; k < 4; ++k) {
          lane[k] += samples[static_cast<size_t>(base + i + k)] * window.at_rounded(offset[k]);
          offset[k] += 4.0f;
        }
      float sum = (lane[0] + lane[2]) + (lane[1] + lane[3]);
      for (float x = static_cast<float>(i) - position; i <= last; ++i, x += 1.0f)
        sum += samples[static_cast<size_t>(base + i)] * window.at(x);
      out[static_cast<size_t>(j)] = sum;
    }
  }
  return out;
}

}  // namespace trainbench::speech
