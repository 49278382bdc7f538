// GPT-3 under a 3-D parallel plan (workloads/gpt3/trainer.h, docs/parallelism.md): one whole update at each layout
// — loss, every gradient and every weight after gradient clipping and Adam — equals the one-rank update, with
// activation recompute or without; and plans that do not fit are refused by the setting's name. Ranks are threads
// of this process over Gloo.
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "predict/three_d.h"
#include "support/error_message.h"
#include "support/two_ranks.h"
#include "workloads/gpt3/trainer.h"
#include "workloads/registry.h"

namespace trainbench::gpt3 {
namespace {

struct Layout {
  int tensor = 1, pipeline = 1, data = 1;
  std::string schedule = "1f1b";
  int chunks = 1;
  bool recompute = false;
};

struct RankState {
  parallel::PlanCoordinates at;
  double loss = 0, gradient_norm = 0;
  std::map<std::string, torch::Tensor> gradients, weights;
};

Config tiny_config(const Layout& layout, const std::vector<std::string>& more = {}) {
  std::vector<std::string> overrides = {"tensor_parallel=" + std::to_string(layout.tensor),
                                        "pipeline_parallel=" + std::to_string(layout.pipeline),
                                        "pipeline_schedule=" + layout.schedule,
                                        "virtual_pipeline_stages=" + std::to_string(layout.chunks),
                                        "recompute_activations=" + std::string(layout.recompute ? "true" : "false"),
                                        "layers=4",
                                        "gradient_accumulation_steps=2",
                                        "batch_size=8",
                                        "max_grad_norm=0.5"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return Config::from_presets("gpt3", find_workload("gpt3").presets_json, "tiny", overrides);
}

// 8 sequences of 64 tokens, the same for every rank.
torch::Tensor test_sequences() {
  torch::manual_seed(3);
  return torch::randint(0, 1024, {8, 64}, torch::kLong);  // the tiny preset's vocabulary
}

std::vector<RankState> train_one_update(const Layout& layout) {
  const int world = layout.tensor * layout.pipeline * layout.data;
  const TokenBatch batch = TokenBatch::of(test_sequences());
  std::vector<RankState> states(static_cast<size_t>(world));
  const auto failures = testing::run_ranks(world, [&](parallel::Communicator& communicator) {
    const parallel::ParallelContext context{std::shared_ptr<parallel::Communicator>(&communicator, [](auto*) {}),
                                            torch::kCPU};
    WorkloadSettings settings;
    settings.config = tiny_config(layout);
    settings.seed = 11;
    GptTrainer trainer(settings, context, TrainerPurpose::kBench);
    parallel::Communicator& data = trainer.context().data_parallel();
    const int64_t rows = 8 / data.world();
    RankState& state = states[static_cast<size_t>(communicator.rank())];
    state.at = trainer.context().coordinates();
    state.loss = trainer.loop().update(trainer.step(batch.rows({data.rank() * rows, rows, 8}), 1e-3));
    state.gradient_norm = trainer.last_gradient_norm();
    for (const auto& item : trainer.model()->named_parameters()) {
      state.gradients[item.key()] = item.value().grad().clone();
      state.weights[item.key()] = item.value().detach().clone();
    }
  });
  EXPECT_EQ(failures, std::vector<std::string>(static_cast<size_t>(world)));
  return states;
}

// The whole tensor `name` from the ranks of data-parallel replica 0 on pipeline stage `stage`, its
// tensor-parallel shards joined; undefined where that stage does not hold it.
torch::Tensor joined(const std::vector<RankState>& states, const Layout& layout, const std::string& name, int stage,
                     bool gradient) {
  std::vector<torch::Tensor> shards;
  for (const RankState& state : states)
    if (state.at.data == 0 && state.at.pipeline == stage && state.weights.count(name))
      shards.push_back((gradient ? state.gradients : state.weights).at(name));
  if (shards.size() != static_cast<size_t>(layout.tensor)) return {};
  const int64_t dim = tensor_parallel_dim(name);
  return dim >= 0 && layout.tensor > 1 ? torch::cat(shards, dim) : shards[0];
}

void expect_same_update(const Layout& layout, const std::vector<RankState>& split, const RankState& reference) {
  double mean_loss = 0;  // each data-parallel replica reports its rows' loss
  for (const RankState& state : split) mean_loss += state.loss / static_cast<double>(split.size());
  EXPECT_NEAR(mean_loss, reference.loss, 1e-5 * reference.loss);
  for (const RankState& state : split)
    EXPECT_NEAR(state.gradient_norm, reference.gradient_norm, 1e-5 * reference.gradient_norm);
  for (const auto& [whole_name, expected_gradient] : reference.gradients) {
    bool found = false;
    for (int stage = 0; stage < layout.pipeline; ++stage)
      for (const std::string& name : {whole_name, std::string(kHeadWordEmbeddings)}) {
        if (name != whole_name && whole_name != kWordEmbeddings) continue;
        const torch::Tensor gradient = joined(split, layout, name, stage, true);
        if (!gradient.defined()) continue;
        found = true;
        const double scale = expected_gradient.abs().max().item<double>();
        EXPECT_TRUE(torch::allclose(gradient, expected_gradient, 1e-5, std::max(1e-6 * scale, 1e-10)))
            << name << " (stage " << stage << "): gradients differ by up to "
            << (gradient - expected_gradient).abs().max().item<double>() << " of " << scale;
        // Adam moves each element by at most the learning rate (1e-3) in its first step, by the gradient over its
        // own magnitude: rounding in a near-zero gradient shows in its step, so the steps agree to 2% of the rate.
        const torch::Tensor weight = joined(split, layout, name, stage, false);
        EXPECT_TRUE(torch::allclose(weight, reference.weights.at(whole_name), 0, 2e-5))
            << name << " (stage " << stage << "): weights after Adam differ by up to "
            << (weight - reference.weights.at(whole_name)).abs().max().item<double>();
      }
    EXPECT_TRUE(found) << whole_name << " is held by no rank";
  }
}

class GptUnderAPlan : public ::testing::TestWithParam<Layout> {};

TEST_P(GptUnderAPlan, OneUpdateEqualsTheOneRankUpdate) {
  static const RankState reference = train_one_update({}).front();
  expect_same_update(GetParam(), train_one_update(GetParam()), reference);
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  const Layout& layout = info.param;
  return "tp" + std::to_string(layout.tensor) + "pp" + std::to_string(layout.pipeline) + "dp" +
         std::to_string(layout.data) + (layout.chunks > 1 ? "v" + std::to_string(layout.chunks) : "") +
         (layout.recompute ? "recompute" : "");
}

INSTANTIATE_TEST_SUITE_P(Layouts, GptUnderAPlan,
                         ::testing::Values(Layout{1, 1, 1, "1f1b", 1, true}, Layout{2, 1, 1}, Layout{1, 2, 1},
                                           Layout{1, 1, 2}, Layout{2, 2, 1}, Layout{2, 2, 1, "1f1b", 1, true},
                                           Layout{1, 2, 1, "interleaved", 2}),
                         layout_name);

TEST(GptPlan, PlansThatDoNotFitTheModelAreRefusedByTheSetting) {
  const auto refusal = [](const Layout& layout, int world, const std::vector<std::string>& more = {}) {
    const Config config = tiny_config(layout, more);
    return testing::error_message([&] { plan_for(config, read_settings<Settings>(config), world); });
  };
  EXPECT_EQ(refusal({4, 1, 1}, 4), "gpt3/tiny: heads: 2 is not divisible by tensor_parallel 4");
  EXPECT_EQ(refusal({2, 1, 1}, 2, {"ffn_hidden=255"}),
            "gpt3/tiny: ffn_hidden: 255 is not divisible by tensor_parallel 2");
  EXPECT_EQ(refusal({1, 8, 1}, 8),
            "gpt3/tiny: layers: 4 is not divisible by pipeline_parallel x virtual_pipeline_stages 8");
  EXPECT_EQ(refusal({2, 2, 1}, 4), "(no Error thrown)");
}

// The dry plan counts without building; every rank's count equals the parameters its split model holds.
TEST(GptPlan, TheDryPlansParameterCountsAreWhatEachRankHolds) {
  for (const Layout& layout : {Layout{2, 2, 1}, Layout{1, 2, 1}, Layout{2, 1, 1}, Layout{1, 1, 1}}) {
    const Config config = tiny_config(layout);
    const Settings preset = read_settings<Settings>(config);
    const int world = layout.tensor * layout.pipeline;
    std::vector<int64_t> held(static_cast<size_t>(world));
    const auto failures = testing::run_ranks(world, [&](parallel::Communicator& communicator) {
      WorkloadSettings settings;
      settings.config = config;
      GptTrainer trainer(settings, {std::shared_ptr<parallel::Communicator>(&communicator, [](auto*) {}), torch::kCPU},
                         TrainerPurpose::kBench);
      int64_t count = 0;
      for (const auto& parameter : trainer.model()->parameters()) count += parameter.numel();
      held[static_cast<size_t>(communicator.rank())] = count;
    });
    EXPECT_EQ(failures, std::vector<std::string>(static_cast<size_t>(world)));
    const parallel::ParallelPlan plan = plan_for(config, preset, world);
    for (int rank = 0; rank < world; ++rank)
      EXPECT_EQ(footprint(preset, plan, parallel::coordinates_of(plan, rank).pipeline, 2, 4).parameters,
                held[static_cast<size_t>(rank)])
          << "rank " << rank << " of " << plan.describe();
  }
}

// The step's FLOPs by the Megatron paper's formulas, at the reference's size: 72·B·s·l·h²(1 + s/6h + V/12lh).
TEST(GptPlan, StepFlopsFollowTheMegatronPaper) {
  const Config reference = Config::from_presets("gpt3", find_workload("gpt3").presets_json, "reference", {});
  const StepFlops flops = step_flops(read_settings<Settings>(reference), 51200);
  const double b = 1536, s = 2048, l = 96, h = 12288, v = 51200;
  EXPECT_DOUBLE_EQ(flops.model, 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)));
  EXPECT_DOUBLE_EQ(flops.computed, flops.model + 4 * b * s * s * h * l);
  EXPECT_DOUBLE_EQ(flops.full_recompute, 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)));
}

