#include "workloads/bert/model.h"

#include <set>

#include <gtest/gtest.h>

#include "support/accumulation.h"
#include "workloads/bert/dense.h"
#include "workloads/bert/pretraining.h"

namespace trainbench::bert {
namespace {

// BERT-Large's depth with tiny widths: the names depend only on the structure.
BertForPreTraining large_shaped() {
  return BertForPreTraining(BertOptions().vocab_size(120).hidden(8).heads(2).intermediate(8).max_positions(16));
}

TEST(BertModel, ParameterNamesMapToTheRulesWeightsInitializationList) {
  // The v1.1 rules' closed_bert tensor list (rules/training_1.1.0/rules.json), expanded.
  std::set<std::string> expected = {"bert/embeddings/word_embeddings", "bert/embeddings/position_embeddings",
                                    "bert/embeddings/token_type_embeddings", "bert/embeddings/LayerNorm/gamma",
                                    "bert/embeddings/LayerNorm/beta", "bert/pooler/dense/kernel", "bert/pooler/dense/bias",
                                    "cls/predictions/output_bias", "cls/predictions/transform/dense/kernel",
                                    "cls/predictions/transform/dense/bias", "cls/predictions/transform/LayerNorm/gamma",
                                    "cls/predictions/transform/LayerNorm/beta", "cls/seq_relationship/output_weights",
                                    "cls/seq_relationship/output_bias"};
  for (int layer = 0; layer < 24; ++layer) {
    const std::string prefix = "bert/encoder/layer_" + std::to_string(layer) + "/";
    for (const char* dense : {"attention/self/query", "attention/self/key", "attention/self/value",
                              "attention/output/dense", "intermediate/dense", "output/dense"}) {
      expected.insert(prefix + dense + "/kernel");
      expected.insert(prefix + dense + "/bias");
    }
    for (const char* norm : {"attention/output/LayerNorm", "output/LayerNorm"}) {
      expected.insert(prefix + norm + "/gamma");
      expected.insert(prefix + norm + "/beta");
    }
  }
  std::set<std::string> named;
  for (const auto& item : large_shaped()->named_parameters()) named.insert(mlperf_tensor_name(item.key()));
  named.insert("cls/predictions/decoder/kernel");  // tied to word_embeddings; the workload logs it separately
  expected.insert("cls/predictions/decoder/kernel");
  EXPECT_EQ(named, expected);
}

TEST(BertModel, DecoderIsTiedAndOnlyMaskedPositionsAreScored) {
  BertForPreTraining model(BertOptions().vocab_size(120).hidden(8).layers(1).heads(2).intermediate(8).max_positions(16).dropout(0));
  // The decoder has no weight of its own: one [vocab, hidden] matrix in all.
  int vocab_matrices = 0;
  for (const auto& item : model->named_parameters()) vocab_matrices += item.value().dim() == 2 && item.value().size(0) == 120;
  EXPECT_EQ(vocab_matrices, 1);
  const auto ids = torch::randint(120, {3, 10}, torch::kLong);
  const auto outputs = model->forward(ids, torch::zeros({3, 10}, torch::kLong), torch::ones({3, 10}, torch::kLong),
                                      torch::tensor({1, 12, 25, 29}, torch::kLong));
  EXPECT_EQ(model->masked_lm_logits(outputs.masked_lm_features).sizes(), (std::vector<int64_t>{4, 120}));
  EXPECT_EQ(outputs.next_sentence_logits.sizes(), (std::vector<int64_t>{3, 2}));
  // Padding is invisible: changing a padded token does not change the other positions' outputs.
  auto mask = torch::ones({1, 10}, torch::kLong);
  mask[0][9] = 0;
  auto changed = ids.slice(0, 0, 1).clone();
  changed[0][9] = (changed[0][9].item<int64_t>() + 1) % 120;
  const auto positions = torch::tensor({2, 5}, torch::kLong);
  const auto a = model->forward(ids.slice(0, 0, 1), torch::zeros({1, 10}, torch::kLong), mask, positions).masked_lm_features;
  const auto b = model->forward(changed, torch::zeros({1, 10}, torch::kLong), mask, positions).masked_lm_features;
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6));
}

TEST(BertModel, InitialisationIsTruncatedNormalWithUnitLayerNorm) {
  BertForPreTraining model(BertOptions().vocab_size(3000).hidden(64).layers(1).heads(2).intermediate(64).max_positions(16));
  for (const auto& item : model->named_parameters()) {
    const auto& value = item.value();
    if (item.key().find("LayerNorm.weight") != std::string::npos) {
      EXPECT_TRUE(torch::all(value == 1).item<bool>()) << item.key();
    } else if (value.dim() == 1) {
      EXPECT_TRUE(torch::all(value == 0).item<bool>()) << item.key();
    } else {
      EXPECT_LE(value.abs().max().item<double>(), 0.04 + 1e-6) << item.key();
      if (value.numel() > 10000) {
        EXPECT_NEAR(value.std().item<double>(), 0.02 * 0.8796, 0.001) << item.key();
      }
    }
  }
  EXPECT_TRUE(excluded_from_weight_decay("bert.encoder.layer.0.output.LayerNorm.weight"));
  EXPECT_TRUE(excluded_from_weight_decay("cls.predictions.bias"));
  EXPECT_FALSE(excluded_from_weight_decay("bert.embeddings.word_embeddings.weight"));
}

