// The feature pipeline against an independent torchaudio computation (features_reference.py), the silence
// trim against an independent numpy model of DALI's nonsilent_region (dali_reference.py), and the stages the
// reference leaves to DALI (silence trim, speed perturbation, SpecAugment) on signals whose answer is known.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "data/random.h"
#include "data/test_files.h"
#include "speech/audio.h"
#include "support/float_file.h"
#include "support/python_script.h"
#include "speech/features.h"

namespace trainbench::speech {
namespace {

namespace fs = std::filesystem;
using data::testing::TempDir;
using testing::read_floats;
using testing::write_floats;

// A voiced-speech-like test signal: harmonics of a gliding pitch with noise.
std::vector<float> test_signal(int64_t samples) {
  data::Rng rng(3);
  std::vector<float> signal(static_cast<size_t>(samples));
  double phase = 0;
  for (int64_t i = 0; i < samples; ++i) {
    phase += 2 * M_PI * (120.0 + 80.0 * static_cast<double>(i) / samples) / 16000.0;
    double value = 0;
    for (int h = 1; h <= 12; ++h) value += std::sin(h * phase) / h;
    signal[i] = static_cast<float>(0.1 * value + 0.01 * (rng.uniform() - 0.5));
  }
  return signal;
}

TEST(SpeechFeatures, MatchTorchaudioBeforeAugmentation) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_features_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::vector<float> signal = test_signal(16000 + 1234);
  {
    std::ofstream out(dir / "samples.f32", std::ios::binary);
    out.write(reinterpret_cast<const char*>(signal.data()), static_cast<std::streamsize>(signal.size() * sizeof(float)));
  }
  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_FEATURES_REFERENCE_SCRIPT,
      (dir / "samples.f32").string() + " " + (dir / "features.f32").string() + " " + (dir / "fbank.f32").string());
  ASSERT_TRUE(testing::succeeded(run)) << "is python3-torchaudio installed?";

  const FeaturePipeline pipeline{FeatureOptions{}};
  const std::vector<float> fbank = read_floats(dir / "fbank.f32");
  ASSERT_EQ(fbank.size(), pipeline.filterbank().size());
  for (size_t i = 0; i < fbank.size(); ++i) ASSERT_NEAR(pipeline.filterbank()[i], fbank[i], 1e-6) << "filterbank entry " << i;

  FeatureMatrix features = pipeline.log_mel(signal);
  pipeline.normalize(features);
  const FeatureMatrix stacked = pipeline.stack_and_subsample(features);
  const std::vector<float> expected = read_floats(dir / "features.f32");
  ASSERT_EQ(stacked.dims, 240);
  ASSERT_EQ(stacked.frames, pipeline.output_frames(static_cast<int64_t>(signal.size())));
  ASSERT_EQ(static_cast<size_t>(stacked.frames * stacked.dims), expected.size());
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(stacked.values[i]) - expected[i]));
  EXPECT_LT(worst, 2e-3) << "largest difference from torchaudio over " << expected.size() << " values";
  fs::remove_all(dir);
}

TEST(SpeechFeatures, TrimKeepsTheSoundAndItsWindow) {
  const FeaturePipeline pipeline{FeatureOptions{}};
  // Silence at both ends of a 0.5 plateau [15000, 25000): every 2048-sample window [k, k + 2048) holding one
  // plateau sample is above -60 dB of the loudest (0.25 / 2048 against 0.25e-6), so DALI keeps from the first
  // such window, k = 15000 - 2047, to the end of the last, 24999 + 2048.
  std::vector<float> samples(40000, 0.0f);
  for (int i = 15000; i < 25000; ++i) samples[i] = 0.5f;
  EXPECT_EQ(pipeline.nonsilent_region(samples), (std::pair<size_t, size_t>{15000 - 2047, 25000 + 2047}));
  // Quiet sound 70 dB below the plateau is trimmed; at 50 dB it is kept.
  for (const double level : {70.0, 50.0}) {
    std::vector<float> noisy = samples;
    for (int i = 0; i < 40000; ++i)
      if (i < 15000 || i >= 25000) noisy[i] = static_cast<float>(0.5 * std::pow(10.0, -level / 20) * std::sin(i * 0.05));
    const auto region = pipeline.nonsilent_region(noisy);
    EXPECT_EQ(region.second - region.first == noisy.size(), level < 60) << level << " dB";
  }
  // All loud: everything. All silent: everything too, as DALI (the threshold is 0 and 0 >= 0). Shorter than
  // the window: one window of the whole signal, kept.
  const std::vector<float> loud = test_signal(30000);
  EXPECT_EQ(pipeline.nonsilent_region(loud), (std::pair<size_t, size_t>{0, 30000}));
  EXPECT_EQ(pipeline.nonsilent_region(std::vector<float>(5000, 0.0f)), (std::pair<size_t, size_t>{0, 5000}));
  std::vector<float> short_click(1000, 0.0f);
  short_click[500] = 0.5f;
  EXPECT_EQ(pipeline.nonsilent_region(short_click), (std::pair<size_t, size_t>{0, 1000}));
}

