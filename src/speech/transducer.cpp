#include "speech/transducer.h"

#include <cmath>
#include <limits>
#include <vector>

#include "util/error.h"

namespace trainbench::speech {

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

double log_add(double a, double b) {
  if (a == kMinusInfinity) return b;
  if (b == kMinusInfinity) return a;
  return a > b ? a + std::log1p(std::exp(b - a)) : b + std::log1p(std::exp(a - b));
}

}  // namespace

double rnnt_negative_log_likelihood(const LatticeView& lattice, float* grad_blank, float* grad_label) {
  const int64_t T = lattice.frames, U = lattice.labels, width = U + 1;
  if (T < 1 || U < 0) fail("rnnt loss", "expected at least one frame and no negative label count");
  const auto blank = [&](int64_t t, int64_t u) { return static_cast<double>(lattice.log_blank[t * lattice.blank_stride + u]); };
  const auto label = [&](int64_t t, int64_t u) { return static_cast<double>(lattice.log_label[t * lattice.label_stride + u]); };
  // alpha(t, u): log-probability of reaching node (t, u); beta(t, u): of finishing from it.
  std::vector<double> alpha(static_cast<size_t>(T * width)), beta(static_cast<size_t>(T * width));
  const auto at = [width](int64_t t, int64_t u) { return static_cast<size_t>(t * width + u); };
  for (int64_t t = 0; t < T; ++t)
    for (int64_t u = 0; u <= U; ++u) {
      if (t == 0 && u == 0) {
        alpha[0] = 0;
        continue;
      }
      const double from_time = t > 0 ? alpha[at(t - 1, u)] + blank(t - 1, u) : kMinusInfinity;
      const double from_label = u > 0 ? alpha[at(t, u - 1)] + label(t, u - 1) : kMinusInfinity;
      alpha[at(t, u)] = log_add(from_time, from_label);
    }
  for (int64_t t = T - 1; t >= 0; --t)
    for (int64_t u = U; u >= 0; --u) {
      if (t == T - 1 && u == U) {
        beta[at(t, u)] = blank(t, u);
        continue;
      }
      const double by_time = t < T - 1 ? beta[at(t + 1, u)] + blank(t, u) : kMinusInfinity;
      const double by_label = u < U ? beta[at(t, u + 1)] + label(t, u) : kMinusInfinity;
      beta[at(t, u)] = log_add(by_time, by_label);
    }
  const double log_likelihood = beta[0];
  if (grad_blank != nullptr && grad_label != nullptr) {
    // d(-log P)/d(log p) of an edge = -(probability that the path takes the edge).
    for (int64_t t = 0; t < T; ++t)
      for (int64_t u = 0; u <= U; ++u) {
        const double alpha_here = alpha[at(t, u)];
        const double after_blank = t < T - 1 ? beta[at(t + 1, u)] : (u == U ? 0.0 : kMinusInfinity);
        grad_blank[t * lattice.blank_stride + u] =
            static_cast<float>(-std::exp(alpha_here + blank(t, u) + after_blank - log_likelihood));
        if (u < U)
          grad_label[t * lattice.label_stride + u] =
              static_cast<float>(-std::exp(alpha_here + label(t, u) + beta[at(t, u + 1)] - log_likelihood));
      }
  }
  return -log_likelihood;
}

}  // namespace trainbench::speech
