#include "data/auc.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "util/error.h"

namespace trainbench::data {

void AucAccumulator::add(const float* scores, const float* labels, int64_t count) {
  scores_.insert(scores_.end(), scores, scores + count);
  for (int64_t i = 0; i < count; ++i) labels_.push_back(labels[i] > 0.5f ? 1 : 0);
}

void AucAccumulator::clear() {
  scores_.clear();
  labels_.clear();
}

double AucAccumulator::auc() const {
  const int64_t positives = std::count(labels_.begin(), labels_.end(), uint8_t{1});
  const int64_t negatives = size() - positives;
  if (positives == 0 || negatives == 0)
    fail("AUC", "undefined: the " + std::to_string(size()) + " evaluated samples are all " +
                    (positives == 0 ? "negative" : "positive"));
  std::vector<int64_t> order(scores_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores_[a] < scores_[b]; });
  // Walk groups of equal score in ascending order: each positive beats every negative below its group
  // and ties with the negatives inside it.
  double wins = 0;  // in units of 1/2, kept integral until the end
  int64_t negatives_below = 0;
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    int64_t group_positives = 0, group_negatives = 0;
    while (end < order.size() && scores_[order[end]] == scores_[order[begin]]) {
      (labels_[order[end]] ? group_positives : group_negatives) += 1;
      ++end;
    }
    wins += static_cast<double>(group_positives) * (2.0 * negatives_below + group_negatives);
    negatives_below += group_negatives;
    begin = end;
  }
  return wins / (2.0 * static_cast<double>(positives) * static_cast<double>(negatives));
}

}  // namespace trainbench::data
