// Parity of the GPT-3 model with the MLPerf reference's own Megatron-LM GPTModel (megatron/model and megatron/mpu,
// run by megatron_gpt_reference.py under Debian's python3-torch, fp32 on the CPU, with the stand-ins for CUDA and
// apex that the script lists): at a tiny width (2 layers, hidden 64, 4 heads, MLP 256, 16 positions, vocabulary 200
// padded by Megatron to 256, batch 2) and on the same weights, the batch as pretrain_gpt.py's get_batch makes it,
// the per-token losses, loss_func's loss and the gradient of every parameter by Megatron's name agree, without
// recompute and with it (trainbench recomputes whole layers, the reference with run_gpt3.sh's
// --recompute-activations only the core attention; the gradients must not change either way).
//
// What does not run here: the reference's CUDA kernels (apex's fused LayerNorm, written in torch by the script; the
// fused softmax, which the reference skips in fp32 too), its bf16 path (USE_BF16, off in run_gpt3.sh), tensor and
// pipeline parallelism (tp = pp = 1 here; the split layers are held to Megatron's mpu in
// tests/parallel/tensor_parallel_test.cpp and to the one-rank model in model_parallel_test.cpp), and
// --sequence-parallel, which Megatron itself turns off at tp = 1.
//
// Both sides' LayerNorms are MixedFusedLayerNorm1P's (megatron/model/__init__.py): the weight is the gain - 1, applied
// as weight + 1, so the weights go over as they are.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/python_script.h"
#include "support/torch_pickle.h"
#include "workloads/gpt3/model.h"
#include "workloads/gpt3/trainer.h"

