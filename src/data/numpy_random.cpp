#include "data/numpy_random.h"

namespace trainbench::data {

uint64_t NumpyRandomState::interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
  uint64_t value;
  if (max <= 0xffffffffULL) {
    do value = next_uint32() & mask;
    while (value > max);
  } else {
    do {
      const uint64_t high = next_uint32();  // numpy's mt19937_next64: the first draw is the high word
      value = ((high << 32) | next_uint32()) & mask;
    } while (value > max);
  }
  return value;
}

std::vector<int64_t> NumpyRandomState::permutation(int64_t n) {
  std::vector<int64_t> values(static_cast<size_t>(n > 0 ? n : 0));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i);
  shuffle(values);
  return values;
}

}  // namespace trainbench::data
