// GPT-3's checkpoints in the reference's format (workloads/gpt3/distributed_checkpoint.h): what a tp 2 x pp 2
// layout writes equals what one rank writes, array by array; a checkpoint written by one layout loads into
// another with every rank holding its slice and Adam's state; and checkpoints that do not fit the preset are
// refused by the array's name.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/error_message.h"
#include "support/two_ranks.h"
#include "util/dist_checkpoint.h"
#include "workloads/gpt3/distributed_checkpoint.h"
#include "workloads/gpt3/trainer.h"
#include "workloads/registry.h"

namespace trainbench::gpt3 {
namespace {

namespace fs = std::filesystem;

WorkloadSettings checkpoint_settings(int tensor, int pipeline, const std::string& weights = "") {
  WorkloadSettings settings;
  settings.config = Config::from_presets(
      "gpt3", find_workload("gpt3").presets_json, "tiny",
      {"tensor_parallel=" + std::to_string(tensor), "pipeline_parallel=" + std::to_string(pipeline), "layers=4",
       "gradient_accumulation_steps=2", "batch_size=8"});
  settings.seed = 7;
  settings.weights = weights;
  return settings;
}

parallel::ParallelContext rank_context(parallel::Communicator& communicator) {
  return {std::shared_ptr<parallel::Communicator>(&communicator, [](auto*) {}), torch::kCPU};
}

class GptCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_gpt3_checkpoint_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One update of the one-rank model (so that Adam's moments and step are not zero), saved to `name`.
  std::string trained_checkpoint(const std::string& name) {
    const parallel::ParallelContext alone{parallel::Communicator::connect({}), torch::kCPU};
    GptTrainer trainer(checkpoint_settings(1, 1), alone, TrainerPurpose::kBench);
    torch::manual_seed(3);
    trainer.loop().update(trainer.step(TokenBatch::of(torch::randint(0, 1024, {8, 64}, torch::kLong)), 1e-3));
    const std::string path = (dir_ / name).string();
    trainer.save_model(path);
    return path;
  }

  fs::path dir_;
};

TEST_F(GptCheckpoint, ATensor2Pipeline2SaveIsTheOneRankSaveArrayByArray) {
  const std::string whole = (dir_ / "whole").string(), split = (dir_ / "split").string();
  const parallel::ParallelContext alone{parallel::Communicator::connect({}), torch::kCPU};
  GptTrainer(checkpoint_settings(1, 1), alone, TrainerPurpose::kExport).save_model(whole);
  const auto failures = testing::run_ranks(4, [&](parallel::Communicator& communicator) {
    GptTrainer(checkpoint_settings(2, 2), rank_context(communicator), TrainerPurpose::kExport).save_model(split);
  });
  EXPECT_EQ(failures, std::vector<std::string>(4));
  const std::vector<std::string> keys = dist_checkpoint::array_keys(whole);
  EXPECT_EQ(keys.size(), 3 * checkpoint_arrays(GptOptions().layers(4), 1024).size());
  EXPECT_EQ(keys, dist_checkpoint::array_keys(split));
  for (const std::string& key : keys) {
    const zarr::Array one = dist_checkpoint::open_array(whole, key), four = dist_checkpoint::open_array(split, key);
    EXPECT_EQ(one.metadata().shape, four.metadata().shape) << key;
    EXPECT_EQ(one.read_float32(zarr::whole(one.metadata())), four.read_float32(zarr::whole(four.metadata()))) << key;
  }
  EXPECT_TRUE(dist_checkpoint::is_distributed_checkpoint(split));
}

// Under data parallelism alone the model is whole on every rank, and --save-model and `checkpoint export` call
// save_model on rank 0 only (WorkloadBase::save_weights): it must not wait for the others.
TEST_F(GptCheckpoint, AWholeModelUnderDataParallelismIsWrittenByRankZeroAlone) {
  const std::string path = (dir_ / "data_parallel").string();
  const auto failures = testing::run_ranks(2, [&](parallel::Communicator& communicator) {
    GptTrainer trainer(checkpoint_settings(1, 1), rank_context(communicator), TrainerPurpose::kExport);
    if (communicator.rank() == 0) trainer.save_model(path);
    communicator.barrier();
  });
  EXPECT_EQ(failures, std::vector<std::string>(2));
  EXPECT_TRUE(dist_checkpoint::is_distributed_checkpoint(path));
}

TEST_F(GptCheckpoint, ACheckpointLoadsIntoAnotherLayoutWithAdamsState) {
  const std::string path = trained_checkpoint("trained");
  const parallel::ParallelContext alone{parallel::Communicator::connect({}), torch::kCPU};
  GptTrainer reference(checkpoint_settings(1, 1, path), alone, TrainerPurpose::kRun);
  const auto whole = reference.model()->named_parameters();
  const auto failures = testing::run_ranks(4, [&](parallel::Communicator& communicator) {
    GptTrainer trainer(checkpoint_settings(2, 2, path), rank_context(communicator), TrainerPurpose::kRun);
    const GptPartition& partition = trainer.model()->partition();
    for (const auto& item : trainer.model()->named_parameters()) {
      torch::Tensor expected = whole[item.key() == kHeadWordEmbeddings ? kWordEmbeddings : item.key()];
      const int64_t dim = tensor_parallel_dim(item.key());
      if (dim >= 0) expected = expected.chunk(2, dim)[static_cast<size_t>(partition.tensor_rank())];
      if (!torch::equal(item.value(), expected)) throw std::runtime_error(item.key() + " differs from its slice");
    }
  });
  EXPECT_EQ(failures, std::vector<std::string>(4));
  // The moments and the step came back: one more identical update from the loaded state equals continuing.
  GptTrainer continued(checkpoint_settings(1, 1, path), alone, TrainerPurpose::kRun);
  EXPECT_NE(dist_checkpoint::read_common(path).find("optimizer"), nullptr);
  torch::manual_seed(4);
  const TokenBatch batch = TokenBatch::of(torch::randint(0, 1024, {8, 64}, torch::kLong));
  reference.loop().update(reference.step(batch, 1e-3));
  continued.loop().update(continued.step(batch, 1e-3));
  for (const auto& item : continued.model()->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), reference.model()->named_parameters()[item.key()])) << item.key();
}

