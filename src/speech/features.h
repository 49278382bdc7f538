#pragma once
// The RNN-T reference's audio features (mlcommons/training rnn_speech_recognition: the DALI pipeline in
// common/data/dali/pipeline.py and FilterbankFeatures/SpecAugment/FrameSplicing in common/data/features.py),
// plain C++ so loader threads compute them without touching LibTorch:
//   speed perturbation (train): resample to U(speed_min, speed_max) x 16 kHz, played back at 16 kHz, with
//     DALI's resampler (speech/audio.h dali_resample)
//   silence trim: drop the leading and trailing audio whose 2048-sample windows are quieter than the loudest
//     by trim_db, as DALI's nonsilent_region
//   dither: + dither * N(0, 1)
//   pre-emphasis: y[n] = x[n] - 0.97 x[n-1]
//   power STFT: nfft 512, symmetric Hann window of 320 samples centred in the frame, hop 160, centred frames
//     (reflect padding of nfft/2), as torch.stft(center=True)
//   80 Slaney-normalised mel bands (librosa.filters.mel defaults), natural log floored at 1e-20
//   per-utterance, per-band normalisation: (x - mean) / (unbiased std + 1e-5)
//   SpecAugment (train): freq_masks masks of width U{0..freq_mask_max}, time_masks masks of width
//     U{0..round(time_mask_max_fraction * frames)}, masked values set to 0; the reference masks the padded
//     batch (common/data/features.py: SpecAugment after DALI's Pad), so a time mask starts anywhere in the
//     batch's longest utterance and may fall partly or wholly in this one's padding
//   frame stacking and subsampling: frame t' = [x(3t'), x(3t'+1), x(3t'+2)], zero beyond the end, ceil(T/3) frames
// The FFT is written here (radix 2, one size) because no FFT library is among the project's dependencies.
#include <complex>
#include <cstdint>
#include <utility>
#include <vector>

#include "data/random.h"

namespace trainbench::speech {

struct FeatureOptions {
  int sample_rate = 16000;
  double speed_min = 0.85, speed_max = 1.15;  // train only
  double trim_db = 60;                          // <= 0: no trimming
  double dither = 1e-5;
  double preemphasis = 0.97;
  int n_fft = 512, window_length = 320, hop_length = 160;
  int mel_bands = 80;
  double log_floor = 1e-20;
  int freq_masks = 2, freq_mask_max = 20;  // train only
  int time_masks = 10;
  double time_mask_max_fraction = 0.03;
  int stacking = 3, subsampling = 3;

  int output_dims() const { return mel_bands * stacking; }
};

// Row-major frames x dims.
struct FeatureMatrix {
  std::vector<float> values;
  int64_t frames = 0;
  int64_t dims = 0;
  float& at(int64_t frame, int64_t dim) { return values[static_cast<size_t>(frame * dims + dim)]; }
  float at(int64_t frame, int64_t dim) const { return values[static_cast<size_t>(frame * dims + dim)]; }
};

class FeaturePipeline {
 public:
  explicit FeaturePipeline(const FeatureOptions& options);

  // The whole pipeline on one utterance at options.sample_rate, as a batch of one. `train` turns on speed
  // perturbation and SpecAugment; all randomness (speed, dither, masks) comes from `rng`.
  FeatureMatrix compute(std::vector<float> samples, bool train, data::Rng& rng) const;
  // The pipeline in the two halves a batch needs: each utterance up to normalisation, then, once the batch's
  // longest is known, SpecAugment (train) against that padded length, stacking and subsampling.
  FeatureMatrix normalized_log_mel(std::vector<float> samples, bool train, data::Rng& rng) const;
  FeatureMatrix augment_and_stack(FeatureMatrix features, bool train, int64_t padded_frames, data::Rng& rng) const;

  // The stages, in pipeline order.
  // [begin, end) of the samples DALI's nonsilent_region(cutoff_db = -trim_db) keeps: from the first window
  // in [k, k + 2048) whose mean square is within trim_db of the loudest window's to the end of the last.
  std::pair<size_t, size_t> nonsilent_region(const std::vector<float>& samples) const;
  // Pre-emphasis, power STFT, mel bands and log: frames x mel_bands (no dither).
  FeatureMatrix log_mel(const std::vector<float>& samples) const;
  void normalize(FeatureMatrix& features) const;
  // padded_frames >= features.frames: the batch's longest utterance, where the time masks may start.
  void spec_augment(FeatureMatrix& features, int64_t padded_frames, data::Rng& rng) const;
  FeatureMatrix stack_and_subsample(const FeatureMatrix& features) const;

  // mel_bands x (n_fft / 2 + 1), row-major.
  const std::vector<float>& filterbank() const { return filterbank_; }
  const FeatureOptions& options() const { return options_; }
  // Feature frames the pipeline yields for `samples` input samples (without speed perturbation or trimming).
  int64_t output_frames(int64_t samples) const;

 private:
  void fft(std::vector<std::complex<double>>& data) const;

  FeatureOptions options_;
  std::vector<double> window_;  // n_fft entries: the Hann window centred, zeros around it
  std::vector<float> filterbank_;
  std::vector<std::pair<int, int>> band_bins_;  // [first, last) non-zero bins of each mel band
  std::vector<std::complex<double>> twiddles_;
};

// A standard normal variate from two uniforms (Box-Muller), so dither is reproducible across libraries.
double standard_normal(data::Rng& rng);

}  // namespace trainbench::speech
