// State dicts in and out (workloads/checkpoint.h): a round trip, refusals that list what does not fit, and
// the exported ResNet-50, SSD, U-Net3D and RNN-T loading into the official model classes (torchvision's
// resnet50, the v1.1 reference's SSD300, Unet3D and RNNT) with strict=True and giving the same output on the
// same input.
#include "workloads/checkpoint.h"

#include <fstream>

#include <gtest/gtest.h>

#include "data/test_files.h"
#include "support/error_message.h"
#include "support/python_script.h"
#include "support/torch_pickle.h"
#include "workloads/registry.h"
#include "workloads/resnet/model.h"
#include "workloads/rnnt/model.h"
#include "workloads/ssd/model.h"
#include "workloads/bert/model.h"
#include "workloads/dlrm/model.h"
#include "workloads/maskrcnn/model.h"
#include "workloads/unet3d/model.h"

namespace trainbench {
namespace {

using testing::error_message;

class CheckpointTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_ / name; }

  // The reference preset's model (seed 3) as `checkpoint export` writes it, in fp32.
  std::string export_reference_model(const std::string& benchmark, std::vector<std::string> overrides = {}) const {
    return export_preset_model(benchmark, "reference", std::move(overrides));
  }
  // `preset`'s model (seed 3) as `checkpoint export` writes it, in fp32.
  std::string export_preset_model(const std::string& benchmark, const std::string& preset,
                                  std::vector<std::string> overrides = {}) const {
    const WorkloadEntry& entry = find_workload(benchmark);
    overrides.insert(overrides.begin(), "precision=fp32");
    WorkloadSettings settings;
    settings.config = preset_config(entry, preset, overrides);
    settings.seed = 3;
    const std::string file = path(benchmark + ".pt");
    export_model(entry, settings, file);
    return file;
  }

  // Saves trainbench's `output` on `input` and runs checkpoint_reference.py, which loads `state` into the
  // official class; false (for a skip) where the reference code is absent.
  bool official_model_agrees(const std::string& benchmark, const std::string& state, const torch::Tensor& input,
                             const torch::Tensor& output,
                             c10::Dict<std::string, torch::Tensor> case_dict = c10::Dict<std::string, torch::Tensor>()) const {
    case_dict.insert("input", input);
    case_dict.insert("output", output.detach());
    const std::string case_file = path(benchmark + "_case.pt");
    testing::save_dict(case_dict, case_file);
    const testing::PythonRun run = testing::run_python_script(
        TRAINBENCH_CHECKPOINT_REFERENCE_SCRIPT,
        benchmark + " " + state + " " + case_file + " " + TRAINBENCH_REFERENCE_CODE_DIR);
    if (run.missing_reference_code()) return false;
    EXPECT_TRUE(testing::succeeded(run)) << "the official model refused the file or disagreed";
    return true;
  }

  const data::testing::TempDir dir_;
};

torch::nn::Sequential small_net() {
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)), torch::nn::BatchNorm2d(4),
                               torch::nn::Linear(4, 2));
}

TEST_F(CheckpointTest, ARoundTripCopiesEveryParameterAndBuffer) {
  torch::manual_seed(1);
  auto saved = small_net();
  {
    torch::NoGradGuard no_grad;
    saved[1]->as<torch::nn::BatchNorm2d>()->running_mean.uniform_();
  }
  save_state_dict(module_state(*saved), path("net.pt"));
  torch::manual_seed(2);
  auto loaded = small_net();
  load_state_dict(path("net.pt"), module_state(*loaded));
  const auto expected = module_state(*saved), actual = module_state(*loaded);
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].name, actual[i].name);
    EXPECT_TRUE(torch::equal(expected[i].tensor, actual[i].tensor)) << expected[i].name;
  }
}

