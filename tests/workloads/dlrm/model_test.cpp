#include "workloads/dlrm/model.h"

#include <sys/resource.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/accumulation.h"
#include "support/two_ranks.h"

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
            (std::vector<std::string>{"embeddings", "bottom_mlp_dense1", "bottom_mlp_dense2", "top_mlp_dense1",
                                      "top_mlp_dense2"}));
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
  const auto single_process = parallel::Communicator::connect(parallel::RankEnvironment{});
  parallel::GradientSync mlp_gradients(*single_process, model->mlp_parameters(), {});
  Parallelism parallel(*single_process, mlp_gradients);
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
    for (auto& parameter : model->parameters())
      parameter.set_data(parameter.to(torch::kFloat64));  // not the index buffers
    return model;
  };
  const auto dense = torch::rand({8, 13}, torch::kFloat64);
  const auto sparse = torch::randint(10, {8, 26}, torch::kInt64);
  const auto labels = torch::randint(2, {8}).to(torch::kFloat64);
  const auto single_process = parallel::Communicator::connect(parallel::RankEnvironment{});
  Dlrm model = make_model();
  parallel::GradientSync mlp_gradients(*single_process, model->mlp_parameters(), {});
  Parallelism parallel(*single_process, mlp_gradients);
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

// Table 0 (3000 rows) is more than an even share of all 3000 + 25 small tables' rows over two ranks, so the
// plan cuts it into row ranges; the small ones stay whole.
std::vector<int64_t> tables_with_one_large() {
  std::vector<int64_t> tables(26);
  for (size_t t = 0; t < tables.size(); ++t) tables[t] = 3 + static_cast<int64_t>(t * 7 % 20);
  tables[0] = 3000;
  return tables;
}

