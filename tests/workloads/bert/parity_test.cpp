// Step parity of the BERT model and LAMB against NVIDIA's own v1.1 BertForPretraining (modeling.py, run by
// bert_reference.py under Debian's python3-torch): the weights go over through save_official_checkpoint and load
// into NVIDIA's class strictly; on the same batch (dropout off) the first step's masked-LM logits, its loss and
// every gradient, then the second step's loss and all weights after two LAMB steps must agree. The reference's
// final weights come back as NVIDIA's state_dict, which load_checkpoint reads, so the checkpoint format is
// tested on a real file of that layout.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/accumulation.h"
#include "support/python_script.h"
#include "support/torch_pickle.h"
#include "util/error.h"
#include "workloads/bert/pretraining.h"

namespace trainbench::bert {
namespace {

namespace fs = std::filesystem;

using testing::load_dict;
using testing::save_dict;

// Two sequences of 12 tokens, the second with 3 padding tokens, 3 prediction slots each (one unused).
data::BertSamples tiny_batch() {
  data::BertSamples samples;
  samples.seq_length = 12;
  samples.max_predictions = 3;
  samples.input_ids = {101, 5, 103, 7, 8, 102, 9, 103, 11, 12, 13, 102, 101, 20, 21, 103, 102, 22, 23, 24, 102, 0, 0, 0};
  samples.input_mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
  samples.segment_ids = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0};
  samples.masked_lm_positions = {2, 7, 9, 3, 6, 0};
  samples.masked_lm_ids = {6, 10, 12, 40, 30, 0};
  samples.next_sentence_labels = {0, 1};
  return samples;
}

TEST(BertParity, TwoLambStepsMatchNvidiasBertForPretraining) {
  torch::manual_seed(5);
  const auto options = BertOptions().vocab_size(110).hidden(16).layers(2).heads(4).intermediate(24).max_positions(12).dropout(0);
  BertForPreTraining model(options);
  model->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;  // non-trivial biases and LayerNorm parameters, so every term is exercised
    for (auto& parameter : model->parameters())
      if (parameter.dim() == 1) parameter.uniform_(-0.5, 1.5);
  }
  const data::BertSamples samples = tiny_batch();
  const PretrainingBatch batch = make_batch(samples, torch::kCPU);
  // A large rate and small clip norm so that clipping, weight decay and trust ratios all move the weights.
  const double lr = 0.05, beta1 = 0.9, beta2 = 0.99, eps = 1e-6, weight_decay = 0.1, max_grad_norm = 0.5;

  const fs::path dir = fs::temp_directory_path() / ("trainbench_bert_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  save_official_checkpoint(model, (dir / "initial.pt").string());
  c10::Dict<std::string, torch::Tensor> initial;
  for (const auto& item : model->named_parameters()) initial.insert(item.key(), item.value().clone());
  c10::Dict<std::string, torch::Tensor> inputs;
  const auto as_long = [](const auto& values, std::vector<int64_t> shape) {
    return torch::tensor(std::vector<int64_t>(values.begin(), values.end()), torch::kLong).view(shape);
  };
  inputs.insert("input_ids", as_long(samples.input_ids, {2, 12}));
  inputs.insert("segment_ids", as_long(samples.segment_ids, {2, 12}));
  inputs.insert("input_mask", as_long(samples.input_mask, {2, 12}));
  inputs.insert("masked_lm_positions", as_long(samples.masked_lm_positions, {2, 3}));
  inputs.insert("masked_lm_ids", as_long(samples.masked_lm_ids, {2, 3}));
  inputs.insert("next_sentence_labels", as_long(samples.next_sentence_labels, {2}));
  for (const auto& [key, value] : std::vector<std::pair<std::string, double>>{
           {"vocab", 110}, {"hidden", 16}, {"layers", 2}, {"heads", 4}, {"intermediate", 24}, {"positions", 12},
           {"lr", lr}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay},
           {"max_grad_norm", max_grad_norm}})
    inputs.insert("setting." + key, torch::tensor(value, torch::kFloat64));
  save_dict(inputs, dir / "inputs.pt");

  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_BERT_REFERENCE_SCRIPT, (dir / "inputs.pt").string() + " " + (dir / "expected.pt").string() + " " +
                                            (dir / "checkpoint.pt").string() + " " + TRAINBENCH_REFERENCE_CODE_DIR);
  if (run.missing_reference_code()) GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
  ASSERT_TRUE(testing::succeeded(run)) << "is python3-torch installed?";
  const auto expected = load_dict(dir / "expected.pt");
  const auto reference = [&](const std::string& key) { return expected.at(key).toTensor(); };

  Lamb lamb(optimizer_parameters(model), LambOptions().beta1(beta1).beta2(beta2).epsilon(eps).weight_decay(weight_decay).max_grad_norm(max_grad_norm));
  model->train();
  {
    const BertOutputs outputs = model->forward(batch.input_ids, batch.segment_ids, batch.input_mask, batch.masked_positions);
    pretraining_loss(model, outputs, batch).backward();
    const int64_t vocab = options.vocab_size();
    for (const auto& item : model->named_parameters()) {
      torch::Tensor official = reference("grad." + item.key());
      if (official.size(0) != item.value().size(0)) {  // the padded vocabulary's rows: no gradient reaches them
        EXPECT_EQ(official.narrow(0, vocab, official.size(0) - vocab).abs().max().item<double>(), 0.0) << item.key();
        official = official.narrow(0, 0, vocab);
      }
      EXPECT_TRUE(torch::allclose(item.value().grad(), official, 1e-8, 1e-11)) << "gradient of " << item.key();
    }
    model->zero_grad();
  }
  const Config step_config = testing::step_config(1);
  TrainingLoop loop(step_config, torch::kCPU, model->parameters(), nullptr);
  for (int step = 0; step < 2; ++step) {
    if (step == 0) {
      const BertOutputs outputs = model->forward(batch.input_ids, batch.segment_ids, batch.input_mask, batch.masked_positions);
      EXPECT_TRUE(torch::allclose(model->masked_lm_logits(outputs.masked_lm_features).detach(), reference("mlm_logits0"), 1e-9, 1e-10));
    }
    const double loss = loop.update(training_step(model, lamb, batch, lr));
    // NVIDIA's forward returns its loss as float32.
    const double official_loss = reference("loss" + std::to_string(step)).item<double>();
    EXPECT_NEAR(loss, official_loss, 1e-6 * official_loss) << "step " << step;
  }
  EXPECT_GT(lamb.last_gradient_norm(), max_grad_norm) << "clipping was not exercised";

  BertForPreTraining loaded(options);
  loaded->to(torch::kFloat64);
  load_checkpoint(loaded, (dir / "checkpoint.pt").string());
  int compared = 0;
  const auto trained = model->named_parameters();
  for (const auto& item : loaded->named_parameters()) {
    // 1e-8: NVIDIA's GELU rounds sqrt(2 / pi) to 0.79788456 (8e-10 relative), which the steps carry on.
    EXPECT_TRUE(torch::allclose(trained[item.key()], item.value(), 1e-8, 1e-9)) << item.key();
    // The key bias adds the same q.b to every score of a query, which softmax ignores: its gradient is 0 up to
    // rounding, and LAMB's normalised update may or may not turn that rounding into a step. Skip it here.
    if (item.key().find("attention.self.key.bias") == std::string::npos) {
      EXPECT_FALSE(torch::equal(trained[item.key()], initial.at(item.key()))) << item.key() << " never moved";
    }
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(model->named_parameters().size()));
  fs::remove_all(dir);
}