// Its own namespace: the test sources compile as one unity translation unit.
namespace trainbench::gpt3::parity {
namespace {

namespace fs = std::filesystem;
using Tensors = std::map<std::string, torch::Tensor>;

constexpr int64_t kVocab = 200, kHidden = 64, kLayers = 2, kHeads = 4, kFfn = 256, kSeq = 16, kBatch = 2;
// Megatron's _vocab_size_with_padding: 200 up to a multiple of make_vocab_size_divisible_by (128) x tp (1). The
// reference reports the value it computed, which the test checks.
constexpr int64_t kPaddedVocab = 256;
// Every loss and gradient element: |ours - Megatron's| <= kRelative x (|Megatron's| + kFloor x the largest
// |Megatron's| of that tensor), i.e. 1e-5 relative with an absolute floor of 1e-6 of the tensor's largest element.
// The floor is for elements near zero, where the two sides' fp32 sums (same terms, other orders) differ by rounding
// at the tensor's scale, not the element's: measured, the largest difference of any gradient is 4.5e-7 of its
// tensor's largest element (a few fp32 ulps), and the key bias gradient is zero but for such rounding.
constexpr double kRelative = 1e-5, kFloor = 0.1;

GptOptions tiny_options() {
  return GptOptions().vocab_size(kVocab).hidden(kHidden).layers(kLayers).heads(kHeads).ffn_hidden(kFfn).max_positions(
      kSeq);
}

GptPartition whole_model() {
  GptPartition partition;
  partition.padded_vocab = kPaddedVocab;
  return partition;
}

bool is_layer_norm_gain(const std::string& name) {
  const std::string suffix = "layernorm.weight";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Two samples of 16 tokens; the second is a short last sample, its final 3 positions -1 as the dataset pads it.
torch::Tensor test_sequences() {
  torch::manual_seed(43);
  torch::Tensor sequences = torch::randint(0, kVocab, {kBatch, kSeq}, torch::kLong);
  sequences[1].narrow(0, kSeq - 3, 3).fill_(-1);
  return sequences;
}

// The reference's initialisation (N(0, std) matrices, zero biases and LayerNorm1P weights) at std 0.05 instead of
// 0.006, then every bias and LayerNorm parameter drawn away from 0: at 0.006 the attention would be nearly uniform and
// the biases zero, leaving the mask, the score scaling and the bias terms barely exercised.
GptModel test_model(const GptOptions& options) {
  GptModel model(GptOptions(options).init_std(0.05), whole_model());
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(2024);
  model->reset_parameters(generator);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.value().dim() != 1) continue;
    if (is_layer_norm_gain(item.key()))
      item.value().uniform_(-0.5, 0.5, generator);
    else
      item.value().uniform_(-0.2, 0.2, generator);
  }
  return model;
}

Tensors load_tensors(const fs::path& path) {
  Tensors tensors;
  for (const auto& entry : testing::load_dict(path)) tensors[entry.key().toStringRef()] = entry.value().toTensor();
  return tensors;
}

// What Megatron computed on test_model's weights and test_sequences, run once for the suite.
struct Reference {
  bool ran = false;
  std::string skip, failure;
  Tensors tensors;
};

const Reference& megatron_reference() {
  static const Reference reference = [] {
    Reference result;
    if (!testing::python_has("torch")) {
      result.skip = "/usr/bin/python3 has no torch (apt-get install python3-torch)";
      return result;
    }
    std::string directory_template = (fs::temp_directory_path() / "trainbench_gpt3_parity_XXXXXX").string();
    if (::mkdtemp(directory_template.data()) == nullptr) {
      result.failure = "mkdtemp failed";
      return result;
    }
    const fs::path directory = directory_template;
    c10::Dict<std::string, torch::Tensor> inputs;
    inputs.insert("sequences", test_sequences());
    for (const auto& [key, value] : std::map<std::string, int64_t>{{"vocab", kVocab},
                                                                   {"hidden", kHidden},
                                                                   {"layers", kLayers},
                                                                   {"heads", kHeads},
                                                                   {"ffn", kFfn},
                                                                   {"seq", kSeq},
                                                                   {"batch", kBatch}})
      inputs.insert("setting." + key, torch::tensor(value, torch::kLong));
    GptModel model = test_model(tiny_options());
    for (const auto& item : model->named_parameters()) {
      const torch::Tensor value = item.value().detach();
      inputs.insert("weight." + item.key(), value.clone());
    }
    testing::save_dict(inputs, directory / "inputs.pt");
    const testing::PythonRun run = testing::run_python_script(
        TRAINBENCH_MEGATRON_GPT_SCRIPT, std::string(TRAINBENCH_MEGATRON_LM_DIR) + " " + directory.string());
    if (run.missing_reference_code())
      result.skip = std::string("no Megatron-LM at ") + TRAINBENCH_MEGATRON_LM_DIR;
    else if (!run.ok())
      result.failure = run.failure();
    else
      result.tensors = load_tensors(directory / "reference.pt"), result.ran = true;
    fs::remove_all(directory);
    return result;
  }();
  return reference;
}

#define REQUIRE_MEGATRON_REFERENCE(reference)                  \
  const Reference& reference = megatron_reference();           \
  if (!reference.skip.empty()) GTEST_SKIP() << reference.skip; \
  ASSERT_TRUE(reference.failure.empty()) << reference.failure; \
  ASSERT_TRUE(reference.ran)

// The largest |ours - theirs| and the largest share of the allowance it uses (<= 1 passes).
struct Difference {
  double max_abs = 0, worst = 0, of_largest = 0;  // of_largest: max_abs / the largest |Megatron's|
};

Difference difference(const torch::Tensor& ours, const torch::Tensor& theirs) {
  const torch::Tensor a = ours.detach().to(torch::kDouble), b = theirs.detach().to(torch::kDouble);
  const torch::Tensor gap = (a - b).abs();
  const double scale = b.numel() ? b.abs().max().item<double>() : 0.0;
  const torch::Tensor allowance = kRelative * (b.abs() + kFloor * scale);
  Difference d;
  d.max_abs = gap.numel() ? gap.max().item<double>() : 0.0;
  d.worst = gap.numel() ? (gap / allowance.clamp_min(1e-30)).max().item<double>() : 0.0;
  d.of_largest = scale > 0 ? d.max_abs / scale : d.max_abs;
  return d;
}

// Every gradient of `model` against "<granularity>.grad.<name>", each name of one side present on the other.
void expect_gradients_match(GptModel& model, const Tensors& reference, const std::string& granularity) {
  const std::string prefix = granularity + ".grad.";
  size_t theirs = 0;
  for (const auto& [key, value] : reference) theirs += key.rfind(prefix, 0) == 0;
  EXPECT_EQ(model->named_parameters().size(), theirs) << "parameters: trainbench's and Megatron's";
  Difference largest;
  std::string largest_name;
  for (const auto& item : model->named_parameters()) {
    const auto found = reference.find(prefix + item.key());
    if (found == reference.end()) {
      ADD_FAILURE() << item.key() << " is not a parameter of Megatron's GPTModel";
      continue;
    }
    ASSERT_TRUE(item.value().grad().defined()) << item.key() << " has no gradient";
    ASSERT_EQ(item.value().grad().sizes(), found->second.sizes()) << item.key();
    const Difference d = difference(item.value().grad(), found->second);
    EXPECT_LE(d.worst, 1.0) << "gradient of " << item.key() << ": max |difference| " << d.max_abs << " (recompute "
                            << granularity << ")";
    if (d.worst >= largest.worst) largest = d, largest_name = item.key();
  }
  std::cout << "[ gradients vs Megatron, recompute " << granularity << " ] closest to the tolerance: " << largest_name
            << ", max |diff| " << largest.max_abs << " (" << largest.of_largest << " of its largest element), "
            << largest.worst << " of the allowance\n";
}

struct Pass {
  torch::Tensor loss, token_losses;
};

// The per-token losses (no gradient) and model->forward's loss, back-propagated.
Pass forward_backward(GptModel& model, const TokenBatch& batch) {
  Pass pass;
  {
    torch::NoGradGuard no_grad;
    pass.token_losses = model->token_losses(model->encode(model->embed(batch.tokens), 0, kLayers), batch.labels);
  }
  model->zero_grad();
  pass.loss = model->forward(batch.tokens, batch.labels, batch.loss_mask);
  pass.loss.backward();
  return pass;
}

void expect_forward_matches(const Pass& pass, const Tensors& reference, const std::string& granularity) {
  const torch::Tensor& their_losses = reference.at(granularity + ".losses");
  ASSERT_EQ(pass.token_losses.sizes(), their_losses.sizes());
  const Difference losses = difference(pass.token_losses, their_losses);
  EXPECT_LE(losses.worst, 1.0) << "per-token losses: max |difference| " << losses.max_abs;
  const Difference loss = difference(pass.loss.reshape({}), reference.at(granularity + ".loss"));
  EXPECT_LE(loss.worst, 1.0) << "loss " << pass.loss.item<double>() << ", Megatron's "
                             << reference.at(granularity + ".loss").item<double>();
  std::cout << "[ forward vs Megatron, recompute " << granularity << " ] loss " << pass.loss.item<double>()
            << " (|diff| " << loss.max_abs << "), per-token losses max |diff| " << losses.max_abs << "\n";
}

TEST(GptParity, BatchIsMadeAsPretrainGptGetBatchMakesItAndTheVocabularyPaddedAsMegatronPadsIt) {
  REQUIRE_MEGATRON_REFERENCE(reference);
  const TokenBatch batch = TokenBatch::of(test_sequences());
  EXPECT_TRUE(torch::equal(batch.tokens, reference.tensors.at("tokens")));
  EXPECT_TRUE(torch::equal(batch.labels, reference.tensors.at("labels")));
  EXPECT_TRUE(torch::equal(batch.loss_mask, reference.tensors.at("loss_mask")));
  EXPECT_EQ(batch.loss_mask.sum().item<double>(), kBatch * kSeq - 1 - 4) << "the last label of each, and the padding";
  EXPECT_TRUE(torch::equal(reference.tensors.at("position_ids"),
                           torch::arange(kSeq, torch::kLong).unsqueeze(0).expand({kBatch, kSeq})))
      << "GptModel embeds positions 0..s-1";
  EXPECT_EQ(reference.tensors.at("padded_vocab").item<int64_t>(), kPaddedVocab);
}

TEST(GptParity, LossPerTokenLossesAndEveryGradientMatchMegatronsGptModel) {
  REQUIRE_MEGATRON_REFERENCE(reference);
  GptModel model = test_model(tiny_options());
  const Pass pass = forward_backward(model, TokenBatch::of(test_sequences()));
  expect_forward_matches(pass, reference.tensors, "none");
  expect_gradients_match(model, reference.tensors, "none");
  // The padded vocabulary's rows take part in the softmax on both sides: their gradients are not zero.
  const torch::Tensor padding_rows =
      model->named_parameters()[kWordEmbeddings].grad().narrow(0, kVocab, kPaddedVocab - kVocab);
  EXPECT_GT(padding_rows.abs().max().item<double>(), 0.0);
}

TEST(GptParity, RecomputedLayersGiveIdenticalGradientsAndMatchMegatronsSelectiveRecompute) {
  REQUIRE_MEGATRON_REFERENCE(reference);
  const TokenBatch batch = TokenBatch::of(test_sequences());
  GptModel kept = test_model(tiny_options());
  GptModel recomputed = test_model(tiny_options().recompute(true));
  const Pass without = forward_backward(kept, batch);
  const Pass with = forward_backward(recomputed, batch);
  EXPECT_TRUE(torch::equal(with.loss, without.loss));
  const auto kept_parameters = kept->named_parameters();
  for (const auto& item : recomputed->named_parameters())
    EXPECT_TRUE(torch::equal(item.value().grad(), kept_parameters[item.key()].grad()))
        << item.key() << ": recompute changed the gradient";
  expect_forward_matches(with, reference.tensors, "selective");
  expect_gradients_match(recomputed, reference.tensors, "selective");
}

}  // namespace
}  // namespace trainbench::gpt3::parity
