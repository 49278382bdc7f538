// MiniGo's own model files (workloads/minigo/model_file.h): the reference's two real 9x9 test models
// (cc/dual_net/test_model.pb and test_tf.minigo) read into the same network, which computes what their graph
// computes under TensorFlow's op semantics (an independent python3-torch interpreter of the graph) on each of
// the 8 symmetries of a position; a written network reads back identically and its graph computes its
// outputs; files that are not such a model are refused with the file and the reason.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include "support/error_message.h"
#include "support/python_script.h"
#include "support/torch_pickle.h"
#include "workloads/minigo/model_file.h"

namespace trainbench::minigo {
namespace {

namespace fs = std::filesystem;

const fs::path kReferenceModels = fs::path(TRAINBENCH_REFERENCE_CODE_DIR) /
                                  "mlcommons-training/reinforcement/tensorflow/minigo/cc/dual_net";

class MinigoModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_minigo_model_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The graph's policy and value on `planes` (batch, planes, N, N), from minigo_graph_reference.py.
  std::pair<torch::Tensor, torch::Tensor> graph_outputs(const fs::path& model, const torch::Tensor& planes) {
    c10::Dict<std::string, torch::Tensor> inputs;
    inputs.insert("planes", planes);
    testing::save_dict(inputs, dir_ / "planes.pt");
    testing::or_throw(testing::run_python_script(TRAINBENCH_MINIGO_GRAPH_SCRIPT, model.string() + " " +
                                                 (dir_ / "planes.pt").string() + " " + (dir_ / "outputs.pt").string()));
    const auto outputs = testing::load_dict(dir_ / "outputs.pt");
    return {outputs.at("policy").toTensor(), outputs.at("value").toTensor()};
  }

  // net->evaluate() on `planes`, as MCTS calls it.
  static std::pair<torch::Tensor, torch::Tensor> evaluated(MinigoNet& net, const torch::Tensor& planes) {
    const int64_t batch = planes.size(0), moves = net->options().board_size() * net->options().board_size() + 1;
    const torch::Tensor features = planes.to(torch::kUInt8).contiguous();
    torch::Tensor policy = torch::empty({batch, moves}), value = torch::empty({batch});
    net->evaluate(features.data_ptr<uint8_t>(), static_cast<int>(batch), policy.data_ptr<float>(), value.data_ptr<float>());
    return {policy, value};
  }

  fs::path dir_;
};

// One position's planes under the 8 symmetries of the square (rotations, each with and without a transpose).
torch::Tensor under_all_symmetries(const torch::Tensor& position) {
  std::vector<torch::Tensor> positions;
  for (const bool transpose : {false, true})
    for (int64_t turns = 0; turns < 4; ++turns) positions.push_back(torch::rot90(transpose ? position.transpose(1, 2) : position, turns, {1, 2}));
  return torch::stack(positions);
}

std::vector<std::pair<std::string, torch::Tensor>> all_tensors(const MinigoNet& net) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : net->named_parameters()) tensors.emplace_back(item.key(), item.value());
  for (const auto& item : net->named_buffers()) tensors.emplace_back(item.key(), item.value());
  return tensors;
}

TEST_F(MinigoModelFileTest, TheReferencesFrozenGraphAndItsMinigoContainerHoldTheSameNetwork) {
  if (!fs::exists(kReferenceModels / "test_model.pb")) GTEST_SKIP() << "the v1.1 reference code is not in ../shared";
  const MinigoModelFile bare = read_minigo_model((kReferenceModels / "test_model.pb").string());
  const MinigoModelFile container = read_minigo_model((kReferenceModels / "test_tf.minigo").string());
  const MinigoNetOptions& options = bare.net->options();
  EXPECT_EQ(options.board_size(), 9);
  EXPECT_EQ(options.filters(), 32);
  EXPECT_EQ(options.trunk_blocks(), 9);
  EXPECT_EQ(options.input_planes(), 17);
  EXPECT_EQ(bare.input_features, "agz");
  EXPECT_TRUE(bare.metadata.empty());
  EXPECT_EQ(container.metadata.at("input_features"), "agz");
  EXPECT_EQ(container.metadata.at("board_size"), 9);
  const auto bare_tensors = all_tensors(bare.net), container_tensors = all_tensors(container.net);
  ASSERT_EQ(bare_tensors.size(), container_tensors.size());
  for (size_t i = 0; i < bare_tensors.size(); ++i) {
    EXPECT_EQ(bare_tensors[i].first, container_tensors[i].first);
    EXPECT_TRUE(torch::equal(bare_tensors[i].second, container_tensors[i].second)) << bare_tensors[i].first;
  }
  // The files hold an initialization (BN statistics 0 and 1), frozen as TensorFlow's fused batch norm keeps it:
  // epsilon raised to 1.001e-5.
  EXPECT_FLOAT_EQ(static_cast<float>(options.batch_norm_epsilon()), 1.001e-5f);
  EXPECT_GT(bare.net->named_parameters()["initial_conv.weight"].abs().sum().item<float>(), 0);
}

