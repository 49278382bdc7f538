// BERT under a 3-D parallel plan (workloads/bert/model_parallel.h, docs/parallelism.md): one whole update at
// each layout — loss, every gradient and every weight after LAMB — equals the one-rank update, with dropout on;
// the schedules agree; a split model's export is the one-rank export; and plans that do not fit are refused by
// the setting's name. Ranks are threads of this process over Gloo.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/error_message.h"
#include "support/two_ranks.h"
#include "workloads/bert/model_parallel.h"
#include "workloads/bert/trainer.h"
#include "workloads/registry.h"

namespace trainbench::bert {
namespace {

struct Layout {
  int tensor = 1, pipeline = 1, data = 1;
  std::string schedule = "1f1b";
  int chunks = 1;
};

// What one rank holds after the update.
struct RankState {
  parallel::PlanCoordinates at;
  double loss = 0;
  std::map<std::string, torch::Tensor> gradients, weights;
};

WorkloadSettings tiny_settings(const Layout& layout) {
  const std::vector<std::string> overrides = {"tensor_parallel=" + std::to_string(layout.tensor),
                                              "pipeline_parallel=" + std::to_string(layout.pipeline),
                                              "pipeline_schedule=" + layout.schedule,
                                              "virtual_pipeline_stages=" + std::to_string(layout.chunks),
                                              "layers=4",
                                              "gradient_accumulation_steps=2",
                                              "batch_size=16",
                                              "make_vocab_size_divisible_by=100"};
  WorkloadSettings settings;
  settings.config = Config::from_presets("bert", find_workload("bert").presets_json, "tiny", overrides);
  settings.device = "cpu";
  settings.seed = 11;
  return settings;
}

// A batch of 16 sequences of 32 tokens with 5 masked positions each, the same for every rank.
PretrainingBatch test_batch() {
  torch::manual_seed(3);
  data::BertSamples samples;
  samples.seq_length = 32;
  samples.max_predictions = 5;
  const torch::Tensor ids = torch::randint(1000, 30000, {16 * 32}, torch::kInt);
  samples.input_ids.assign(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + ids.numel());
  for (int64_t n = 0; n < 16; ++n) {
    const int64_t length = 20 + n % 12;  // some padding
    for (int64_t i = 0; i < 32; ++i) {
      samples.input_mask.push_back(i < length);
      samples.segment_ids.push_back(i >= length / 2 && i < length);
    }
    for (int64_t k = 0; k < 5; ++k) {
      samples.masked_lm_positions.push_back(static_cast<int32_t>(1 + 3 * k + n % 3));
      samples.masked_lm_ids.push_back(static_cast<int32_t>(2000 + 97 * n + 13 * k));
    }
    samples.next_sentence_labels.push_back(static_cast<int8_t>(n % 2));
  }
  return make_batch(samples, torch::kCPU);
}

std::vector<RankState> train_one_update(const Layout& layout) {
  const int world = layout.tensor * layout.pipeline * layout.data;
  const PretrainingBatch batch = test_batch();
  std::vector<RankState> states(static_cast<size_t>(world));
  const auto failures = testing::run_ranks(world, [&](parallel::Communicator& communicator) {
    const parallel::ParallelContext context{std::shared_ptr<parallel::Communicator>(&communicator, [](auto*) {}),
                                            torch::kCPU};
    BertTrainer trainer(tiny_settings(layout), context, TrainerPurpose::kBench);
    parallel::Communicator& data = trainer.context().data_parallel();
    const int64_t rows = 16 / data.world(), first_row = data.rank() * rows;
    RankState& state = states[static_cast<size_t>(communicator.rank())];
    state.at = trainer.context().coordinates();
    state.loss = trainer.loop().update(trainer.step(batch.rows({first_row, rows, 16}), 1e-3, first_row));
    for (const auto& item : trainer.model()->named_parameters()) {
      state.gradients[item.key()] = item.value().grad().clone();
      state.weights[item.key()] = item.value().detach().clone();
    }
  });
  EXPECT_EQ(failures, std::vector<std::string>(static_cast<size_t>(world)));
  return states;
}

// The whole tensor `name` from the ranks of data-parallel replica 0 that hold it (pipeline stage `stage`): its
// tensor-parallel shards joined, the vocabulary's padding dropped.
torch::Tensor joined(const std::vector<RankState>& states, const Layout& layout, const std::string& name, int stage,
                     bool gradient, int64_t rows) {
  std::vector<torch::Tensor> shards;
  for (const RankState& state : states)
    if (state.at.data == 0 && state.at.pipeline == stage && state.weights.count(name))
      shards.push_back((gradient ? state.gradients : state.weights).at(name));
  if (shards.size() != static_cast<size_t>(layout.tensor)) return {};
  const int64_t dim = tensor_parallel_dim(name);
  torch::Tensor whole = dim >= 0 && layout.tensor > 1 ? torch::cat(shards, dim) : shards[0];
  return dim == 0 ? whole.narrow(0, 0, std::min(rows, whole.size(0))) : whole;
}

void expect_same_update(const Layout& layout, const std::vector<RankState>& split, const RankState& reference) {
  // Each data-parallel replica reports its rows' loss; their mean is the batch's.
  double mean_loss = 0;
  for (const RankState& state : split) mean_loss += state.loss / static_cast<double>(split.size());
  EXPECT_NEAR(mean_loss, reference.loss, 1e-5 * std::abs(reference.loss));
  for (const RankState& state : split)
    if (layout.data == 1) EXPECT_NEAR(state.loss, reference.loss, 1e-5 * std::abs(reference.loss));
  for (const auto& [name, expected_gradient] : reference.gradients) {
    bool found = false;
    for (int stage = 0; stage < layout.pipeline; ++stage) {
      const torch::Tensor gradient = joined(split, layout, name, stage, true, expected_gradient.size(0));
      if (!gradient.defined()) continue;
      found = true;
      // Relative to the tensor's largest gradient, but not below 1e-10: some gradients are 0 but for rounding
      // (the key biases', to which the softmax is blind).
      const double scale = expected_gradient.abs().max().item<double>();
      EXPECT_TRUE(torch::allclose(gradient, expected_gradient, 1e-5, std::max(1e-6 * scale, 1e-10)))
          << name << " (stage " << stage << "): gradients differ by up to "
          << (gradient - expected_gradient).abs().max().item<double>() << " of " << scale;
      const torch::Tensor weight = joined(split, layout, name, stage, false, expected_gradient.size(0));
      EXPECT_TRUE(torch::allclose(weight, reference.weights.at(name), 1e-5, 1e-6))
          << name << " (stage " << stage << "): weights after LAMB differ by up to "
          << (weight - reference.weights.at(name)).abs().max().item<double>();
    }
    EXPECT_TRUE(found) << name << " is held by no rank";
  }
}

class BertUnderAPlan : public ::testing::TestWithParam<Layout> {};

TEST_P(BertUnderAPlan, OneUpdateEqualsTheOneRankUpdate) {
  static const RankState reference = train_one_update({}).front();
  expect_same_update(GetParam(), train_one_update(GetParam()), reference);
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  const Layout& layout = info.param;
  return "tp" + std::to_string(layout.tensor) + "pp" + std::to_string(layout.pipeline) + "dp" +
         std::to_string(layout.data) + (layout.chunks > 1 ? "v" + std::to_string(layout.chunks) : "") +
         (layout.schedule == "gpipe" ? "gpipe" : "");
}

INSTANTIATE_TEST_SUITE_P(Layouts, BertUnderAPlan,
                         ::testing::Values(Layout{2, 1, 1}, Layout{1, 2, 1}, Layout{1, 1, 2}, Layout{2, 2, 2},
                                           Layout{1, 2, 1, "interleaved", 2}),
                         layout_name);

TEST(BertPipelineSchedules, OneForwardOneBackwardGivesGpipesGradientsExactly) {
  const auto gpipe = train_one_update({1, 2, 1, "gpipe"}), one_f_one_b = train_one_update({1, 2, 1, "1f1b"});
  for (size_t rank = 0; rank < gpipe.size(); ++rank)
    for (const auto& [name, gradient] : gpipe[rank].gradients)
      EXPECT_TRUE(torch::equal(gradient, one_f_one_b[rank].gradients.at(name))) << name;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(BertUnderAPlan, TheGatheredExportIsTheOneRankExport) {
  const std::string directory = ::testing::TempDir();
  const std::string whole_path = directory + "/bert_whole.pt", split_path = directory + "/bert_tp2pp2.pt";
  const parallel::ParallelContext alone{parallel::Communicator::connect({}), torch::kCPU};
  BertTrainer(tiny_settings({}), alone, TrainerPurpose::kExport).save_model(whole_path);
  const auto failures = testing::run_ranks(4, [&](parallel::Communicator& communicator) {
    const parallel::ParallelContext context{std::shared_ptr<parallel::Communicator>(&communicator, [](auto*) {}),
                                            torch::kCPU};
    BertTrainer(tiny_settings({2, 2, 1}), context, TrainerPurpose::kExport).save_model(split_path);
  });
  EXPECT_EQ(failures, std::vector<std::string>(4));
  const std::string whole = file_bytes(whole_path);
  EXPECT_GT(whole.size(), 1000000u);
  EXPECT_TRUE(whole == file_bytes(split_path)) << "the tp 2 x pp 2 export differs from the one-rank export";
}

// The dry plan counts without building; every rank's count equals the parameters its split model holds.
TEST(BertPlan, TheDryPlansParameterCountsAreWhatEachRankHolds) {
  for (const Layout& layout : {Layout{2, 2, 1}, Layout{1, 2, 1}, Layout{2, 1, 1}, Layout{1, 1, 1}}) {
    const WorkloadSettings settings = tiny_settings(layout);
    const Settings preset = read_settings<Settings>(settings.config);
    const int world = layout.tensor * layout.pipeline;
    std::vector<int64_t> held(static_cast<size_t>(world));
    const auto failures = testing::run_ranks(world, [&](parallel::Communicator& communicator) {
      const parallel::ParallelContext context{std::shared_ptr<parallel::Communicator>(&communicator, [](auto*) {}),
                                              torch::kCPU};
      BertTrainer trainer(settings, context, TrainerPurpose::kBench);
      int64_t count = 0;
      for (const auto& parameter : trainer.model()->parameters()) count += parameter.numel();
      held[static_cast<size_t>(communicator.rank())] = count;
    });
    EXPECT_EQ(failures, std::vector<std::string>(static_cast<size_t>(world)));
    const parallel::ParallelPlan plan = plan_for(settings.config, preset, world);
    for (int rank = 0; rank < world; ++rank)
      EXPECT_EQ(footprint(preset, plan, parallel::coordinates_of(plan, rank).pipeline, 2, 4).parameters,
                held[static_cast<size_t>(rank)])
          << "rank " << rank << " of " << plan.describe();
  }
}

TEST(BertPlan, PlansThatDoNotFitTheModelAreRefusedByTheSetting) {
  const auto refusal = [](const Layout& layout, int world, const std::vector<std::string>& more = {}) {
    WorkloadSettings settings = tiny_settings(layout);
    std::vector<std::string> overrides = settings.config.overrides();
    overrides.insert(overrides.end(), more.begin(), more.end());
    const Config config = Config::from_presets("bert", find_workload("bert").presets_json, "tiny", overrides);
    return testing::error_message([&] { plan_for(config, read_settings<Settings>(config), world); });
  };
  EXPECT_EQ(refusal({4, 1, 1}, 4), "bert/tiny: heads: 2 is not divisible by tensor_parallel 4");
  EXPECT_EQ(refusal({1, 8, 1}, 8),
            "bert/tiny: layers: 4 is not divisible by pipeline_parallel x virtual_pipeline_stages 8");
  EXPECT_EQ(
      refusal({2, 2, 1}, 6),
      "bert/tiny: tensor_parallel x pipeline_parallel: the world of 6 ranks is not divisible by tensor_parallel 2 x "
      "pipeline_parallel 2");
  EXPECT_EQ(refusal({1, 2, 1, "interleaved", 1}, 2).substr(0, 40), "bert/tiny: virtual_pipeline_stages: the ");
  EXPECT_EQ(refusal({1, 4, 1, "interleaved", 1}, 4, {"virtual_pipeline_stages=1", "layers=8"}).substr(0, 40),
            "bert/tiny: virtual_pipeline_stages: the ");
  EXPECT_EQ(
      refusal({1, 4, 1, "interleaved", 2}, 4, {"layers=8", "gradient_accumulation_steps=2"}),
      "bert/tiny: gradient_accumulation_steps (the micro-batches): 2 is not divisible by pipeline_parallel, as the "
      "interleaved schedule needs 4");
  EXPECT_EQ(refusal({2, 2, 1}, 4), "(no Error thrown)");
}

}  // namespace
}  // namespace trainbench::bert
