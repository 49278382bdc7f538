#pragma once
// The RNN-T loss on one utterance's lattice (Graves 2012, as warp-transducer computes it), in log space with
// double accumulators so long utterances, whose path probabilities underflow any float, stay exact.
// The caller supplies the two log-probabilities the lattice needs at each node (t, u): emitting blank, and
// emitting the next label y[u]. Gradients with respect to those two arrays are exact; the caller chains them
// through the log-softmax (LibTorch's autograd does that in the workload).
#include <cstdint>

namespace trainbench::speech {

struct LatticeView {
  int64_t frames = 0;  // T >= 1
  int64_t labels = 0;  // U >= 0
  // log P(blank | t, u) at log_blank[t * blank_stride + u] for t < T, u <= U.
  const float* log_blank = nullptr;
  int64_t blank_stride = 0;
  // log P(y[u] | t, u) at log_label[t * label_stride + u] for t < T, u < U.
  const float* log_label = nullptr;
  int64_t label_stride = 0;
};

// Returns -log P(y | x). When grad_blank / grad_label are not null, writes d(-log P)/d(log_blank) and
// d(-log P)/d(log_label) at the same positions (entries outside T x (U+1) / T x U are left untouched).
double rnnt_negative_log_likelihood(const LatticeView& lattice, float* grad_blank, float* grad_label);

}  // namespace trainbench::speech
