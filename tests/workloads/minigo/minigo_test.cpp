// MiniGo's network and loss against an independent python3-torch computation (two momentum-SGD steps), the
// 48 weights_initialization names of the v1.1 rules, the batched inference MCTS uses, the reference preset's
// start from a prepared bootstrap with each generation trained on the previous one's games, the typed settings,
// the settings refused by name before a run's first block, and the quality gate:
// the tiny preset's loop (self-play, training, evaluation against its target after training) reaches a 50%
// win rate through run_benchmark and its log passes the project's v1.1 review.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/accumulation.h"
#include "support/quality_gate.h"
#include "support/error_message.h"
#include "support/python_script.h"
#include "support/torch_pickle.h"
#include "support/typed_settings.h"
#include "workloads/minigo/model.h"
#include "workloads/minigo/settings.h"

namespace trainbench::minigo {
namespace {

namespace fs = std::filesystem;

using testing::load_dict;
using testing::save_dict;

TEST(MinigoParity, TwoMomentumStepsMatchAnIndependentPyTorchImplementation) {
  torch::manual_seed(9);
  const auto options = MinigoNetOptions().board_size(5).filters(8).trunk_blocks(2).fc_width(6);
  MinigoNet net(options);
  const int64_t batch = 6, points = 25;
  const auto planes = torch::randint(2, {batch, 13, 5, 5}, torch::kUInt8);
  const auto pi = torch::softmax(torch::randn({batch, points + 1}) * 2, 1);
  const auto outcome = torch::tensor({1, -1, 1, 1, -1, -1}, torch::kFloat32);
  const double value_weight = 0.5, l2 = 0.01, momentum = 0.9;
  const PiecewiseLr schedule{{0.05, 0.2, 0.01}, {0, 20}};

  const fs::path dir = fs::temp_directory_path() / ("trainbench_minigo_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  c10::Dict<std::string, torch::Tensor> inputs;
  for (const auto& item : net->named_parameters()) inputs.insert("state." + item.key(), item.value().detach().clone());
  for (const auto& item : net->named_buffers()) inputs.insert("state." + item.key(), item.value().clone());
  inputs.insert("planes", planes);
  inputs.insert("pi", pi);
  inputs.insert("outcome", outcome);
  inputs.insert("setting.blocks", torch::tensor(options.trunk_blocks()));
  inputs.insert("setting.value_weight", torch::tensor(value_weight, torch::kFloat64));
  inputs.insert("setting.l2", torch::tensor(l2, torch::kFloat64));
  inputs.insert("setting.momentum", torch::tensor(momentum, torch::kFloat64));
  inputs.insert("setting.lr_rates", torch::tensor(schedule.rates, torch::kFloat64));
  inputs.insert("setting.lr_boundaries", torch::tensor(schedule.boundaries));
  save_dict(inputs, dir / "inputs.pt");
  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_MINIGO_REFERENCE_SCRIPT, (dir / "inputs.pt").string() + " " + (dir / "expected.pt").string());
  ASSERT_TRUE(testing::succeeded(run)) << "is python3-torch installed?";
  const auto expected = load_dict(dir / "expected.pt");
  const auto reference = [&](const std::string& key) { return expected.at(key).toTensor(); };

  net->train();
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.0).momentum(momentum));
  const auto input = planes.to(torch::kFloat32);
  const Config step_config = testing::step_config(1);
  TrainingLoop loop(step_config, torch::kCPU, net->parameters(), nullptr);
  for (int64_t step = 0; step < 2; ++step) {
    if (step == 0) {
      const MinigoOutput out = net->forward(input);
      EXPECT_TRUE(torch::allclose(out.policy_logits, reference("logits0"), 1e-4, 1e-5));
      EXPECT_TRUE(torch::allclose(out.value, reference("value0"), 1e-4, 1e-5));
      // That forward pass moved the BN running statistics; start the steps from the saved ones.
      torch::NoGradGuard no_grad;
      for (auto& item : net->named_buffers()) item.value().copy_(inputs.at("state." + item.key()));
    }
    const double loss = loop.update(training_step(net, optimizer, schedule.at(step), input, pi, outcome, value_weight, l2));
    EXPECT_NEAR(loss, reference("loss" + std::to_string(step)).item<double>(), 1e-4) << "step " << step;
  }
  int compared = 0;
  for (const auto& item : net->named_parameters()) {
    EXPECT_TRUE(torch::allclose(item.value(), reference("state." + item.key()), 1e-4, 1e-5)) << item.key();
    ++compared;
  }
  for (const auto& item : net->named_buffers()) {
    if (item.key().find("num_batches_tracked") != std::string::npos) continue;
    EXPECT_TRUE(torch::allclose(item.value(), reference("state." + item.key()), 1e-4, 1e-5)) << item.key();
  }
  EXPECT_EQ(compared, 3 + 4 * 3 + 2 + 3 * 2);  // initial conv and BN, 4 block convs and BNs, 2 head convs, 3 dense
  const auto rates = reference("lr");
  for (int64_t step = 0; step < rates.size(0); ++step)
    EXPECT_DOUBLE_EQ(schedule.at(step), rates[step].item<double>()) << "global step " << step;
  fs::remove_all(dir);
}

