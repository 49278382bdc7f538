#include "go/random_evaluator.h"

#include <cmath>

#include "data/random.h"

namespace trainbench::go {

namespace {

constexpr double kPolicyMean = 0.5, kPolicyStddev = 0.4, kValueStddev = 0.4;  // loader.cc's random model

// Box-Muller: one standard normal draw from two uniforms.
double standard_normal(data::Rng& rng) {
  const double u1 = 1.0 - rng.uniform();  // in (0, 1]: log is finite
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * rng.uniform());
}

uint64_t hash_bytes(const uint8_t* bytes, int count, uint64_t seed) {
  uint64_t hash = 0xcbf29ce484222325ULL ^ seed;  // FNV-1a
  for (int i = 0; i < count; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  return hash;
}

}  // namespace

BatchEvaluator random_evaluator(int size, uint64_t seed) {
  const int moves = size * size + 1, feature_size = Position::kPlanes * size * size;
  return [moves, feature_size, seed](int, const uint8_t* features, int batch, float* policy, float* values) {
    for (int b = 0; b < batch; ++b) {
      data::Rng rng(hash_bytes(features + static_cast<size_t>(b) * feature_size, feature_size, seed));
      float* priors = policy + static_cast<size_t>(b) * moves;
      double sum = 0;
      for (int m = 0; m < moves; ++m) {
        priors[m] = static_cast<float>(std::exp(kPolicyMean + kPolicyStddev * standard_normal(rng)));
        sum += priors[m];
      }
      for (int m = 0; m < moves; ++m) priors[m] = static_cast<float>(priors[m] / sum);
      double value = 0;
      do {
        value = kValueStddev * standard_normal(rng);
      } while (value < -1.0 || value > 1.0);
      values[b] = static_cast<float>(value);
    }
  };
}

}  // namespace trainbench::go
