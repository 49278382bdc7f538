// DALI's resampler (speech/audio.h dali_resample, the reference's speed perturbation): where its outputs
// sit and what its filter keeps, on signals whose answer is known, and every output against an independent
// numpy model of DALI's algorithm (dali_reference.py) on a tone, noise and a real utterance.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "data/random.h"
#include "data/test_files.h"
#include "speech/audio.h"
#include "support/float_file.h"
#include "support/python_script.h"

namespace trainbench::speech {
namespace {

using data::testing::TempDir;
using testing::read_floats;
using testing::write_floats;

std::vector<float> tone(int64_t samples, double hz, double rate = 16000, double amplitude = 1.0) {
  std::vector<float> out(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) out[i] = static_cast<float>(amplitude * std::sin(2 * M_PI * hz * i / rate));
  return out;
}

// Speed perturbation's rate as the reference's pipeline forms it: 16000 * speed in float32.
double speed_rate(double speed) { return static_cast<float>(16000 * speed); }

TEST(SpeechAudio, DaliResamplePlacesOutputJAtInputJTimesTheRateRatio) {
  const std::vector<float> signal = tone(4000, 300, 16000, 0.5);
  // 16 kHz to 12.8 kHz: output j sits at input 1.25 j (no half-sample shift), so every fourth output is an
  // input sample (the window is 1 at 0 and about 0 at the other integers), and there are ceil(n * 0.8).
  const std::vector<float> out = dali_resample(signal, 16000, 12800);
  ASSERT_EQ(out.size(), 3200u);
  for (size_t j = 0; j < out.size(); j += 4) ASSERT_NEAR(out[j], signal[j / 4 * 5], 1e-6) << "output " << j;
  // ceil: 1001 samples at 0.85 give 850.85, so 851 outputs; equal rates copy.
  EXPECT_EQ(dali_resample(std::vector<float>(1001, 0.0f), 16000, 13600).size(), 851u);
  EXPECT_EQ(dali_resample(signal, 16000, 16000), signal);
  // A 440 Hz tone resampled by s is, played at the original rate, a tone of 440 / s Hz (s > 1: slower speech).
  const std::vector<float> a = tone(16000, 440);
  for (const double speed : {0.85, 1.15}) {
    const std::vector<float> slower = dali_resample(a, 16000, speed_rate(speed));
    EXPECT_EQ(slower.size(), static_cast<size_t>(std::ceil(16000 * speed_rate(speed) / 16000)));
    double worst = 0;
    for (size_t j = 400; j + 400 < slower.size(); ++j)
      worst = std::max(worst, std::abs(slower[j] - std::sin(2 * M_PI * 440 * 16000 / speed_rate(speed) * j / 16000.0)));
    EXPECT_LT(worst, 2e-3) << "speed " << speed;
  }
}

TEST(SpeechAudio, DaliResampleKeepsWhatLiesAboveTheNewNyquistFrequency) {
  // DALI's filter is the same at every ratio (its cutoff stays at the input's 8 kHz): a 7 kHz tone resampled
  // by 0.85 (new Nyquist frequency 6.8 kHz) comes out as its alias at 13.6 - 7 = 6.6 kHz at nearly full
  // strength.
  const std::vector<float> high = tone(16000, 7000);
  const std::vector<float> out = dali_resample(high, 16000, 13600);
  double energy = 0, alias = 0;
  for (size_t j = 400; j + 400 < out.size(); ++j) {
    energy += out[j] * out[j];
    alias -= out[j] * std::sin(2 * M_PI * (13600 - 7000) * j / 13600.0);  // sin(2 pi 7000 j / 13600) = -sin(2 pi 6600 j / 13600)
  }
  EXPECT_GT(energy / static_cast<double>(out.size() - 800), 0.45);
  EXPECT_GT(alias / static_cast<double>(out.size() - 800), 0.45);
  // The window's taps sum to 1: a constant stays constant away from the ends, where the taps beyond the
  // signal are left out.
  const std::vector<float> flat = dali_resample(std::vector<float>(8000, 0.25f), 16000, speed_rate(1.07));
  for (size_t j = 40; j + 40 < flat.size(); ++j) ASSERT_NEAR(flat[j], 0.25, 1e-4) << "output " << j;
}

TEST(SpeechAudio, DaliResampleMatchesAnIndependentNumpyModel) {
  TempDir dir;
  data::Rng rng(11);
  std::vector<float> noise(11200);
  for (float& v : noise) v = static_cast<float>(rng.uniform(-0.5, 0.5));
  const Audio utterance =
      read_audio("/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav", 16000);
  const std::vector<std::pair<std::string, std::vector<float>>> signals = {
      {"tone", tone(16000, 440, 16000, 0.6)}, {"noise", noise}, {"speech", utterance.samples}};
  struct Case {
    std::string name;
    const std::vector<float>* input;
    double in_rate, out_rate;
  };
  std::vector<Case> cases;
  for (const auto& [name, samples] : signals)
    for (const double speed : {0.85, 1.0, 1.15, 0.9137})
      cases.push_back({name + "_" + std::to_string(cases.size()), &samples, 16000, speed_rate(speed)});
  cases.push_back({"voice_22050", &signals[0].second, 22050, 16000});  // another input rate
  std::ofstream list(dir / "cases.txt");
  for (const Case& c : cases) {
    write_floats(dir / (c.name + ".in.f32"), *c.input);
    char rates[64];
    std::snprintf(rates, sizeof rates, "%.17g %.9g", c.in_rate, c.out_rate);
    list << "resample " << c.name << " " << rates << "\n";
  }
  list.close();
  // The model as written, then with a 15-lobe window and with DALI's SSE rounding replaced by truncation: the
  // comparison must tell the last two apart from this resampler.
  const auto largest_difference = [&](const std::string& options) {
    testing::or_throw(testing::run_python_script(TRAINBENCH_DALI_REFERENCE_SCRIPT, dir.path().string() + options));
    double worst = 0;
    for (const Case& c : cases) {
      const std::vector<float> expected = read_floats(dir / (c.name + ".out.f32"));
      const std::vector<float> got = dali_resample(*c.input, c.in_rate, c.out_rate);
      EXPECT_EQ(got.size(), expected.size()) << c.name;
      for (size_t j = 0; j < std::min(got.size(), expected.size()); ++j)
        worst = std::max(worst, static_cast<double>(std::abs(got[j] - expected[j])));
    }
    return worst;
  };
  EXPECT_LT(largest_difference(""), 1e-6);
  EXPECT_GT(largest_difference(" --lobes 15"), 1e-4);
  EXPECT_GT(largest_difference(" --floor"), 1e-4);
}

}  // namespace
}  // namespace trainbench::speech
