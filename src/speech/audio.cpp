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

}  // namespace trainbench::speech