TEST(BertCheckpoint, MissingWrongShapeAndExtraTensorsAreErrorsNamingThem) {
  const auto options = BertOptions().vocab_size(110).hidden(8).layers(1).heads(2).intermediate(8).max_positions(8);
  BertForPreTraining model(options);
  const fs::path path = fs::temp_directory_path() / ("trainbench_bert_checkpoint_" + std::to_string(::getpid()) + ".pt");
  const auto expect_error = [&](c10::Dict<std::string, torch::Tensor> dict, const std::string& part) {
    save_dict(dict, path);
    try {
      load_checkpoint(model, path.string());
      ADD_FAILURE() << "accepted a checkpoint that should fail with " << part;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
    }
  };
  c10::Dict<std::string, torch::Tensor> complete;
  for (const auto& item : model->named_parameters()) complete.insert(item.key(), item.value().detach().clone());
  auto missing = complete.copy();
  EXPECT_EQ(missing.erase("cls.predictions.bias"), 1u);
  expect_error(missing, "cls.predictions.bias");
  auto wrong = complete.copy();
  wrong.insert_or_assign("bert.pooler.dense.weight", torch::zeros({8, 9}));
  expect_error(wrong, "bert.pooler.dense.weight");
  auto extra = complete.copy();
  extra.insert("cls.predictions.decoder.weight", torch::zeros({110, 8}));
  expect_error(extra, "cls.predictions.decoder.weight");
  save_dict(complete, path);
  EXPECT_NO_THROW(load_checkpoint(model, path.string()));
  fs::remove(path);
}

// What other BERT code saves loads as it is, with no conversion script: Python's legacy torch.save of
// {"model": OrderedDict} under DDP's "module." prefix, TensorFlow's LayerNorm gamma / beta, Hugging Face's
// position_ids, the tied decoder and its bias.
TEST(BertCheckpoint, ReadsPythonsFilesUnderOtherCodesNames) {
  if (!testing::python_has("torch")) GTEST_SKIP() << "python3-torch is not installed";
  const auto options = BertOptions().vocab_size(110).hidden(8).layers(1).heads(2).intermediate(8).max_positions(8);
  BertForPreTraining model(options);
  const fs::path dir = fs::temp_directory_path() / ("trainbench_bert_names_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  c10::Dict<std::string, torch::Tensor> complete;
  for (const auto& item : model->named_parameters()) complete.insert(item.key(), item.value().detach().clone());
  save_dict(complete, dir / "plain.pt");
  ASSERT_TRUE(testing::succeeded(testing::run_python(
      "-c \"import collections, sys, torch; state = torch.load(sys.argv[1]); "
      "renamed = collections.OrderedDict(('module.' + k.replace('LayerNorm.weight', 'LayerNorm.gamma')"
      ".replace('LayerNorm.bias', 'LayerNorm.beta'), v) for k, v in state.items()); "
      "renamed['module.bert.embeddings.position_ids'] = torch.arange(8).unsqueeze(0); "
      "renamed['module.cls.predictions.decoder.weight'] = state['bert.embeddings.word_embeddings.weight']; "
      "renamed['module.cls.predictions.decoder.bias'] = state['cls.predictions.bias']; "
      "torch.save({'model': renamed}, sys.argv[2], _use_new_zipfile_serialization=False)\" " +
      (dir / "plain.pt").string() + " " + (dir / "other.pt").string())));
  BertForPreTraining loaded(options);
  load_checkpoint(loaded, (dir / "other.pt").string());
  for (const auto& item : loaded->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), complete.at(item.key()))) << item.key();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainbench::bert