TEST(MinigoModel, NamesTheFortyEightReferenceTensors) {
  const MinigoNet net(MinigoNetOptions{});
  const auto names = net->initialized_tensor_names();
  ASSERT_EQ(names.size(), 48u);
  EXPECT_EQ(names.front(), "conv2d/kernel");
  EXPECT_EQ(names[38], "batch_normalization_12/beta");
  EXPECT_EQ(names[39], "conv2d_13/kernel");
  EXPECT_EQ(names[42], "conv2d_14/kernel");
  EXPECT_EQ(names.back(), "global_step");
  // 15 kernels and 13 gammas; 19x19 reference shapes: 64 filters, a 722 -> 362 policy layer.
  EXPECT_EQ(net->l2_parameters().size(), 15u + 13u + 3u);
  int64_t parameters = 0;
  for (const auto& tensor : net->parameters()) parameters += tensor.numel();
  const int64_t expected = 13 * 64 * 9 + 12 * 64 * 64 * 9 + 13 * 2 * 64 + 64 * 2 + 64 + 722 * 362 + 362 + 361 * 64 + 64 + 64 + 1;
  EXPECT_EQ(parameters, expected);
}

// MCTS evaluates through this: uint8 planes in, probabilities and values out, as one forward pass would give.
// It folds each BN into its conv, so the BNs get statistics and affine values far from their initial ones, and
// a change of the weights (as a training step or a load makes) must reach the next call.
TEST(MinigoModel, BatchedInferenceMatchesTheForwardPass) {
  torch::manual_seed(3);
  MinigoNet net(MinigoNetOptions().board_size(7).filters(8).trunk_blocks(1).fc_width(4));
  const auto planes = torch::randint(2, {5, 13, 7, 7}, torch::kUInt8);
  std::vector<float> policy(5 * 50), values(5);
  EXPECT_THROW(net->evaluate(planes.data_ptr<uint8_t>(), 5, policy.data(), values.data()), c10::Error)
      << "train mode would update the BN statistics from several threads";
  net->eval();
  const auto expect_forward_pass = [&](const std::string& when) {
    net->evaluate(planes.data_ptr<uint8_t>(), 5, policy.data(), values.data());
    const MinigoOutput out = net->forward(planes.to(torch::kFloat32));
    const auto expected = torch::softmax(out.policy_logits, 1);
    EXPECT_TRUE(torch::allclose(torch::from_blob(policy.data(), {5, 50}), expected, 1e-5, 1e-6)) << when;
    EXPECT_TRUE(torch::allclose(torch::from_blob(values.data(), {5}), out.value, 1e-5, 1e-6)) << when;
  };
  expect_forward_pass("initial weights");
  torch::NoGradGuard no_grad;
  for (const auto& buffer : net->named_buffers())
    if (buffer.key().find("running_mean") != std::string::npos) buffer.value().uniform_(-0.5, 0.5);
    else if (buffer.key().find("running_var") != std::string::npos) buffer.value().uniform_(0.2, 3.0);
  for (const auto& parameter : net->named_parameters())
    if (parameter.key().find("bn") != std::string::npos) parameter.value().uniform_(-1.5, 1.5);
  expect_forward_pass("BN statistics, gammas and betas set");
  for (auto& tensor : net->parameters()) tensor.mul_(1.1);
  expect_forward_pass("all weights scaled in place");
}

