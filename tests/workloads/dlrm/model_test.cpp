#include "workloads/dlrm/model.h"

#include <sys/resource.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/accumulation.h"

namespace trainbench::dlrm {
namespace {

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

TEST(DlrmModel, ShapesNamesAndTheInteractionWidth) {
  Dlrm model(DlrmOptions(std::vector<int64_t>(26, 10)).embedding_dim(8).bottom_mlp({16, 8}).top_mlp({32, 1}));
  const auto dense = torch::rand({5, 13});
  const auto sparse = torch::randint(10, {5, 26}, torch::kInt64);
  EXPECT_EQ(model->forward(dense, sparse).sizes(), (std::vector<int64_t>{5}));
  EXPECT_EQ(model->initialized_tensor_names(),
            (std::vector<std::string>{"embeddings", "bottom_mlp_dense1", "bottom_mlp_dense2", "top_mlp_dense1", "top_mlp_dense2"}));
  // 27 vectors -> 351 pairwise dots, plus the 8-wide bottom output: the top MLP sees 359 inputs.
  EXPECT_EQ(model->forward_macs(), 13 * 16 + 16 * 8 + 359 * 32 + 32 * 1 + 27 * 27 * 8);
  EXPECT_EQ(model->embeddings.size(0), 260);
}

TEST(DlrmModel, ReferenceV11ModelHasTheRulesTensorNames) {
  // Small tables, reference dims: the names do not depend on table sizes.
  Dlrm model(DlrmOptions(std::vector<int64_t>(26, 2)));
  const auto names = model->initialized_tensor_names();
  EXPECT_EQ(names.size(), 9u);
  EXPECT_EQ(names[3], "bottom_mlp_dense3");
  EXPECT_EQ(names[8], "top_mlp_dense5");
}

TEST(DlrmModel, SparseUpdateTouchesOnlyTheLookedUpRowsInPlaceWithoutATableSizedGradient) {
  // One 1M-row table (64 MB): a dense gradient or a copy of it would raise the peak RSS by as much.
  std::vector<int64_t> tables(26, 4);
  tables[0] = 1'000'000;
  Dlrm model(DlrmOptions(tables).embedding_dim(16).bottom_mlp({32, 16}).top_mlp({32, 1}));
  const int64_t table_bytes = model->embeddings.numel() * 4;
  const auto before = model->embeddings.clone();
  const void* storage = model->embeddings.data_ptr();
  const auto dense = torch::rand({64, 13});
  auto sparse = torch::randint(4, {64, 26}, torch::kInt64);
  sparse.select(1, 0).copy_(torch::randint(1000, {64}, torch::kInt64) * 999);  // rows spread over the table
  const auto labels = torch::randint(2, {64}).to(torch::kFloat32);
  const int64_t rss_before = peak_rss_bytes();  // the table and its copy `before` are resident
  const auto single_process = dist::Communicator::connect(dist::RankEnvironment{});
  dist::GradientSync mlp_gradients(*single_process, model->mlp_parameters(), {});
  DataParallel parallel{*single_process, mlp_gradients};
  const Config step_config = testing::step_config(1);
  TrainingLoop loop(step_config, torch::kCPU, model->mlp_parameters(), &mlp_gradients);
  for (int step = 0; step < 3; ++step) loop.update(training_step(model, parallel, loop, dense, sparse, labels, 0.5));
  EXPECT_LT(peak_rss_bytes() - rss_before, table_bytes / 4) << "a table-sized buffer was allocated";

  EXPECT_EQ(model->embeddings.data_ptr(), storage);  // updated in place
  EXPECT_FALSE(model->embeddings.grad().defined());
  EXPECT_FALSE(model->embeddings.requires_grad());
  const auto touched = torch::zeros({model->embeddings.size(0)}, torch::kBool);
  touched.index_fill_(0, sparse.select(1, 0), true);
  for (int t = 1; t < 26; ++t) touched.index_fill_(0, sparse.select(1, t) + 1'000'000 + 4 * (t - 1), true);
  const auto untouched = touched.logical_not();
  EXPECT_TRUE(torch::equal(model->embeddings.index({untouched}), before.index({untouched})));
  EXPECT_TRUE(model->embeddings.index({touched}).ne(before.index({touched})).any(1).all().item<bool>());
  // 64 samples touch every row of the 4-row tables (all but certainly) and <= 64 rows of the large one.
  EXPECT_EQ(touched.sum().item<int64_t>(), std::get<0>(at::_unique(sparse.select(1, 0))).numel() + 25 * 4);
}

TEST(DlrmLrSchedule, WarmupHoldPolynomialDecayAndFloorLikeTheReference) {
  const DlrmLrSchedule schedule{2.0, 4, 10, 4};
  const std::vector<double> expected{0.5, 1.0, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5,  // warmup, hold at (W-1)/W
                                     2.0, 1.125, 0.5, 0.125,                       // 2 * ((4 - k) / 4)^2
                                     0.125, 0.125};                                 // held at the last rate
  for (size_t step = 0; step < expected.size(); ++step) EXPECT_DOUBLE_EQ(schedule.at(step), expected[step]) << step;
  EXPECT_DOUBLE_EQ((DlrmLrSchedule{1.0, 0, 0, 0}.at(100)), 1.0);
  EXPECT_DOUBLE_EQ((DlrmLrSchedule{1e-3, 0, 0, 100000}.at(99998)), 1e-7);  // floored
}

// BCE is a mean over samples: K micro-batches give the MLPs' full-batch gradient, and the update applies every
// micro-batch's looked-up rows as one full-batch step does.
TEST(DlrmModel, AccumulatedMicroBatchesGiveTheFullBatchsGradientAndUpdate) {
  torch::manual_seed(10);
  const auto make_model = [] {
    torch::manual_seed(11);
    Dlrm model(DlrmOptions(std::vector<int64_t>(26, 10)).embedding_dim(8).bottom_mlp({16, 8}).top_mlp({32, 1}));
    for (auto& parameter : model->parameters()) parameter.set_data(parameter.to(torch::kFloat64));  // not the index buffers
    return model;
  };
  const auto dense = torch::rand({8, 13}, torch::kFloat64);
  const auto sparse = torch::randint(10, {8, 26}, torch::kInt64);
  const auto labels = torch::randint(2, {8}).to(torch::kFloat64);
  const auto single_process = dist::Communicator::connect(dist::RankEnvironment{});
  Dlrm model = make_model();
  dist::GradientSync mlp_gradients(*single_process, model->mlp_parameters(), {});
  DataParallel parallel{*single_process, mlp_gradients};
  const Config one = testing::step_config(1);
  TrainingLoop loop(one, torch::kCPU, model->mlp_parameters(), nullptr);
  testing::expect_accumulation_matches_full_batch(
      *model, [&] { return training_step(model, parallel, loop, dense, sparse, labels, 0.5); });

  std::vector<torch::Tensor> tables;
  for (const int64_t steps : {1, 4}) {
    Dlrm trained = make_model();
    const Config config = testing::step_config(steps);
    TrainingLoop steps_loop(config, torch::kCPU, trained->mlp_parameters(), nullptr);
    steps_loop.update(training_step(trained, parallel, steps_loop, dense, sparse, labels, 0.5));
    tables.push_back(trained->embeddings.clone());
  }
  EXPECT_TRUE(torch::allclose(tables[1], tables[0], 1e-10, 1e-12));
  EXPECT_FALSE(torch::equal(tables[0], make_model()->embeddings)) << "the update moved no row";
}

}  // namespace
}  // namespace trainbench::dlrm
