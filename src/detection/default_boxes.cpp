#include "detection/default_boxes.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace trainbench::detection {

int DefaultBoxGeometry::boxes_per_location(size_t level) const {
  return 2 + 2 * static_cast<int>(aspect_ratios.at(level).size());
}

int DefaultBoxGeometry::total_boxes() const {
  int total = 0;
  for (size_t level = 0; level < feature_sizes.size(); ++level)
    total += boxes_per_location(level) * feature_sizes[level] * feature_sizes[level];
  return total;
}

void DefaultBoxGeometry::check(const std::string& where) const {
  const size_t levels = feature_sizes.size();
  if (levels == 0) fail(where + ".feature_sizes", "expected at least one feature level");
  if (steps.size() != levels || aspect_ratios.size() != levels || scales.size() != levels + 1)
    fail(where, "expected one step and one aspect-ratio list per feature level and one scale more (" +
                    std::to_string(levels) + " levels; got " + std::to_string(steps.size()) + " steps, " +
                    std::to_string(aspect_ratios.size()) + " aspect-ratio lists, " + std::to_string(scales.size()) +
                    " scales)");
  if (!(figure_size > 0)) fail(where + ".figure_size", "expected a positive number");
  for (size_t level = 0; level < levels; ++level) {
    if (feature_sizes[level] <= 0) fail(where + ".feature_sizes", "expected positive sizes");
    if (!(steps[level] > 0)) fail(where + ".steps", "expected positive steps");
    for (double ratio : aspect_ratios[level])
      if (!(ratio > 0)) fail(where + ".aspect_ratios", "expected positive ratios");
  }
  for (double scale : scales)
    if (!(scale > 0)) fail(where + ".scales", "expected positive scales");
}

DefaultBoxGeometry ssd300_geometry() {
  return {300, {38, 19, 10, 5, 3, 1}, {8, 16, 32, 64, 100, 300}, {21, 45, 99, 153, 207, 261, 315},
          {{2}, {2, 3}, {2, 3}, {2, 3}, {2}, {2}}};
}

std::vector<float> default_boxes_xywh(const DefaultBoxGeometry& geometry) {
  geometry.check("default boxes");
  std::vector<float> boxes;
  boxes.reserve(size_t(geometry.total_boxes()) * 4);
  for (size_t level = 0; level < geometry.feature_sizes.size(); ++level) {
    const double fk = geometry.figure_size / geometry.steps[level];
    const double sk1 = geometry.scales[level] / geometry.figure_size;
    const double sk3 = std::sqrt(sk1 * geometry.scales[level + 1] / geometry.figure_size);
    std::vector<std::pair<double, double>> sizes{{sk1, sk1}, {sk3, sk3}};
    for (double ratio : geometry.aspect_ratios[level]) {
      const double w = sk1 * std::sqrt(ratio), h = sk1 / std::sqrt(ratio);
      sizes.emplace_back(w, h);
      sizes.emplace_back(h, w);
    }
    const int f = geometry.feature_sizes[level];
    for (const auto& [w, h] : sizes)
      for (int i = 0; i < f; ++i)
        for (int j = 0; j < f; ++j)
          for (double value : {(j + 0.5) / fk, (i + 0.5) / fk, w, h})
            boxes.push_back(std::clamp(static_cast<float>(value), 0.0f, 1.0f));
  }
  return boxes;
}

}  // namespace trainbench::detection
