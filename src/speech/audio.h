#pragma once
// Audio files through libsndfile (FLAC, WAV, ...): reading an utterance as mono float samples, writing
// 16-bit FLAC, a band-limited resampler for bringing synthesised speech to 16 kHz, and DALI's resampler for
// speed perturbation.
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::speech {

struct Audio {
  std::vector<float> samples;  // mono, in [-1, 1]
  int sample_rate = 0;
};

// Reads a mono file. An Error names the file when it cannot be read, has more than one channel, or (when
// expected_rate > 0) another sample rate.
Audio read_audio(const std::string& path, int expected_rate = 0);

// Frames and rate from the header only (for duration filtering without decoding).
struct AudioInfo {
  int64_t frames = 0;
  int sample_rate = 0;
  double seconds() const { return sample_rate > 0 ? static_cast<double>(frames) / sample_rate : 0; }
};
AudioInfo read_audio_info(const std::string& path);

// Writes 16-bit mono FLAC (samples are clipped to [-1, 1]).
void write_flac(const std::string& path, const std::vector<float>& samples, int sample_rate);

// Resamples by `ratio` (output rate / input rate; the output has round(n * ratio) samples) with a
// Hann-windowed sinc whose cutoff follows the lower of the two rates, so downsampling does not alias: what
// `data make rnnt` brings synthesised speech to 16 kHz with. Written here because libsndfile does not
// resample and libsamplerate is not among the dependencies.
std::vector<float> resample(const std::vector<float>& samples, double ratio);

// Resamples from in_rate to out_rate as DALI's audio decoder does when given a sample_rate (the reference's
// speed perturbation; DALI v1.5.0 dali/kernels/signal/resampling.h, audio_decoder_impl.cc, in float32 as
// there): a copy when the rates are equal; otherwise ceil(n * out_rate / in_rate) outputs, output j at input
// position j * in_rate / out_rate, a Hann-windowed sinc of 16 lobes tabulated in 1025 entries and
// interpolated linearly, the same filter at every ratio (no lower cutoff when downsampling, so what lies
// above the new Nyquist frequency aliases), taps outside the signal left out.
std::vector<float> dali_resample(const std::vector<float>& samples, double in_rate, double out_rate);

}  // namespace trainbench::speech