TEST_F(CheckpointTest, AFileThatDoesNotFitIsRefusedListingWhatDiffersAndChangesNothing) {
  auto net = small_net();
  StateDict state = module_state(*net);
  state.erase(state.begin());                                      // 0.weight missing
  state.push_back({"extra.weight", torch::zeros({1})});            // unexpected
  state[0].tensor = torch::zeros({5});                             // 0.bias of another shape
  save_state_dict(state, path("odd.pt"));
  auto target = small_net();
  const auto before = module_state(*target)[1].tensor.clone();
  const std::string message = error_message([&] { load_state_dict(path("odd.pt"), module_state(*target)); });
  EXPECT_NE(message.find("--weights " + path("odd.pt") + ": does not fit this model's 9 tensors (1 missing: 0.weight; "
                         "1 unexpected: extra.weight; 1 of another shape: 0.bias [5] (the model's is [4]))"),
            std::string::npos)
      << message;
  EXPECT_TRUE(torch::equal(module_state(*target)[1].tensor, before)) << "a refused file changed the model";

  std::ofstream(path("text.pt")) << "not a checkpoint";
  EXPECT_NE(error_message([&] { load_state_dict(path("text.pt"), module_state(*target)); }).find("is not a file torch.save wrote"),
            std::string::npos);
  testing::save_dict(c10::Dict<std::string, torch::Tensor>(), path("empty.pt"));
  EXPECT_NE(error_message([&] { load_state_dict(path("empty.pt"), module_state(*target)); }).find("9 missing"), std::string::npos);
}

TEST_F(CheckpointTest, ExportedResnet50LoadsIntoTorchvisionStrictlyAndGivesTheSameLogits) {
  const std::string state = export_reference_model("resnet");
  resnet::ResNet model;  // ResNet-50, the reference preset's model
  load_state_dict(state, module_state(*model));
  model->eval();
  torch::manual_seed(4);
  const auto input = torch::randn({2, 3, 64, 64});
  EXPECT_TRUE(official_model_agrees("resnet", state, input, model->forward(input)));
}

TEST_F(CheckpointTest, ExportedSsdLoadsIntoTheReferenceSsd300StrictlyAndGivesTheSameBoxesAndScores) {
  const std::string state = export_reference_model("ssd", {"pretrained_backbone=false"});
  ssd::Ssd model(ssd::SsdOptions{});  // SSD300 with ResNet-34, 81 classes: the reference preset's model
  load_state_dict(state, ssd::official_state(model));
  model->eval();
  torch::manual_seed(4);
  const auto input = torch::randn({1, 3, 300, 300});
  const auto [locations, scores] = model->forward(input);
  if (!official_model_agrees("ssd", state, input, torch::cat({locations.flatten(), scores.flatten()})))
    GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
}

TEST_F(CheckpointTest, ExportedUnet3dLoadsIntoTheReferenceClassStrictlyAndGivesTheSameLogits) {
  const std::string state = export_reference_model("unet3d");
  unet3d::Unet3d model;  // filters 32 to 320, the reference preset's model
  load_state_dict(state, module_state(*model));
  model->eval();
  torch::manual_seed(4);
  const auto input = torch::randn({1, 1, 64, 64, 64});  // the bottleneck, 1/32 of it, must keep more than one voxel
  if (!official_model_agrees("unet3d", state, input, model->forward(input)))
    GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
}

TEST_F(CheckpointTest, ExportedRnntLoadsIntoTheReferenceClassStrictlyAndGivesTheSameLogitsAtEveryValidCell) {
  const std::string state = export_reference_model("rnnt");
  rnnt::Rnnt model(rnnt::RnntOptions{});  // the reference preset's 49 M parameters
  load_state_dict(state, rnnt::official_state(model));
  model->eval();
  torch::manual_seed(4);
  const auto features = torch::randn({2, 9, 240});
  const auto frame_counts = torch::tensor({9, 6}), tokens = torch::randint(1023, {2, 4}), token_counts = torch::tensor({4, 2});
  torch::NoGradGuard no_grad;
  auto [encoded, steps] = model->encode(features, frame_counts);
  const torch::Tensor predicted = model->predict(tokens);
  const auto cells = rnnt::lattice_cells(steps, token_counts, tokens, encoded.size(1), 4, model->options().blank(), torch::kCPU);
  c10::Dict<std::string, torch::Tensor> lengths;
  lengths.insert("frame_counts", frame_counts);
  lengths.insert("tokens", tokens);
  lengths.insert("token_counts", token_counts);
  if (!official_model_agrees("rnnt", state, features, model->joint(encoded, predicted, cells), lengths))
    GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
}

