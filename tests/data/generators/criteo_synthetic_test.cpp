#include "data/generators/criteo_synthetic.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/criteo.h"
#include "util/atomic_file.h"

namespace trainbench::data {
namespace {

namespace fs = std::filesystem;

CriteoSyntheticOptions small_options(uint64_t seed) {
  CriteoSyntheticOptions options;
  options.days = 3;
  options.samples_per_day = 4000;
  options.eval_samples = 3000;
  options.cardinalities = {50, 40, 30, 20, 10, 3, 8, 6, 5, 45, 35, 25, 2, 7, 12, 4, 2, 9, 3, 48, 33, 22, 11, 6, 4, 2};
  options.seed = seed;
  return options;
}

class CriteoSynthetic : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_criteo_synthetic_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CriteoSynthetic, DeterministicForASeedAndDifferentForAnother) {
  const auto a = make_criteo_synthetic((dir_ / "a").string(), small_options(5));
  const auto b = make_criteo_synthetic((dir_ / "b").string(), small_options(5));
  const auto c = make_criteo_synthetic((dir_ / "c").string(), small_options(6));
  for (const char* file : {"day_0", "day_1", "day_2", "planted.json"})
    EXPECT_EQ(read_file((dir_ / "a" / file).string()), read_file((dir_ / "b" / file).string())) << file;
  EXPECT_NE(read_file((dir_ / "a" / "day_0").string()), read_file((dir_ / "c" / "day_0").string()));
  EXPECT_EQ(a.eval_auc_ceiling, b.eval_auc_ceiling);
  EXPECT_EQ(a.train_samples, 8000);
  EXPECT_EQ(a.eval_samples, 3000);
  EXPECT_FALSE(fs::exists(dir_ / "a" / "day_0.partial"));
  EXPECT_NE(a.eval_auc_ceiling, c.eval_auc_ceiling);
  const std::string text = read_file((dir_ / "a" / "day_0").string());
  EXPECT_NE(text.find("\t\t"), std::string::npos);  // empty fields
  EXPECT_NE(text.find("\t0000000"), std::string::npos);  // %08x ids
}

TEST_F(CriteoSynthetic, FilesParseWithEmptyFieldsZipfIdsAndALearnableCeiling) {
  CriteoSyntheticOptions options = small_options(9);
  options.gzip = true;
  const auto summary = make_criteo_synthetic(dir_.string(), options);
  // The planted model separates the classes well but not perfectly.
  EXPECT_GT(summary.eval_auc_ceiling, 0.7);
  EXPECT_LT(summary.eval_auc_ceiling, 0.95);
  EXPECT_GT(summary.eval_positive_rate, 0.1);
  EXPECT_LT(summary.eval_positive_rate, 0.6);
  const auto planted = nlohmann::json::parse(read_file((dir_ / "planted.json").string()));
  EXPECT_EQ(planted.at("eval_auc_ceiling").get<double>(), summary.eval_auc_ceiling);

  CriteoDayReader reader((dir_ / "day_0.gz").string());
  CriteoRow row;
  int64_t rows = 0, id0 = 0, id1 = 0, id_last = 0, negative = 0;
  while (reader.next(row)) {
    ++rows;
    negative += row.dense[1] < 0;
    for (int f = 0; f < kCriteoSparse; ++f) EXPECT_LT(row.sparse[f], static_cast<uint32_t>(options.cardinalities[f]));
    id0 += row.sparse[0] == 0;
    id1 += row.sparse[0] == 1;
    id_last += row.sparse[0] == 49;
  }
  EXPECT_EQ(rows, 4000);
  EXPECT_GT(negative, 0);
  // Zipf: id 0 (also where the empty fields land) is most frequent, then 1, far above the tail.
  EXPECT_GT(id0, id1);
  EXPECT_GT(id1, 4 * id_last);
}

}  // namespace
}  // namespace trainbench::data