// The reference preset at 5x5 sizes: without a prepared bootstrap it is refused with the command that makes
// one; `data make` writes the starting network and the bootstrap games with the bootstrap flags (the random
// model's games, SGF players "random model"); the run loads them, so generation 1 trains on the bootstrap's
// games, and generation 2 waits for network 1's games (written before network 2 exists).
TEST(MinigoBootstrap, ReferencePresetStartsFromThePreparedBootstrapAndTrainsEachGenerationOnThePreviousGames) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_minigo_bootstrap_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  keep_freed_memory_for_reuse();  // as trainbench's main() does
  const WorkloadEntry& entry = find_workload("minigo");
  std::vector<std::string> small = {"board_size=5", "komi=0.5", "filters=8", "trunk_blocks=1", "fc_width=8",
                                    "num_readouts=8", "fast_readouts=4", "concurrent_games=8", "bootstrap_games=12",
                                    "bootstrap.num_readouts=4", "min_selfplay_games_per_generation=8", "batch_size=16",
                                    "eval_games=2", "eval_readouts=4", "max_generations=2", "precision=fp32"};
  const auto settings_with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), small.begin(), small.end());
    WorkloadSettings settings;
    settings.config = Config::from_presets("minigo", entry.presets_json, "reference", extra);
    settings.threads = 1;
    settings.seed = 5;
    return settings;
  };
  RunOptions options;
  options.seed = 5;
  options.show_progress = false;
  options.result_path = (dir / "refused.txt").string();
  const std::string refused = testing::error_message([&] { run_benchmark(*entry.create(settings_with({})), options); });
  EXPECT_NE(refused.find("bootstrap_dir"), std::string::npos) << refused;
  EXPECT_NE(refused.find("trainbench data make minigo --preset reference"), std::string::npos) << refused;

  const fs::path prepared = dir / "bootstrap";
  entry.make_dataset(settings_with({"sgf_dir=" + (dir / "prepared-sgf").string()}).config, prepared.string(), 3);
  std::ifstream note(prepared / "bootstrap.json");
  const auto bootstrap = nlohmann::json::parse(note);
  EXPECT_EQ(bootstrap.at("games").get<int>(), 12);
  EXPECT_EQ(bootstrap.at("flags").at("num_readouts").get<int>(), 4);
  EXPECT_EQ(bootstrap.at("flags").at("resign_threshold"), nlohmann::json::array({-1.0, -0.99}));
  EXPECT_FALSE(bootstrap.at("allow_pass").get<bool>());
  const auto read = [](const fs::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_NE(read(dir / "prepared-sgf" / "generation-000" / "game-00000.sgf").find("PB[random model]"), std::string::npos);

  options.result_path = (dir / "result_0.txt").string();
  run_benchmark(*entry.create(settings_with({"bootstrap_dir=" + prepared.string(),
                                             "target_model=" + (prepared / "start.pt").string(),
                                             "sgf_dir=" + (dir / "run-sgf").string()})),
                options);
  EXPECT_FALSE(fs::exists(dir / "run-sgf" / "generation-000")) << "the run plays no bootstrap";
  int games = 0;
  for (const auto& file : fs::directory_iterator(dir / "run-sgf" / "generation-001")) {
    EXPECT_NE(read(file.path()).find("PB[network 1]"), std::string::npos) << file.path();
    ++games;
  }
  EXPECT_EQ(games, 8);
  // Per generation, the games it trained on: the bootstrap's 12, then network 1's 8.
  std::vector<int> trained_on;
  std::istringstream log(read(options.result_path));
  for (std::string line; std::getline(log, line);)
    if (line.find("\"actual_selfplay_games_per_generation\"") != std::string::npos)
      trained_on.push_back(nlohmann::json::parse(line.substr(line.find('{'))).at("value").get<int>());
  EXPECT_EQ(trained_on, (std::vector<int>{12, 8}));
  fs::remove_all(dir);
}