// Issue 29's equality: one step of the sharded tables (whole tables and row ranges, all-to-all both ways)
// against the replicated data-parallel step, on two ranks with two micro-batches each, and the evaluation
// forward on ranks holding different numbers of samples.
TEST(DlrmShardedEmbeddings, OneStepAndTheEvaluationEqualTheReplicatedDataParallelPath) {
  const std::vector<int64_t> tables = tables_with_one_large();
  const auto options = [&] {
    return DlrmOptions(tables).embedding_dim(8).bottom_mlp({16, 8}).top_mlp({32, 1}).embedding_seed(5);
  };
  torch::manual_seed(3);
  const int64_t batch = 16;  // 8 per rank
  std::vector<torch::Tensor> columns;
  for (const int64_t rows : tables) columns.push_back(torch::randint(rows, {batch, 1}, torch::kInt64));
  const torch::Tensor sparse = torch::cat(columns, 1), dense = torch::rand({batch, 13}),
                      labels = torch::randint(2, {batch}).to(torch::kFloat32);
  const ShardPlan plan = plan_table_shards(tables, 2);
  // Built here, not in the ranks' threads: the MLPs draw from the process-wide generator.
  std::vector<Dlrm> replicated, sharded;
  for (int rank = 0; rank < 2; ++rank) {
    torch::manual_seed(11);
    replicated.push_back(Dlrm(options()));
    torch::manual_seed(11);
    sharded.push_back(Dlrm(options().shards(plan.on_rank(rank))));
  }
  struct Outcome {
    double loss = 0;
    torch::Tensor logits_before, logits_after;
  };
  const Config config = testing::step_config(2);
  const auto train = [&](std::vector<Dlrm>& models, std::optional<ShardPlan> sharding) {
    std::vector<Outcome> outcomes(2);
    const std::vector<std::string> failures = testing::run_two_ranks([&](parallel::Communicator& communicator) {
      const int rank = communicator.rank();
      Dlrm model = models[static_cast<size_t>(rank)];
      parallel::GradientSync mlp_gradients(communicator, model->mlp_parameters(), {});
      Parallelism parallel(communicator, mlp_gradients, sharding);
      TrainingLoop loop(config, torch::kCPU, model->mlp_parameters(), &mlp_gradients);
      const auto mine = [&](const torch::Tensor& rows) { return rows.narrow(0, 8 * rank, 8); };
      // Evaluation with 5 samples on rank 0 and 3 on rank 1.
      const auto evaluate = [&] {
        torch::NoGradGuard no_grad;
        const int64_t first = rank == 0 ? 0 : 5, count = rank == 0 ? 5 : 3;
        return click_logits(model, parallel, dense.narrow(0, first, count), sparse.narrow(0, first, count));
      };
      Outcome& outcome = outcomes[static_cast<size_t>(rank)];
      outcome.logits_before = evaluate();
      outcome.loss = loop.update(training_step(model, parallel, loop, mine(dense), mine(sparse), mine(labels), 0.5));
      outcome.logits_after = evaluate();
    });
    EXPECT_EQ(failures, (std::vector<std::string>{"", ""}));
    return outcomes;
  };
  // The sharded ranks start from the replicated tables' very rows.
  std::vector<int64_t> table_offsets{0};
  for (const int64_t rows : tables) table_offsets.push_back(table_offsets.back() + rows);
  const auto replicated_rows = [&](const Dlrm& model, const TableShard& shard) {
    return model->embeddings.narrow(0, table_offsets[static_cast<size_t>(shard.table)] + shard.first_row, shard.rows);
  };
  for (int rank = 0; rank < 2; ++rank)
    for (size_t s = 0; s < sharded[static_cast<size_t>(rank)]->shards().size(); ++s) {
      const TableShard& shard = sharded[static_cast<size_t>(rank)]->shards()[s];
      EXPECT_TRUE(torch::equal(sharded[static_cast<size_t>(rank)]->embeddings.narrow(
                                   0, sharded[static_cast<size_t>(rank)]->shard_offsets()[s], shard.rows),
                               replicated_rows(replicated[0], shard)));
    }
  const torch::Tensor initial_table = replicated[0]->embeddings.clone();

  const std::vector<Outcome> data_parallel = train(replicated, std::nullopt);
  const std::vector<Outcome> model_parallel = train(sharded, plan);
  const auto expect_close = [](const torch::Tensor& actual, const torch::Tensor& expected, const std::string& what) {
    ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
    EXPECT_TRUE(torch::allclose(actual, expected, 1e-5, 1e-7)) << what << ": max difference "
                                                               << (actual - expected).abs().max().item<double>();
  };
  for (int rank = 0; rank < 2; ++rank) {
    const auto r = static_cast<size_t>(rank);
    EXPECT_NEAR(model_parallel[r].loss, data_parallel[r].loss, 1e-5 * std::abs(data_parallel[r].loss))
        << "rank " << rank;
    expect_close(model_parallel[r].logits_before, data_parallel[r].logits_before,
                 "logits before the step, rank " + std::to_string(rank));
    expect_close(model_parallel[r].logits_after, data_parallel[r].logits_after,
                 "logits after the step, rank " + std::to_string(rank));
    const auto mlp = sharded[r]->mlp_parameters(), reference_mlp = replicated[r]->mlp_parameters();
    for (size_t p = 0; p < mlp.size(); ++p)
      expect_close(mlp[p], reference_mlp[p], "MLP parameter " + std::to_string(p));
    for (size_t s = 0; s < sharded[r]->shards().size(); ++s) {
      const TableShard& shard = sharded[r]->shards()[s];
      expect_close(sharded[r]->embeddings.narrow(0, sharded[r]->shard_offsets()[s], shard.rows),
                   replicated_rows(replicated[0], shard),
                   "table " + std::to_string(shard.table) + " rows from " + std::to_string(shard.first_row));
    }
  }
  EXPECT_TRUE(torch::equal(replicated[0]->embeddings, replicated[1]->embeddings))
      << "the replicated tables drifted apart";
  EXPECT_FALSE(torch::equal(replicated[0]->embeddings, initial_table)) << "the step moved no row";
}

}  // namespace
}  // namespace trainbench::dlrm