TEST(SpeechFeatures, TrimMatchesAnIndependentNumpyModelOfDali) {
  TempDir dir;
  const Audio utterance =
      read_audio("/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav", 16000);
  std::vector<float> padded(7000, 0.0f);  // the utterance between 7000 and 9000 samples of silence
  padded.insert(padded.end(), utterance.samples.begin(), utterance.samples.end());
  padded.resize(padded.size() + 9000, 0.0f);
  std::vector<float> tails = test_signal(40000);  // a voice whose tails fade from 55 to 75 dB down
  for (int i = 0; i < 40000; ++i)
    if (i < 12000 || i >= 31000)
      tails[i] *= static_cast<float>(std::pow(10.0, -(55 + 20.0 * (i < 12000 ? 12000 - i : i - 30999) / 12000) / 20));
  std::vector<float> plateau(40000, 0.0f);
  for (int i = 15000; i < 25000; ++i) plateau[i] = 0.5f;
  std::vector<float> click(1000, 0.0f);
  click[500] = 0.5f;
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"speech", utterance.samples}, {"padded_speech", padded}, {"tails", tails}, {"plateau", plateau},
      {"silent", std::vector<float>(5000, 0.0f)}, {"loud", test_signal(30000)}, {"click", click}};
  std::ofstream list(dir / "cases.txt");
  for (const auto& [name, samples] : cases) {
    write_floats(dir / (name + ".in.f32"), samples);
    list << "nonsilent " << name << " -60\n";
  }
  list.close();
  const testing::PythonRun run = testing::run_python_script(TRAINBENCH_DALI_REFERENCE_SCRIPT, dir.path().string());
  ASSERT_TRUE(testing::succeeded(run)) << "is python3-numpy installed?";
  const FeaturePipeline pipeline{FeatureOptions{}};
  for (const auto& [name, samples] : cases) {
    std::ifstream in(dir / (name + ".region"));
    size_t begin = 0, length = 0;
    ASSERT_TRUE(in >> begin >> length) << name;
    EXPECT_EQ(pipeline.nonsilent_region(samples), (std::pair<size_t, size_t>{begin, begin + length})) << name;
  }
}

TEST(SpeechFeatures, ResamplingKeepsATonesPitch) {
  // A 440 Hz tone resampled by 1.15 is, at the original rate, a tone of 440 / 1.15 Hz (slower speech).
  std::vector<float> tone(16000);
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = static_cast<float>(std::sin(2 * M_PI * 440 * i / 16000.0));
  for (const double ratio : {0.85, 1.15}) {
    const std::vector<float> out = resample(tone, ratio);
    EXPECT_EQ(out.size(), static_cast<size_t>(std::llround(16000 * ratio)));
    double worst = 0;
    for (size_t j = 400; j + 400 < out.size(); ++j)
      worst = std::max(worst, std::abs(out[j] - std::sin(2 * M_PI * 440 / ratio * j / 16000.0)));
    EXPECT_LT(worst, 2e-3) << "ratio " << ratio;
  }
  // Downsampling removes what the new rate cannot hold: 7.9 kHz at 16 kHz, resampled by 0.85 (Nyquist 6.8 kHz,
  // the filter's transition band about 0.85 kHz wide on either side).
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = static_cast<float>(std::sin(2 * M_PI * 7900 * i / 16000.0));
  const std::vector<float> out = resample(tone, 0.85);
  double energy = 0;
  for (size_t j = 400; j + 400 < out.size(); ++j) energy += out[j] * out[j];
  EXPECT_LT(energy / static_cast<double>(out.size() - 800), 0.01);
}