// The reference preset's Mask R-CNN (without ImageNet weights, which are not here) in the reference's own
// GeneralizedRCNN, built from its R-50-FPN config: every tensor loads strictly, the anchors included, and the
// backbone gives the same P2..P6 on a 64 x 96 image. Loading a file of another configuration is refused.
TEST_F(CheckpointTest, ExportedMaskRcnnLoadsIntoTheReferenceGeneralizedRcnnStrictlyAndGivesTheSameFeatures) {
  const std::string state = export_reference_model("maskrcnn", {"pretrained_backbone=false"});
  const WorkloadEntry& entry = find_workload("maskrcnn");
  const Config config = preset_config(entry, "reference", {"pretrained_backbone=false"});
  maskrcnn::MaskRcnn model(maskrcnn::MaskRcnnOptions()
                               .num_classes(config.integer("num_classes"))
                               .body_widths(config.integers("body_widths"))
                               .frozen_batch_norm(true));
  const StateDict official = maskrcnn::official_state(model);
  load_state_dict(state, official);
  maskrcnn::check_official_anchors(model, official, state);
  model->eval();
  torch::manual_seed(4);
  const torch::Tensor image = torch::randn({1, 3, 64, 96}) * 50;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> levels;
  for (const torch::Tensor& level : model->features(image)) levels.push_back(level.flatten());
  const bool ran = official_model_agrees("maskrcnn", state, image, torch::cat(levels));

  maskrcnn::MaskRcnn other_anchors(maskrcnn::MaskRcnnOptions()
                                       .num_classes(config.integer("num_classes"))
                                       .body_widths(config.integers("body_widths"))
                                       .frozen_batch_norm(true)
                                       .anchor_sizes({16, 32, 64, 128, 256}));
  const StateDict other = maskrcnn::official_state(other_anchors);
  load_state_dict(state, other);
  EXPECT_NE(error_message([&] { maskrcnn::check_official_anchors(other_anchors, other, state); })
                .find("rpn.anchor_generator.cell_anchors.0 differs from this model's anchors"),
            std::string::npos);
  if (!ran) GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
}

// Issue 45: what Python writes of every dtype the benchmarks use (an OrderedDict with a Parameter, views of one
// storage, 0-d and empty tensors, in the legacy format) reads here and, written back by save_state_dict, loads
// in Python with the same names, dtypes, shapes and bytes.
TEST_F(CheckpointTest, EveryDtypeRoundTripsFromPythonThroughTrainbenchBackToPythonBitForBit) {
  if (!testing::python_has("torch")) GTEST_SKIP() << "python3-torch is not installed";
  ASSERT_TRUE(testing::succeeded(
      testing::run_python_script(TRAINBENCH_TORCH_FILE_REFERENCE_SCRIPT, "write " + dir_.path().string())));
  StateDict state;
  for (const auto& [name, tensor] : read_state_dict_file(path("legacy.pt"))) state.push_back({name, tensor});
  ASSERT_EQ(state.size(), 17u);
  save_state_dict(state, path("back.pt"));
  EXPECT_TRUE(testing::succeeded(testing::run_python_script(TRAINBENCH_TORCH_FILE_REFERENCE_SCRIPT,
                                                            "compare " + path("zip.pt") + " " + path("back.pt"))));
}

// The mini preset's BERT in NVIDIA's v1.1 BertForPretraining (modeling.py with the unfused layers
// convert_tf_checkpoint.py sets, the vocabulary padded to a multiple of 8): every tensor loads strictly and the
// masked-LM logits at every position and the next-sentence logits agree. The file reads back into trainbench.
TEST_F(CheckpointTest, ExportedBertLoadsIntoNvidiasBertForPretrainingStrictlyAndGivesTheSameLogits) {
  const std::string state = export_preset_model("bert", "mini");
  const Config config = preset_config(find_workload("bert"), "mini", {"precision=fp32"});
  bert::BertForPreTraining model(bert::BertOptions()
                                     .vocab_size(config.integer("vocab_size"))
                                     .hidden(config.integer("hidden"))
                                     .layers(config.integer("layers"))
                                     .heads(config.integer("heads"))
                                     .intermediate(config.integer("intermediate"))
                                     .max_positions(config.integer("max_positions")));
  bert::load_checkpoint(model, state);
  model->eval();
  torch::manual_seed(4);
  const int64_t batch = 2, length = 16;
  const torch::Tensor ids = torch::randint(config.integer("vocab_size"), {batch, length});
  const torch::Tensor segments = torch::cat({torch::zeros({batch, length / 2}), torch::ones({batch, length / 2})}, 1).to(torch::kLong);
  torch::Tensor mask = torch::ones({batch, length}, torch::kLong);
  mask.index_put_({1, torch::indexing::Slice(12)}, 0);  // the second sequence is 12 tokens long
  torch::NoGradGuard no_grad;
  const bert::BertOutputs outputs = model->forward(ids, segments, mask, torch::arange(batch * length));
  const torch::Tensor logits = torch::cat({model->masked_lm_logits(outputs.masked_lm_features).flatten(), outputs.next_sentence_logits.flatten()});
  c10::Dict<std::string, torch::Tensor> extra;
  extra.insert("segments", segments);
  extra.insert("mask", mask);
  for (const char* key : {"vocab_size", "hidden", "layers", "heads", "intermediate", "max_positions"})
    extra.insert(key, torch::tensor(config.integer(key)));
  if (!official_model_agrees("bert", state, ids, logits, extra))
    GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
}