// The typed settings name what settings.json rules, and read the nested sections a preset has: the tiny
// preset's target recipe, the reference's bootstrap flags and folder.
TEST(MinigoSettings, TheSettingsStructReadsEverySettingAndTheNestedSections) {
  testing::expect_settings_struct_matches_rules<Settings>("minigo");
  const WorkloadEntry& entry = find_workload("minigo");
  const auto tiny = read_settings<Settings>(Config::from_presets("minigo", entry.presets_json, "tiny", {}));
  ASSERT_TRUE(tiny.dataset.has_value());
  EXPECT_EQ(tiny.dataset->target_run, 4);
  EXPECT_FALSE(tiny.bootstrap.has_value());
  EXPECT_FALSE(tiny.bootstrap_dir.has_value());
  const auto reference = read_settings<Settings>(
      Config::from_presets("minigo", entry.presets_json, "reference", {"bootstrap.num_readouts=4"}));
  EXPECT_FALSE(reference.dataset.has_value());
  ASSERT_TRUE(reference.bootstrap.has_value());
  EXPECT_EQ(reference.bootstrap->num_readouts, 4);
  EXPECT_EQ(reference.bootstrap->resign_threshold, (std::vector<double>{-1.0, -0.99}));
  EXPECT_EQ(reference.bootstrap_dir, std::optional<std::string>(""));
}

// The rules that no range of settings.json states are refused by name when the workload is made, before any
// log opens: lr_rates one longer than lr_boundaries, each resign range in order, komi within the board.
TEST(MinigoSettings, RulesBeyondTheRangesAreRefusedByNameWhenTheWorkloadIsMade) {
  const WorkloadEntry& entry = find_workload("minigo");
  const auto refusal = [&](const std::string& preset, const std::vector<std::string>& overrides) {
    WorkloadSettings settings;
    settings.config = Config::from_presets("minigo", entry.presets_json, preset, overrides);
    settings.device = "cpu";
    return testing::error_message([&] { entry.create(settings); });
  };
  EXPECT_EQ(refusal("tiny", {"lr_rates=[0.05, 0.02, 0.01]"}),
            "minigo/tiny: lr_rates: needs one rate more than lr_boundaries: 3 rates for 1 boundaries");
  EXPECT_EQ(refusal("tiny", {"resign_threshold=[-0.5, -0.9]"}),
            "minigo/tiny: resign_threshold: expected [low, high] with low <= high (each game draws its threshold between "
            "them), got [-0.5,-0.9]");
  EXPECT_EQ(refusal("reference", {"precision=fp32", "bootstrap.resign_threshold=[-0.9, -1.0]"}),
            "minigo/reference: bootstrap: resign_threshold: expected [low, high] with low <= high (each game draws its "
            "threshold between them), got [-0.9,-1.0]");
  EXPECT_EQ(refusal("tiny", {"komi=-25.5"}),
            "minigo/tiny: komi: -25.5 is more than the 25 points of the board (board_size 5): it would decide every "
            "game before the first move");
  EXPECT_EQ(refusal("tiny", {"komi=24.5"}), "(no Error thrown)");
  EXPECT_EQ(refusal("tiny", {"filter_amount=0.02"}),
            "minigo/tiny: filter_amount: 0.02 of min_selfplay_games_per_generation 32 is less than one example to train "
            "on: raise filter_amount or min_selfplay_games_per_generation");
  EXPECT_EQ(refusal("tiny", {"bootstrap_games=1"}),
            "minigo/tiny: filter_amount: 0.5 of bootstrap_games 1 is less than one example to train on: raise "
            "filter_amount or bootstrap_games");
}