// The dry plan counts with parallel/transformer_cost.h, which the time-to-train prediction shares; at the
// reference's layout it prints what it printed before the arithmetic moved there.
TEST(GptPlan, TheReferencesDryPlanIsUnchanged) {
  const Config reference = Config::from_presets("gpt3", find_workload("gpt3").presets_json, "reference", {});
  std::ostringstream out;
  print_plan(reference, 512, out);
  for (const std::string line :
       {"  stage 0 (each of its 8 tensor-parallel rank(s)): 2822731776 parameters: weights 10.52 GiB, gradients 10.52 "
        "GiB, Adam state 21.03 GiB, activations ~29.25 GiB, total ~71.31 GiB; per step sends tp 441.00 GiB, pp 9.00 "
        "GiB, dp 10.52 GiB, tied embeddings 0.29 GiB\n",
        "  stage 7 (each of its 8 tensor-parallel rank(s)): 2797590528 parameters: weights 10.42 GiB, gradients 10.42 "
        "GiB, Adam state 20.84 GiB, activations ~3.66 GiB, total ~45.34 GiB; per step sends tp 441.00 GiB, pp 9.00 "
        "GiB, dp 10.42 GiB, tied embeddings 0.29 GiB\n",
        "  FLOPs per step: model 3.386e+18, computed 3.417e+18 (6.673e+15 per rank, the core attention recomputed); "
        "with whole layers recomputed 4.511e+18\n",
        "  pipeline bubble (p-1)/(v*m) = 0.0365\n"})
    EXPECT_NE(out.str().find(line), std::string::npos) << line << "\nnot in\n" << out.str();
}