TEST(BertModel, FusedMaskedLmLossEqualsCrossEntropyOverTheDecoderInValueAndGradients) {
  torch::manual_seed(3);
  BertForPreTraining model(BertOptions().vocab_size(50).hidden(8).layers(1).heads(2).intermediate(8).max_positions(16).dropout(0));
  model->to(torch::kDouble);
  const auto features = torch::randn({6, 8}, torch::kDouble).requires_grad_();
  const auto labels = torch::tensor({4, 4, 0, 49, 17, 4}, torch::kLong);  // repeated labels and both ends
  const auto parameters = model->named_parameters();
  const auto& weight = parameters["bert.embeddings.word_embeddings.weight"];
  const auto& bias = parameters["cls.predictions.bias"];
  torch::NoGradGuard no_grad_init;
  bias.copy_(torch::randn({50}, torch::kDouble));
  {
    torch::AutoGradMode enable(true);
    // Scaled by 3, as when the loss is one term of a weighted sum: the gradient scale must reach every input.
    const auto expected = torch::nn::functional::cross_entropy(model->masked_lm_logits(features), labels);
    const auto expected_grads = torch::autograd::grad({expected * 3}, {features, weight, bias});
    const auto fused = model->masked_lm_loss(features, labels);
    const auto fused_grads = torch::autograd::grad({fused * 3}, {features, weight, bias});
    EXPECT_NEAR(fused.item<double>(), expected.item<double>(), 1e-12);
    for (size_t i = 0; i < fused_grads.size(); ++i)
      EXPECT_TRUE(torch::allclose(fused_grads[i], expected_grads[i], 1e-10, 1e-12)) << "input " << i;
  }
}

// float32 on the CPU is the path that goes to oneDNN's sgemm (when the build has it); the double-precision test
// above takes LibTorch's ops. Both products of the backward, a non-contiguous 3-D input and the fused loss's
// three gradients are held to LibTorch's float32 results.
TEST(BertModel, Float32DenseAndMaskedLmLossEqualLibTorchsOpsInValueAndGradients) {
  torch::manual_seed(4);
  const auto input = torch::randn({5, 3, 7}).transpose(0, 1).requires_grad_();  // non-contiguous [3, 5, 7]
  const auto weight = torch::randn({11, 7}).requires_grad_(), bias = torch::randn({11}).requires_grad_();
  const auto expected = torch::nn::functional::linear(input, weight, bias);
  const auto output = dense(input, weight, bias);
  ASSERT_EQ(output.sizes(), expected.sizes());
  EXPECT_TRUE(torch::allclose(output, expected, 1e-5, 1e-5));
  const auto upstream = torch::randn(expected.sizes());
  const auto expected_grads = torch::autograd::grad({expected}, {input, weight, bias}, {upstream});
  const auto grads = torch::autograd::grad({output}, {input, weight, bias}, {upstream});
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(torch::allclose(grads[i], expected_grads[i], 1e-4, 1e-5)) << "input " << i;

  BertForPreTraining model(BertOptions().vocab_size(50).hidden(8).layers(1).heads(2).intermediate(8).max_positions(16).dropout(0));
  const auto features = torch::randn({6, 8}).requires_grad_();
  const auto labels = torch::tensor({4, 4, 0, 49, 17, 4}, torch::kLong);
  const auto parameters = model->named_parameters();
  const std::vector<torch::Tensor> inputs{features, parameters["bert.embeddings.word_embeddings.weight"], parameters["cls.predictions.bias"]};
  const auto reference = torch::nn::functional::cross_entropy(
      torch::nn::functional::linear(features, inputs[1], inputs[2]), labels);
  const auto reference_grads = torch::autograd::grad({reference * 3}, inputs);
  const auto fused = model->masked_lm_loss(features, labels);
  const auto fused_grads = torch::autograd::grad({fused * 3}, inputs);
  EXPECT_NEAR(fused.item<double>(), reference.item<double>(), 1e-5);
  for (size_t i = 0; i < fused_grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(fused_grads[i], reference_grads[i], 1e-4, 1e-6)) << "input " << i;
}

