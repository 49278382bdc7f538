#pragma once
// numpy's legacy np.random.RandomState, the part Megatron-LM's GPT dataset draws from: seeding from an int and
// shuffle()/permutation() of a 1-D array. Megatron's shuffle index has to be numpy's bit for bit, and no C++
// library reproduces numpy's stream: the engine is the standard's mt19937, which numpy seeds from an int exactly
// as std::mt19937(seed) does (init_genrand), but numpy draws a position in [0, i] by masked rejection
// (random_interval), which no std:: distribution specifies, so the drawing is written out here.
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace trainbench::data {

class NumpyRandomState {
 public:
  // np.random.RandomState(seed) for an int seed (numpy accepts 0 .. 2^32 - 1).
  explicit NumpyRandomState(uint32_t seed) : engine_(seed) {}

  uint32_t next_uint32() { return static_cast<uint32_t>(engine_()); }
  // numpy's random_interval(max): uniform in [0, max], drawn as the low bits under the smallest all-ones mask
  // covering max and redrawn until not above max (32-bit draws while max fits 32 bits, else 64-bit ones).
  uint64_t interval(uint64_t max);

  // RandomState.shuffle of a 1-D array: for i from n - 1 down to 1, swap element i with element interval(i).
  template <typename T>
  void shuffle(T* values, size_t n) {
    for (size_t i = n; i-- > 1;) std::swap(values[i], values[static_cast<size_t>(interval(i))]);
  }
  template <typename T>
  void shuffle(std::vector<T>& values) {
    shuffle(values.data(), values.size());
  }
  // RandomState.permutation(n): arange(n), shuffled.
  std::vector<int64_t> permutation(int64_t n);

 private:
  std::mt19937 engine_;
};

}  // namespace trainbench::data
