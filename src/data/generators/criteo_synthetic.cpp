#include "data/generators/criteo_synthetic.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "data/auc.h"
#include "data/criteo.h"
#include "data/random.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::data {

namespace {

namespace fs = std::filesystem;

constexpr int kLatentRank = 4;
// The feature pairs whose latent vectors interact (a fixed design: a mix of large and small tables).
constexpr int kInteractingPairs[][2] = {{0, 1}, {0, 10}, {2, 19}, {3, 4}, {11, 20}, {1, 13}};

double normal(Rng& rng) {  // Box-Muller, one value per call (the generator is not speed-critical)
  const double u = 1.0 - rng.uniform();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * rng.uniform());
}

// The hidden model, drawn once from the seed.
struct PlantedModel {
  std::vector<double> dense_mean, dense_weight;
  std::vector<std::vector<double>> id_effect;   // [feature][id]
  std::vector<std::vector<double>> latent;      // [feature][id * rank + k], only for interacting features
  std::vector<std::vector<double>> zipf_cdf;    // [feature][id]

  PlantedModel(const CriteoSyntheticOptions& options, Rng& rng) {
    for (int j = 0; j < kCriteoDense; ++j) {
      dense_mean.push_back(rng.uniform(0.5, 3.0));
      dense_weight.push_back(0.3 * normal(rng));
    }
    id_effect.resize(kCriteoSparse);
    latent.resize(kCriteoSparse);
    zipf_cdf.resize(kCriteoSparse);
    for (int f = 0; f < kCriteoSparse; ++f) {
      const int64_t cardinality = options.cardinalities[f];
      // Two features in three carry an effect; its scale varies by feature.
      const double scale = f % 3 == 2 ? 0.0 : rng.uniform(0.1, 0.45);
      for (int64_t id = 0; id < cardinality; ++id) id_effect[f].push_back(scale * normal(rng));
      double total = 0;
      for (int64_t id = 0; id < cardinality; ++id) {
        total += 1.0 / std::pow(static_cast<double>(id + 1), options.zipf_exponent);
        zipf_cdf[f].push_back(total);
      }
      for (double& value : zipf_cdf[f]) value /= total;
    }
    for (const auto& pair : kInteractingPairs)
      for (const int f : pair)
        if (latent[f].empty())
          for (int64_t i = 0; i < options.cardinalities[f] * kLatentRank; ++i) latent[f].push_back(0.3 * normal(rng));
  }

  int64_t draw_id(int f, Rng& rng) const {
    const auto& cdf = zipf_cdf[f];
    const auto it = std::upper_bound(cdf.begin(), cdf.end(), rng.uniform());
    return std::min<int64_t>(it - cdf.begin(), static_cast<int64_t>(cdf.size()) - 1);
  }
};