// predict gpt3 models the reference's model.
TEST(GptPlan, ThePredictionsShapeIsTheReferences) {
  const Config reference = Config::from_presets("gpt3", find_workload("gpt3").presets_json, "reference", {});
  const parallel::TransformerShape preset = transformer_shape(read_settings<Settings>(reference));
  const parallel::TransformerShape predicted = predict::gpt3_175b_shape();
  EXPECT_EQ(preset.layers, predicted.layers);
  EXPECT_EQ(preset.hidden, predicted.hidden);
  EXPECT_EQ(preset.heads, predicted.heads);
  EXPECT_EQ(preset.ffn_hidden, predicted.ffn_hidden);
  EXPECT_EQ(preset.seq_length, predicted.seq_length);
  EXPECT_EQ(preset.vocab_size, predicted.vocab_size);
  EXPECT_EQ(preset.make_vocab_size_divisible_by, predicted.make_vocab_size_divisible_by);
  EXPECT_EQ(preset.max_positions, predicted.max_positions);
}

// Megatron's schedule for the reference's global batch, and the mini's own.
TEST(GptLrSchedule, FollowsTheRulesForTheGlobalBatch) {
  const Config reference = Config::from_presets("gpt3", find_workload("gpt3").presets_json, "reference", {});
  const GptLrSchedule rules = lr_schedule(read_settings<Settings>(reference));
  EXPECT_DOUBLE_EQ(rules.base, 2e-5);
  EXPECT_DOUBLE_EQ(rules.end, 2e-6);
  EXPECT_EQ(rules.warmup_steps, 265);
  EXPECT_EQ(rules.decay_steps, 108600);
  EXPECT_EQ(rules.init_checkpoint_step, 4000);
  // Past the warmup at step 4000: cosine from (4000 - 265) / (108600 - 265) of the way.
  const double progress = (4000.0 - 265.0) / (108600.0 - 265.0);
  EXPECT_NEAR(rules.at(0), 2e-6 + 0.5 * (std::cos(M_PI * progress) + 1) * 1.8e-5, 1e-15);
  const Config bigger = Config::from_presets("gpt3", find_workload("gpt3").presets_json, "reference",
                                             {"batch_size=4096", "gradient_accumulation_steps=512"});
  const GptLrSchedule big = lr_schedule(read_settings<Settings>(bigger));
  EXPECT_DOUBLE_EQ(big.base, 3e-5);
  EXPECT_EQ(big.warmup_steps, 100);  // ceil(265 * 1536 / 4096) = ceil(99.375)
  EXPECT_EQ(big.decay_steps, 40725);
  EXPECT_EQ(big.init_checkpoint_step, 1500);
  const GptLrSchedule warmup{1.0, 0.1, 10, 110, 0};
  EXPECT_DOUBLE_EQ(warmup.at(0), 0.0);
  EXPECT_DOUBLE_EQ(warmup.at(5), 0.5);
  EXPECT_DOUBLE_EQ(warmup.at(10), 1.0);
  EXPECT_NEAR(warmup.at(60), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(warmup.at(111), 0.1);
}

}  // namespace
}  // namespace trainbench::gpt3