TEST(BertModel, DropoutKeepsOneMinusPScaledIsReproducibleAndPassesTheMaskToTheGradient) {
  const auto input = torch::full({1000, 100}, 2.0f).requires_grad_();
  const DropoutSite site{dropout_key(12345, 7)};
  const auto output = bert::dropout(input, 0.1, true, site);
  const auto kept = output.ne(0);
  EXPECT_NEAR(kept.to(torch::kDouble).mean().item<double>(), 0.9, 0.005);  // 100,000 draws: sigma 0.001
  EXPECT_TRUE(torch::allclose(output.masked_select(kept), torch::full({kept.sum().item<int64_t>()}, 2.0f / 0.9f)));
  EXPECT_TRUE(torch::equal(bert::dropout(input, 0.1, true, site), output));  // the key fixes the mask
  EXPECT_FALSE(torch::equal(bert::dropout(input, 0.1, true, {dropout_key(12345, 8)}), output));  // another site
  output.sum().backward();
  EXPECT_TRUE(torch::equal(input.grad(), output.detach() / 2));  // d output / d input is the scaled mask
  EXPECT_TRUE(torch::equal(bert::dropout(input, 0.1, false, site), input));
  EXPECT_EQ(bert::dropout(input, 1.0, true, site).ne(0).sum().item<int64_t>(), 0);
}

// A split of the tensor draws the whole tensor's mask on its part: rows by their global index, heads (dim 1)
// by their offset among all heads.
TEST(BertModel, DropoutOfAPartIsThatPartOfTheWholeTensorsMask) {
  const auto whole = torch::ones({6, 4, 3, 5});
  const uint64_t key = dropout_key(99, 1);
  const auto expected = bert::dropout(whole, 0.3, true, {key, 0, 0, 4});
  const auto part = bert::dropout(whole.narrow(0, 2, 3).narrow(1, 1, 2).contiguous(), 0.3, true, {key, 2, 1, 4});
  EXPECT_TRUE(torch::equal(part, expected.narrow(0, 2, 3).narrow(1, 1, 2)));
  const auto rows = bert::dropout(whole.narrow(0, 3, 3).contiguous(), 0.3, true, {key, 3, 0, 4});
  EXPECT_TRUE(torch::equal(rows, expected.narrow(0, 3, 3)));
  EXPECT_FALSE(torch::equal(part, expected.narrow(0, 2, 3).narrow(1, 0, 2)));
}

TEST(BertLrSchedule, WarmsUpLinearlyThenDecaysPolynomiallyToZero) {
  const BertLrSchedule schedule{0.004, 100, 0, 1000, 1.0};
  EXPECT_DOUBLE_EQ(schedule.at(0), 0);
  EXPECT_DOUBLE_EQ(schedule.at(50), 0.002);
  EXPECT_DOUBLE_EQ(schedule.at(100), 0.004 * 0.9);  // decay counts from step 0, as in the reference
  EXPECT_DOUBLE_EQ(schedule.at(500), 0.002);
  EXPECT_DOUBLE_EQ(schedule.at(1000), 0);
  EXPECT_DOUBLE_EQ(schedule.at(2000), 0);
  const BertLrSchedule no_warmup{0.00035, 0, 0, 7100, 1.0};
  EXPECT_DOUBLE_EQ(no_warmup.at(0), 0.00035);
}

// The masked-LM loss is a mean over predictions: with as many predictions in every sample, K micro-batches
// weighted by their samples give the full batch's gradient (NVIDIA divides each by the steps: the same).
TEST(BertModel, AccumulatedMicroBatchesGiveTheFullBatchsGradient) {
  torch::manual_seed(9);
  BertForPreTraining model(BertOptions().vocab_size(50).hidden(8).layers(1).heads(2).intermediate(8).max_positions(16).dropout(0));
  model->to(torch::kFloat64);
  model->train();
  Lamb lamb(optimizer_parameters(model), LambOptions());
  data::BertSamples samples;
  samples.seq_length = 8;
  samples.max_predictions = 2;
  for (int n = 0; n < 4; ++n) {
    for (int i = 0; i < 8; ++i) {
      samples.input_ids.push_back(5 + (7 * n + 3 * i) % 40);
      samples.segment_ids.push_back(static_cast<int8_t>(i >= 4));
      samples.input_mask.push_back(static_cast<int8_t>(i < 7));
    }
    samples.masked_lm_positions.insert(samples.masked_lm_positions.end(), {1 + n % 3, 5});
    samples.masked_lm_ids.insert(samples.masked_lm_ids.end(), {10 + n, 20 + n});
    samples.next_sentence_labels.push_back(static_cast<int8_t>(n % 2));
  }
  const PretrainingBatch batch = make_batch(samples, torch::kCPU);
  const PretrainingBatch middle = batch.rows({1, 2, 4});
  EXPECT_TRUE(torch::equal(middle.masked_positions, torch::tensor({2, 5, 8 + 3, 8 + 5}, torch::kLong)));
  EXPECT_EQ(middle.masked_offsets, (std::vector<int64_t>{0, 2, 4}));
  testing::expect_accumulation_matches_full_batch(*model, [&] { return training_step(model, lamb, batch, 1e-3); });
}

}  // namespace
}  // namespace trainbench::bert