// Refusals found while the run builds, before its first block, leave no result file: an sgf_dir that cannot
// be created, and a bootstrap whose moves are all fast (unrecorded), which leaves generation 1 not one example.
// `data make` refuses the sgf_dir before it writes anything.
TEST(MinigoSettings, UnwritableSgfDirAndNoFirstGenerationExampleAreRefusedBeforeTheFirstBlock) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_minigo_refusals_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const WorkloadEntry& entry = find_workload("minigo");
  const fs::path target = dir / "target.pt";
  torch::save(MinigoNet(MinigoNetOptions().board_size(5).filters(8).trunk_blocks(1).fc_width(8)), target.string());
  const std::vector<std::string> small = {"filters=8", "trunk_blocks=1", "fc_width=8", "num_readouts=4", "fast_readouts=1",
                                          "concurrent_games=2", "bootstrap_games=2", "eval_games=2", "eval_readouts=4",
                                          "max_generations=1", "target_model=" + target.string()};
  const auto refusal = [&](const std::string& setting) {
    std::vector<std::string> overrides = small;
    overrides.push_back(setting);
    WorkloadSettings settings;
    settings.config = Config::from_presets("minigo", entry.presets_json, "tiny", overrides);
    settings.device = "cpu";
    settings.threads = 1;
    RunOptions options;
    options.show_progress = false;
    options.result_path = (dir / "result_0.txt").string();
    const std::string message = testing::error_message([&] { run_benchmark(*entry.create(settings), options); });
    EXPECT_FALSE(fs::exists(options.result_path)) << setting;
    EXPECT_FALSE(fs::exists(options.result_path + ".partial")) << setting;
    return message;
  };
  const std::string sgf = refusal("sgf_dir=/proc/trainbench-sgf");
  EXPECT_EQ(sgf.rfind("minigo/tiny: sgf_dir /proc/trainbench-sgf: cannot be created: ", 0), 0u) << sgf;
  const std::string unrecorded = refusal("fast_move_probability=0.999999");
  EXPECT_EQ(unrecorded, "minigo/tiny: filter_amount: 0.5 of the bootstrap's 0 examples (2 games) is not one example to "
                        "train generation 1 on: raise filter_amount or bootstrap_games");

  const Config config = Config::from_presets("minigo", entry.presets_json, "tiny", {"sgf_dir=/proc/trainbench-sgf"});
  const std::string made = testing::error_message([&] { entry.make_dataset(config, (dir / "made").string(), 1); });
  EXPECT_EQ(made.rfind("minigo/tiny: sgf_dir /proc/trainbench-sgf: cannot be created: ", 0), 0u) << made;
  EXPECT_FALSE(fs::exists(dir / "made"));
  fs::remove_all(dir);
}

TEST(MinigoQualityGate, TinyPresetBeatsItsTargetAndPassesReview) {
  const testing::QualityGateRun gate("minigo", 2024);
  EXPECT_TRUE(fs::exists(gate.data_dir() / "target.pt"));
  // How strong the target is: its run's untrained network's win rate against it, as `data make` measured it.
  std::ifstream note(gate.data_dir() / "target.json");
  const auto recipe = nlohmann::json::parse(note);
  std::printf("minigo tiny target: the untrained network wins %.4f of %d games against it\n",
              recipe.at("untrained_win_rate").get<double>(), recipe.at("eval_games").get<int>());
  EXPECT_LT(gate.outcome().last_metric.part(""), 1.0) << "the rules' bound: a win rate below 1";
}

// With batch norm's statistics fixed (eval mode), K micro-batches give the full batch's gradient: the policy
// and value terms are batch means, and the L2 term's shares add up to one.
TEST(MinigoModel, AccumulatedMicroBatchesGiveTheFullBatchsGradientWithBatchNormStatisticsFixed) {
  torch::manual_seed(12);
  MinigoNet net(MinigoNetOptions().board_size(5).filters(8).trunk_blocks(2).fc_width(6));
  net->to(torch::kFloat64);
  net->eval();
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const auto planes = torch::randint(2, {8, 13, 5, 5}, torch::kFloat64);
  const auto pi = torch::softmax(torch::randn({8, 26}, torch::kFloat64), 1);
  const auto outcome = torch::tensor({1, -1, 1, 1, -1, -1, 1, -1}, torch::kFloat64);
  testing::expect_accumulation_matches_full_batch(
      *net, [&] { return training_step(net, optimizer, 0.01, planes, pi, outcome, 0.5, 0.01); });
}

}  // namespace
}  // namespace trainbench::minigo