TEST(SpeechFeatures, SpecAugmentMasksWithinItsLimits) {
  FeatureOptions options;
  const FeaturePipeline pipeline(options);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    FeatureMatrix features;
    features.frames = 500;
    features.dims = 80;
    features.values.assign(500 * 80, 1.0f);
    data::Rng rng(seed);
    pipeline.spec_augment(features, 500, rng);
    int64_t masked_bands = 0, masked_frames = 0;
    for (int64_t d = 0; d < 80; ++d) {
      bool all = true;
      for (int64_t f = 0; f < 500; ++f) all = all && features.at(f, d) == 0;
      masked_bands += all;
    }
    for (int64_t f = 0; f < 500; ++f) {
      bool all = true;
      for (int64_t d = 0; d < 80; ++d) all = all && features.at(f, d) == 0;
      masked_frames += all;
    }
    EXPECT_LE(masked_bands, 2 * 20);
    EXPECT_LE(masked_frames, 10 * 15);  // round(0.03 * 500) = 15 frames per mask at most
    for (float v : features.values) ASSERT_TRUE(v == 0.0f || v == 1.0f);
  }
}

// Audit R3: the reference masks the padded batch, so a short utterance's time masks start anywhere in the
// batch's longest and mostly land in its padding; a band mask may end at the last band.
TEST(SpeechFeatures, SpecAugmentPlacesTimeMasksOverThePaddedBatch) {
  FeatureOptions options;
  options.freq_masks = 2;
  options.freq_mask_max = 20;
  const FeaturePipeline pipeline{options};
  const auto masked_frames = [&](int64_t padded_frames, uint64_t seed, bool& last_band_masked) {
    FeatureMatrix features;
    features.frames = 100;
    features.dims = 80;
    features.values.assign(100 * 80, 1.0f);
    data::Rng rng(seed);
    pipeline.spec_augment(features, padded_frames, rng);
    int64_t frames = 0;
    for (int64_t f = 0; f < features.frames; ++f) {
      bool all = true;
      for (int64_t d = 0; d < features.dims; ++d) all = all && features.at(f, d) == 0;
      frames += all;
    }
    bool band = true;
    for (int64_t f = 0; f < features.frames; ++f) band = band && features.at(f, 79) == 0;
    last_band_masked = last_band_masked || band;
    return frames;
  };
  int64_t alone = 0, in_a_long_batch = 0;
  bool last_band_masked = false;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    alone += masked_frames(100, seed, last_band_masked);
    in_a_long_batch += masked_frames(2000, seed, last_band_masked);
  }
  // Ten masks of up to 3 frames: about 10 x 1.5 frames alone; in a batch 20x longer about 1/20 of that lands here.
  EXPECT_GT(alone, 200 * 8);
  EXPECT_LT(in_a_long_batch, alone / 8) << alone;
  EXPECT_GT(in_a_long_batch, 0);
  EXPECT_TRUE(last_band_masked);
}

TEST(SpeechFeatures, TrainingFeaturesVaryWithTheSeedAndEvaluationOnlyThroughDither) {
  const FeaturePipeline pipeline{FeatureOptions{}};
  const std::vector<float> signal = test_signal(24000);
  data::Rng a(1), b(1), c(2);
  const FeatureMatrix first = pipeline.compute(signal, true, a), again = pipeline.compute(signal, true, b);
  EXPECT_EQ(first.values, again.values);
  const FeatureMatrix other = pipeline.compute(signal, true, c);
  EXPECT_NE(first.values, other.values);
  data::Rng d(1);
  const FeatureMatrix eval = pipeline.compute(signal, false, d);
  EXPECT_EQ(eval.frames, pipeline.output_frames(24000));
  EXPECT_EQ(eval.dims, 240);
}

}  // namespace
}  // namespace trainbench::speech
