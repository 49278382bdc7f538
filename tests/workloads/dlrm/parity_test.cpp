// One-step parity of DLRM and its sparse SGD against an independent implementation in Debian's
// python3-torch (dlrm_reference.py: per-table EmbeddingBag(sparse=True), torch.optim.SGD, BCELoss): same
// initial weights and batch, two training steps, then losses, probabilities and every weight must agree.
// float32, the type training uses, so the hand-written embedding update is the one under test.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/accumulation.h"
#include "support/python_script.h"
#include "support/torch_pickle.h"
#include "workloads/dlrm/model.h"

namespace trainbench::dlrm {
namespace {

namespace fs = std::filesystem;

using testing::load_dict;
using testing::save_dict;

TEST(DlrmParity, TwoSgdStepsMatchAnIndependentPyTorchImplementation) {
  torch::manual_seed(5);
  std::vector<int64_t> tables;
  for (int t = 0; t < 26; ++t) tables.push_back(3 + (t * 7) % 11);
  const auto options = DlrmOptions(tables).embedding_dim(4).bottom_mlp({8, 4}).top_mlp({16, 8, 1});
  Dlrm model(options);
  const int64_t batch = 12;
  const auto dense = torch::rand({batch, 13}) * 3;
  std::vector<torch::Tensor> columns;
  for (const int64_t size : tables) columns.push_back(torch::randint(size, {batch, 1}, torch::kInt64));
  // Repeat row 0 of every table in two samples, so duplicate rows within a batch are covered.
  auto sparse = torch::cat(columns, 1);
  sparse.index_put_({1}, sparse[0]);
  const auto labels = torch::tensor({1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 1}, torch::kFloat32);
  const double lr = 0.7;
  const DlrmLrSchedule schedule{2.0, 4, 10, 5};

  const fs::path dir = fs::temp_directory_path() / ("trainbench_dlrm_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  c10::Dict<std::string, torch::Tensor> inputs;
  for (const auto& item : model->named_parameters()) inputs.insert("state." + item.key(), item.value().clone());
  inputs.insert("dense", dense);
  inputs.insert("sparse", sparse);
  inputs.insert("labels", labels);
  inputs.insert("setting.table_sizes", torch::tensor(tables));
  inputs.insert("setting.bottom_mlp", torch::tensor(options.bottom_mlp()));
  inputs.insert("setting.top_mlp", torch::tensor(options.top_mlp()));
  inputs.insert("setting.embedding_dim", torch::tensor(options.embedding_dim()));
  inputs.insert("setting.lr", torch::tensor(lr, torch::kFloat64));
  inputs.insert("setting.schedule", torch::tensor({schedule.base_lr, 4.0, 10.0, 5.0, 20.0}, torch::kFloat64));
  save_dict(inputs, dir / "inputs.pt");

  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_DLRM_REFERENCE_SCRIPT, (dir / "inputs.pt").string() + " " + (dir / "expected.pt").string());
  ASSERT_TRUE(testing::succeeded(run)) << "is python3-torch installed?";
  const auto expected = load_dict(dir / "expected.pt");
  const auto reference = [&](const std::string& key) { return expected.at(key).toTensor(); };

  model->train();
  const auto single_process = parallel::Communicator::connect(parallel::RankEnvironment{});
  parallel::GradientSync mlp_gradients(*single_process, model->mlp_parameters(), {});
  Parallelism parallel(*single_process, mlp_gradients);
  const Config step_config = testing::step_config(1);
  TrainingLoop loop(step_config, torch::kCPU, model->mlp_parameters(), &mlp_gradients);
  for (int step = 0; step < 2; ++step) {
    if (step == 0) {
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(
          torch::allclose(torch::sigmoid(model->forward(dense, sparse)), reference("probabilities0"), 1e-5, 1e-6));
    }
    const double loss = loop.update(training_step(model, parallel, loop, dense, sparse, labels, lr));
    EXPECT_NEAR(loss, reference("loss" + std::to_string(step)).item<double>(), 1e-5) << "step " << step;
  }
  int compared = 0;
  for (const auto& item : model->named_parameters()) {
    EXPECT_TRUE(torch::allclose(item.value(), reference("state." + item.key()), 1e-4, 1e-6)) << item.key();
    ++compared;
  }
  EXPECT_EQ(compared, 1 + 2 * 2 + 2 * 3);  // embeddings, 2 bottom and 3 top layers (weight, bias)

  const auto rates = reference("lr");
  for (int64_t step = 0; step < rates.size(0); ++step)
    EXPECT_NEAR(schedule.at(step), rates[step].item<double>(), 1e-12) << "optimizer step " << step;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainbench::dlrm