// Writes one day file and returns each sample's true probability and label (for the ceiling).
void write_day(const std::string& path, int64_t samples, const CriteoSyntheticOptions& options,
               const PlantedModel& model, Rng& rng, std::vector<float>& probabilities, std::vector<float>& labels) {
  const std::string partial = path + ".partial";
  gzFile file = gzopen(partial.c_str(), options.gzip ? "wb6" : "wT");
  if (!file) fail(partial, std::string("cannot open for writing: ") + std::strerror(errno));
  // A failed write (a full disk) names its reason and leaves no half-written day behind.
  const auto write_failed = [&](const std::string& reason) {
    if (file) gzclose(file);
    std::remove(partial.c_str());
    fail(partial, "write failed: " + reason);
  };
  std::string line;
  char text[32];
  int64_t ids[kCriteoSparse];
  for (int64_t sample = 0; sample < samples; ++sample) {
    double logit = options.bias;
    std::string fields;
    for (int j = 0; j < kCriteoDense; ++j) {
      int64_t value = static_cast<int64_t>(std::floor(std::exp(model.dense_mean[j] + normal(rng)))) - 1;
      if (j == 1 && rng.uniform() < 0.05) value = -1;
      const bool missing = rng.uniform() < options.missing_dense;
      if (missing) value = 0;
      logit += model.dense_weight[j] * (std::log1p(static_cast<double>(std::max<int64_t>(value, 0))) - model.dense_mean[j]);
      fields += '\t';
      if (!missing) fields += std::to_string(value);
    }
    for (int f = 0; f < kCriteoSparse; ++f) {
      const bool missing = rng.uniform() < options.missing_sparse;
      ids[f] = missing ? 0 : model.draw_id(f, rng);
      logit += model.id_effect[f][ids[f]];
      fields += '\t';
      if (!missing) {
        std::snprintf(text, sizeof text, "%08llx", static_cast<unsigned long long>(ids[f]));
        fields += text;
      }
    }
    for (const auto& pair : kInteractingPairs) {
      const double* u = &model.latent[pair[0]][ids[pair[0]] * kLatentRank];
      const double* v = &model.latent[pair[1]][ids[pair[1]] * kLatentRank];
      for (int k = 0; k < kLatentRank; ++k) logit += u[k] * v[k];
    }
    const double probability = 1.0 / (1.0 + std::exp(-logit));
    const int label = rng.uniform() < probability ? 1 : 0;
    probabilities.push_back(static_cast<float>(probability));
    labels.push_back(static_cast<float>(label));
    line = std::to_string(label) + fields + '\n';
    if (gzwrite(file, line.data(), static_cast<unsigned>(line.size())) != static_cast<int>(line.size())) {
      int error = Z_OK;
      const char* message = gzerror(file, &error);  // Z_ERRNO: the message is strerror's
      write_failed(error == Z_ERRNO ? std::strerror(errno) : message);
    }
  }
  const gzFile closing = std::exchange(file, nullptr);
  if (gzclose(closing) != Z_OK) write_failed(std::strerror(errno));
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec) fail(path, "cannot move into place: " + ec.message());
}

}  // namespace

CriteoSyntheticSummary make_criteo_synthetic(const std::string& out_dir, const CriteoSyntheticOptions& options) {
  if (options.cardinalities.size() != kCriteoSparse)
    fail("cardinalities", "expected 26 values, got " + std::to_string(options.cardinalities.size()));
  for (const int64_t cardinality : options.cardinalities)
    if (cardinality < 1 || cardinality > (int64_t{1} << 32)) fail("cardinalities", "each must be in 1 .. 2^32");
  if (options.days < 2) fail("days", "at least 2 (the last day is the eval split)");
  if (options.samples_per_day < 1 || options.eval_samples < 1) fail("samples_per_day, eval_samples", "at least 1 each");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail(out_dir, "cannot create directory: " + ec.message());

  Rng model_rng(mix_seed(options.seed, 0x504c414e));
  const PlantedModel model(options, model_rng);
  CriteoSyntheticSummary summary;
  std::vector<float> probabilities, labels;
  for (int day = 0; day < options.days; ++day) {
    Rng rng(mix_seed(options.seed, 0x444159, static_cast<uint64_t>(day)));
    probabilities.clear();
    labels.clear();
    const std::string name = "day_" + std::to_string(day) + (options.gzip ? ".gz" : "");
    const bool eval_day = day + 1 == options.days;
    const int64_t samples = eval_day ? options.eval_samples : options.samples_per_day;
    write_day((fs::path(out_dir) / name).string(), samples, options, model, rng, probabilities, labels);
    (eval_day ? summary.eval_samples : summary.train_samples) += samples;
  }
  AucAccumulator ceiling;
  ceiling.add(probabilities.data(), labels.data(), static_cast<int64_t>(labels.size()));
  summary.eval_auc_ceiling = ceiling.auc();
  double positives = 0;
  for (const float label : labels) positives += label;
  summary.eval_positive_rate = positives / static_cast<double>(labels.size());

  const nlohmann::ordered_json planted{
      {"note", "AUC of the planted model's true probabilities on the eval split (the last day): the ceiling"},
      {"eval_auc_ceiling", summary.eval_auc_ceiling},
      {"eval_positive_rate", summary.eval_positive_rate},
      {"train_samples", summary.train_samples},
      {"eval_samples", summary.eval_samples},
      {"seed", options.seed},
      {"zipf_exponent", options.zipf_exponent},
      {"cardinalities", options.cardinalities}};
  write_file_atomically((fs::path(out_dir) / "planted.json").string(), planted.dump(2) + "\n");
  return summary;
}

}  // namespace trainbench::data
