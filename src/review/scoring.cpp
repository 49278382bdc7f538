#include "review/scoring.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace trainbench::review {

OlympicScore olympic_score(const std::vector<RunTime>& runs, int drop_each_side) {
  OlympicScore score;
  score.runs = static_cast<int>(runs.size());
  score.drop_each_side = drop_each_side;
  std::vector<double> minutes;
  for (const auto& run : runs) {
    if (run.converged) {
      minutes.push_back(run.minutes);
    } else {
      ++score.non_converged;
      minutes.push_back(std::numeric_limits<double>::infinity());
    }
  }
  if (score.non_converged > drop_each_side || score.runs <= 2 * drop_each_side) return score;
  std::sort(minutes.begin(), minutes.end());
  const auto first = minutes.begin() + drop_each_side;
  const auto last = minutes.end() - drop_each_side;
  score.mean_minutes = std::accumulate(first, last, 0.0) / static_cast<double>(last - first);
  return score;
}

}  // namespace trainbench::review
