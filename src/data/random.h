#pragma once
// A small PRNG written out by hand (xoshiro256** seeded through splitmix64) instead of <random>: the
// standard engines are portable but the distributions are not, so std::uniform_real_distribution can give
// different augmentations for the same seed on another standard library. Everything here is fixed integer
// arithmetic plus one exactly specified int->double conversion, so a seed means the same stream everywhere.
#include <cstdint>

namespace trainbench::data {

// One splitmix64 step: a strong 64-bit mixer, also used to hash several values into one seed.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Combines values into one seed, so that e.g. (seed, epoch, position) gives independent streams.
inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  uint64_t state = a;
  uint64_t h = splitmix64(state);
  state = h ^ b;
  h = splitmix64(state);
  state = h ^ c;
  h = splitmix64(state);
  state = h ^ d;
  return splitmix64(state);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& word : state_) word = splitmix64(seed);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits (exactly representable, so no rounding differences).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double low, double high) { return low + (high - low) * uniform(); }

  // Uniform integer in [0, bound) without modulo bias (Lemire's multiply-and-reject). bound must be > 0.
  uint64_t below(uint64_t bound) {
    unsigned __int128 product = static_cast<unsigned __int128>(next_u64()) * bound;
    auto low = static_cast<uint64_t>(product);
    if (low < bound) {
      const uint64_t threshold = -bound % bound;
      while (low < threshold) {
        product = static_cast<unsigned __int128>(next_u64()) * bound;
        low = static_cast<uint64_t>(product);
      }
    }
    return static_cast<uint64_t>(product >> 64);
  }

  // Uniform integer in [low, high] (both inclusive).
  int64_t uniform_int(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(below(static_cast<uint64_t>(high - low) + 1));
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace trainbench::data