TEST_F(MinigoModelFileTest, TheReferencesNetworkComputesWhatItsGraphComputesOnEverySymmetryOfAPosition) {
  if (!fs::exists(kReferenceModels / "test_tf.minigo")) GTEST_SKIP() << "the v1.1 reference code is not in ../shared";
  MinigoModelFile file = read_minigo_model((kReferenceModels / "test_tf.minigo").string());
  torch::manual_seed(3);
  // agz planes: 8 moves of history of own and opponent stones (disjoint), then the side to move.
  const auto stones = torch::randint(3, {8, 1, 9, 9});
  const torch::Tensor position = torch::cat({torch::stack({stones.eq(1), stones.eq(2)}, 1).view({16, 9, 9}), torch::ones({1, 9, 9}, torch::kBool)})
                                     .to(torch::kFloat32);
  const torch::Tensor planes = under_all_symmetries(position);
  const auto [policy, value] = evaluated(file.net, planes);
  const auto [graph_policy, graph_value] = graph_outputs(kReferenceModels / "test_tf.minigo", planes);
  ASSERT_EQ(graph_policy.sizes(), policy.sizes());
  EXPECT_TRUE(torch::allclose(policy, graph_policy, 1e-4, 1e-6)) << (policy - graph_policy).abs().max();
  EXPECT_TRUE(torch::allclose(value, graph_value, 1e-4, 1e-6)) << value << graph_value;
  // The network is not symmetric: the 8 positions give different value estimates, so each one checks the
  // spatial layout of the weights on its own.
  EXPECT_GT((value - value.mean()).abs().max().item<float>(), 1e-4f);
}

TEST_F(MinigoModelFileTest, AWrittenNetworkReadsBackIdenticallyAndItsGraphComputesItsOutputs) {
  torch::manual_seed(11);
  MinigoNet net(MinigoNetOptions().board_size(5).filters(8).trunk_blocks(2).fc_width(6));
  {
    torch::NoGradGuard no_grad;
    for (auto& item : net->named_buffers())
      if (item.key().find("running_mean") != std::string::npos) item.value().normal_();
      else if (item.key().find("running_var") != std::string::npos) item.value().uniform_(0.5, 2);
    for (auto& item : net->named_parameters())
      if (item.key().find("_bn.") != std::string::npos) item.value().normal_(item.key().find("weight") != std::string::npos ? 1 : 0, 0.2);
  }
  net->eval();
  const fs::path path = dir_ / "net.minigo";
  write_minigo_model(net, path.string());
  MinigoModelFile file = read_minigo_model(path.string());
  EXPECT_EQ(file.metadata.at("input_layout"), "nchw");
  EXPECT_EQ(file.metadata.at("trunk_layers"), 2);
  EXPECT_EQ(file.input_features, "mlperf07");
  const auto written = all_tensors(net), read = all_tensors(file.net);
  ASSERT_EQ(written.size(), read.size());
  for (size_t i = 0; i < written.size(); ++i)
    EXPECT_TRUE(torch::equal(written[i].second, read[i].second)) << written[i].first;

  const torch::Tensor planes = under_all_symmetries(torch::randint(2, {13, 5, 5}).to(torch::kFloat32));
  const auto [policy, value] = evaluated(net, planes);
  const auto [graph_policy, graph_value] = graph_outputs(path, planes);
  EXPECT_TRUE(torch::allclose(policy, graph_policy, 1e-4, 1e-6)) << (policy - graph_policy).abs().max();
  EXPECT_TRUE(torch::allclose(value, graph_value, 1e-4, 1e-6)) << value << graph_value;
  EXPECT_TRUE(is_minigo_model_file(path.string()));
  EXPECT_FALSE(fs::exists(path.string() + ".partial"));
}

TEST_F(MinigoModelFileTest, FilesThatAreNotAMinigoNetworkAreRefusedWithTheFileAndTheReason) {
  MinigoNet net(MinigoNetOptions().board_size(5).filters(4).trunk_blocks(1).fc_width(3));
  const fs::path good = dir_ / "good.minigo";
  write_minigo_model(net, good.string());
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto write = [&](const std::string& name, const std::string& content) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  };
  const auto refusal = [](const std::string& path) { return testing::error_message([&] { read_minigo_model(path); }); };

  std::string message = refusal(write("cut.minigo", bytes.substr(0, bytes.size() - 100)));
  EXPECT_NE(message.find("cut.minigo: says it holds " + std::to_string(bytes.size()) + " bytes but holds"), std::string::npos) << message;
  std::string version = bytes;
  version[8] = 2;
  message = refusal(write("version.minigo", version));
  EXPECT_NE(message.find("version.minigo: is a <minigo> file of version 2"), std::string::npos) << message;
  message = refusal(write("noise.pb", "\x0a\x05pos"));
  EXPECT_NE(message.find("noise.pb: is not a MiniGo frozen graph this reads: a NodeDef string is cut short"), std::string::npos) << message;
  // A graph without the outputs the reference's engine fetches.
  message = refusal(write("empty.pb", ""));
  EXPECT_NE(message.find("empty.pb: is not a MiniGo frozen graph this reads: node policy_output is referred to but not in the graph"),
            std::string::npos)
      << message;
  // Swish instead of ReLU in the trunk (metadata use_swish), and a graph whose op is not the reference's.
  std::string swish = bytes;
  const size_t key = swish.find("\"use_swish\":false");
  ASSERT_NE(key, std::string::npos);
  swish.replace(key, 17, "\"use_swish\":true ");
  message = refusal(write("swish.minigo", swish));
  EXPECT_NE(message.find("swish.minigo: metadata use_swish is true; only the reference architecture is read"), std::string::npos) << message;
  std::string sigmoid = bytes;
  const size_t op = sigmoid.find("\x12\x04Relu");
  ASSERT_NE(op, std::string::npos);
  sigmoid.replace(op, 6, std::string("\x12\x04Selu"));
  message = refusal(write("selu.minigo", sigmoid));
  EXPECT_NE(message.find("selu.minigo: is not a MiniGo frozen graph this reads:"), std::string::npos) << message;
  EXPECT_NE(message.find("is a Selu"), std::string::npos) << message;
  EXPECT_FALSE(is_minigo_model_file(write("start.pt", "PK\x03\x04")));
}

}  // namespace
}  // namespace trainbench::minigo