// DLRM_Net is not in ../shared: the test runs where TRAINBENCH_DLRM_REFERENCE_DIR names a checkout of
// facebookresearch/dlrm's mlperf branch (docs/checkpoints.md), and is skipped elsewhere. The mini preset's
// model: the reference preset's tables are 89 GiB.
TEST_F(CheckpointTest, ExportedDlrmLoadsIntoTheReferenceDlrmNetStrictlyAndGivesTheSameProbabilitiesLossAndGradients) {
  const std::string state = export_preset_model("dlrm", "mini");
  const Config config = preset_config(find_workload("dlrm"), "mini", {"precision=fp32"});
  const std::vector<int64_t> tables = config.integers("table_sizes");
  dlrm::Dlrm model(dlrm::DlrmOptions(tables)
                       .embedding_dim(config.integer("embedding_dim"))
                       .bottom_mlp(config.integers("bottom_mlp"))
                       .top_mlp(config.integers("top_mlp")));
  load_state_dict(state, dlrm::official_state(model, "test"));
  // A rank of a sharded model holds part of the tables: refused, not exported in part.
  dlrm::Dlrm shard(dlrm::DlrmOptions(tables)
                       .embedding_dim(config.integer("embedding_dim"))
                       .bottom_mlp(config.integers("bottom_mlp"))
                       .top_mlp(config.integers("top_mlp"))
                       .shards(dlrm::plan_table_shards(tables, 2).on_rank(0)));
  EXPECT_NE(error_message([&] { dlrm::official_state(shard, "--save-model"); })
                .find("--save-model: needs embedding_sharding=replicated"),
            std::string::npos);
  torch::manual_seed(4);
  const int64_t batch = 6;
  const torch::Tensor dense = torch::rand({batch, 13}) * 3;
  std::vector<torch::Tensor> columns;
  for (const int64_t rows : tables) columns.push_back(torch::randint(rows, {batch}));
  const torch::Tensor sparse = torch::stack(columns, 1);
  const torch::Tensor labels = torch::tensor({1.0f, 0.0f, 0.0f, 1.0f, 0.0f, 1.0f});
  c10::Dict<std::string, torch::Tensor> extra;
  extra.insert("sparse", sparse);
  extra.insert("table_sizes", torch::tensor(tables));
  extra.insert("bottom_mlp", torch::tensor(config.integers("bottom_mlp")));
  extra.insert("top_mlp", torch::tensor(config.integers("top_mlp")));
  // One step's loss (the training step's) and every gradient, by DLRM_Net's names: the embedding rows' gradients
  // scattered into dense tables, as DLRM_Net's sparse gradients read densely.
  const dlrm::EmbeddingLookup lookup = model->lookup(sparse);
  lookup.vectors.requires_grad_(true);
  const torch::Tensor loss = torch::binary_cross_entropy_with_logits(model->predict(dense, lookup.vectors), labels);
  loss.backward();
  const torch::Tensor table_gradients = torch::zeros_like(model->embeddings).index_add_(
      0, lookup.rows, lookup.vectors.grad().reshape({lookup.rows.numel(), -1}));
  int64_t first_row = 0, table = 0;
  for (const NamedTensor& named : dlrm::official_state(model, "test")) {
    if (named.name.rfind("emb_l.", 0) == 0) {
      extra.insert("grad." + named.name, table_gradients.narrow(0, first_row, tables[table]));
      first_row += tables[table++];
    } else {
      extra.insert("grad." + named.name, named.tensor.grad());
    }
  }
  extra.insert("labels", labels);
  extra.insert("loss", loss.detach());
  torch::NoGradGuard no_grad;
  if (!official_model_agrees("dlrm", state, dense, torch::sigmoid(model->forward(dense, sparse)), extra))
    GTEST_SKIP() << "no DLRM reference checkout: set TRAINBENCH_DLRM_REFERENCE_DIR";
}

}  // namespace
}  // namespace trainbench