TEST_F(GptCheckpoint, CheckpointsThatDoNotFitThePresetAreRefusedByTheArray) {
  const std::string path = trained_checkpoint("trained");
  const parallel::ParallelContext alone{parallel::Communicator::connect({}), torch::kCPU};
  WorkloadSettings wider = checkpoint_settings(1, 1, path);
  wider.config = Config::from_presets("gpt3", find_workload("gpt3").presets_json, "tiny",
                                      {"layers=4", "hidden=128", "ffn_hidden=512", "batch_size=8"});
  const std::string shape = testing::error_message([&] { GptTrainer(wider, alone, TrainerPurpose::kRun); });
  EXPECT_NE(shape.find("language_model.embedding.word_embeddings.weight: has shape [1024, 64], the preset's model "
                       "needs [1024, 128]"),
            std::string::npos)
      << shape;
  const std::string key = "language_model.encoder.layers.mlp.dense_h_to_4h.bias";
  const zarr::Array array = dist_checkpoint::open_array(path, key);
  std::vector<float> values = array.read_float32(zarr::whole(array.metadata()));
  values[5] = std::nanf("");
  array.write_float32(zarr::whole(array.metadata()), values.data());
  const std::string nonfinite =
      testing::error_message([&] { GptTrainer(checkpoint_settings(1, 1, path), alone, TrainerPurpose::kRun); });
  EXPECT_NE(nonfinite.find(key + ": holds values that are not finite"), std::string::npos) << nonfinite;
  fs::remove_all(dist_checkpoint::array_directory(path, key));
  const std::string missing =
      testing::error_message([&] { GptTrainer(checkpoint_settings(1, 1, path), alone, TrainerPurpose::kRun); });
  EXPECT_NE(missing.find(key), std::string::npos) << missing;
}

}  // namespace
}  // namespace trainbench::gpt3
