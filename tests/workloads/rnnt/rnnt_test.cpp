// RNN-T: the loss against torchaudio.functional.rnnt_loss (values and gradients, T = 1, U = 0 and long
// lattices where path probabilities underflow), one training step (loss, LAMB, EMA) and greedy decoding
// against an independent python3-torch implementation of the reference (rnnt_reference.py), the
// initialisation rule, the learning-rate schedule, the settings a run refuses by name, and the tiny preset's
// quality gate.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "parallel/communicator.h"
#include "harness/cpu_contention.h"
#include "speech/librispeech.h"
#include "speech/synthetic.h"
#include "support/accumulation.h"
#include "support/error_message.h"
#include "support/python_script.h"
#include "support/quality_gate.h"
#include "support/torch_pickle.h"
#include "support/typed_settings.h"
#include "util/file_digest.h"
#include "optim/lamb.h"
#include "workloads/registry.h"
#include "workloads/rnnt/model.h"
#include "workloads/rnnt/settings.h"

namespace trainbench::rnnt {
namespace {

namespace fs = std::filesystem;

using testing::load_dict;
using testing::save_dict;

// Runs rnnt_reference.py in `mode` on `inputs`; returns its outputs.
c10::Dict<c10::IValue, c10::IValue> run_reference(const std::string& mode, const c10::Dict<std::string, torch::Tensor>& inputs) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_rnnt_" + mode + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  save_dict(inputs, dir / "inputs.pt");
  const std::string arguments = mode + " " + (dir / "inputs.pt").string() + " " + (dir / "outputs.pt").string() + " " +
                                TRAINBENCH_REFERENCE_CODE_DIR;
  testing::or_throw(testing::run_python_script(TRAINBENCH_RNNT_REFERENCE_SCRIPT, arguments));
  auto outputs = load_dict(dir / "outputs.pt");
  fs::remove_all(dir);
  return outputs;
}

torch::Tensor tensor_at(const c10::Dict<c10::IValue, c10::IValue>& dict, const std::string& key) { return dict.at(key).toTensor(); }

struct LossCase {
  std::string name;
  std::vector<int64_t> frames, tokens;
  int64_t classes;
  double scale;  // logits ~ N(0, scale^2): large scales make naive path probabilities underflow
  double gradient_tolerance;  // torchaudio accumulates in float32 (it takes no float64); this lattice uses doubles
};

TEST(RnntLoss, MatchesTorchaudioValuesAndGradients) {
  torch::manual_seed(11);
  const std::vector<LossCase> cases = {
      {"small mixed lengths", {4, 2, 5}, {2, 3, 0}, 7, 1.0, 1e-5},
      {"one frame", {1, 1}, {3, 1}, 5, 1.0, 1e-5},
      {"an utterance without labels", {6, 3}, {0, 2}, 4, 1.0, 1e-5},
      {"long underflowing", {300, 260}, {70, 50}, 30, 6.0, 5e-3},
  };
  for (const LossCase& c : cases) {
    const int64_t batch = static_cast<int64_t>(c.frames.size());
    const int64_t T = *std::max_element(c.frames.begin(), c.frames.end());
    const int64_t U = *std::max_element(c.tokens.begin(), c.tokens.end());
    const int64_t blank = c.classes - 1;
    const torch::Tensor logits = (torch::randn({batch, T, U + 1, c.classes}) * c.scale).requires_grad_();
    const torch::Tensor tokens = torch::randint(blank, {batch, U}, torch::kInt64);
    const torch::Tensor frame_counts = torch::tensor(c.frames), token_counts = torch::tensor(c.tokens);
    const torch::Tensor losses = rnnt_loss(logits, tokens, frame_counts, token_counts, blank);
    losses.sum().backward();

    c10::Dict<std::string, torch::Tensor> inputs;
    inputs.insert("logits", logits.detach());
    inputs.insert("tokens", tokens);
    inputs.insert("frame_counts", frame_counts);
    inputs.insert("token_counts", token_counts);
    inputs.insert("blank", torch::tensor(blank));
    const auto expected = run_reference("loss", inputs);
    const torch::Tensor expected_losses = tensor_at(expected, "losses");
    EXPECT_TRUE(torch::isfinite(losses).all().item<bool>()) << c.name;
    EXPECT_TRUE(torch::allclose(losses.detach(), expected_losses, 1e-4, 1e-3)) << c.name << "\n" << losses << "\n" << expected_losses;
    // Gradients where the lattice is defined; torchaudio leaves the padding at 0 and so does the log-softmax
    // backward of a zero lattice gradient.
    EXPECT_TRUE(torch::allclose(logits.grad(), tensor_at(expected, "grad"), 1e-4, c.gradient_tolerance))
        << c.name << ": largest gradient difference " << (logits.grad() - tensor_at(expected, "grad")).abs().max().item<double>();
  }
}

RnntOptions small_options() {
  return RnntOptions()
      .input_features(12)
      .encoder_hidden(10)
      .encoder_pre_layers(2)
      .encoder_post_layers(3)
      .stack_time_factor(2)
      .prediction_hidden(8)
      .prediction_layers(2)
      .joint_hidden(9)
      .vocab_size(6)
      .encoder_dropout(0)
      .prediction_dropout(0)
      .joint_dropout(0);
}

// Issue 32: stack_time_factor=0 was SIGFPE at the first batch.
// The lattice a GPU step runs (tensor operations over anti-diagonals, every utterance at once) gives the
// host lattice's losses and gradients, for utterances of mixed lengths padded into one grid (one of a single
// frame, one without tokens), and zeros outside each utterance.
TEST(RnntLoss, TheDeviceLatticeEqualsTheHostLattice) {
  torch::manual_seed(5);
  const torch::Tensor frames = torch::tensor({6, 3, 1, 6}, torch::kLong), tokens = torch::tensor({3, 0, 2, 4}, torch::kLong);
  const int64_t T = 6, U = 4;
  const torch::Tensor log_blank = -3 * torch::rand({4, T, U + 1});
  const torch::Tensor log_label = -3 * torch::rand({4, T, U});
  const LatticeGradients host = lattice_on_host(log_blank, log_label, frames, tokens);
  const LatticeGradients device = lattice_on_device(log_blank, log_label, frames, tokens);
  EXPECT_TRUE(torch::allclose(device.losses, host.losses, 1e-9, 1e-9)) << device.losses << host.losses;
  EXPECT_TRUE(torch::allclose(device.grad_blank.to(torch::kFloat), host.grad_blank, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(device.grad_label.to(torch::kFloat), host.grad_label, 1e-5, 1e-6));
  EXPECT_EQ(device.grad_blank.sizes(), host.grad_blank.sizes());
  EXPECT_EQ(device.grad_label.sizes(), host.grad_label.sizes());
  // Each path takes T_b blanks: the blank gradients of an utterance add up to -T_b, its labels' to -U_b.
  for (int64_t b = 0; b < 4; ++b) {
    EXPECT_NEAR(device.grad_blank[b].sum().item<double>(), -frames[b].item<double>(), 1e-9) << "utterance " << b;
    EXPECT_NEAR(device.grad_label[b].sum().item<double>(), -tokens[b].item<double>(), 1e-9) << "utterance " << b;
  }
  EXPECT_EQ(device.grad_blank[1].narrow(0, 3, T - 3).abs().sum().item<double>(), 0.0) << "frames past the utterance";
  EXPECT_EQ(device.grad_blank[1].narrow(1, 1, U).abs().sum().item<double>(), 0.0) << "tokens past the utterance";
}

TEST(RnntModel, RefusesAStackTimeFactorBelowOne) {
  EXPECT_EQ(testing::error_message([] { Rnnt(small_options().stack_time_factor(0)); }),
            "stack_time_factor: expected at least 1, got 0");
}

TEST(RnntModel, InitialisesLstmsAsTheReference) {
  torch::manual_seed(3);
  Rnnt model(small_options());
  for (const auto& item : model->named_parameters()) {
    if (item.key().find("lstm") == std::string::npos) continue;
    const int64_t hidden = item.value().size(0) / 4;
    const torch::Tensor forget = item.value().slice(0, hidden, 2 * hidden);
    // PyTorch's default U(-1/sqrt(H), 1/sqrt(H)), scaled by 0.5; bias_ih's forget slice 1.0 * 0.5, bias_hh's 0.
    if (item.key().find("bias_ih") != std::string::npos) {
      EXPECT_TRUE(forget.eq(0.5).all().item<bool>()) << item.key();
    } else if (item.key().find("bias_hh") != std::string::npos) {
      EXPECT_TRUE(forget.eq(0).all().item<bool>()) << item.key();
    } else {
      EXPECT_LE(item.value().abs().max().item<double>(), 0.5 / std::sqrt(static_cast<double>(hidden)) + 1e-7) << item.key();
    }
  }
  // The reference's shapes give 49.0 M parameters.
  Rnnt reference{RnntOptions()};
  int64_t count = 0;
  for (const auto& parameter : reference->parameters()) count += parameter.numel();
  EXPECT_NEAR(static_cast<double>(count) / 1e6, 49.0, 0.05);
  EXPECT_EQ(RnntImpl::initialized_tensor_names().size(), 7u);
}

// NVIDIA's packed joint: one row per valid cell (t < T_b, u <= U_b), utterance after utterance, each row the
// dense joint's value at that cell; a batch of mixed lengths holds no padding cells.
TEST(RnntModel, TheJointComputesOnlyEachUtterancesValidCells) {
  torch::manual_seed(4);
  Rnnt model(small_options());
  const torch::Tensor encoded = torch::randn({2, 4, small_options().encoder_hidden()});
  const torch::Tensor predicted = torch::randn({2, 4, small_options().prediction_hidden()});
  const torch::Tensor tokens = torch::tensor({{1, 2, 3}, {4, 0, 0}});
  const LatticeCells cells = lattice_cells(torch::tensor({4, 2}), torch::tensor({3, 0}), tokens, 4, 3,
                                           model->options().blank(), torch::kCPU);
  EXPECT_EQ(cells.offsets, (std::vector<int64_t>{0, 16, 18}));
  EXPECT_EQ(cells.label_cells.numel(), 12);  // the first utterance's 4 x 3 label transitions, none for the second
  const torch::Tensor logits = model->joint(encoded, predicted, cells);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{18, small_options().vocab_size() + 1}));
  const auto dense_cell = [&](int64_t b, int64_t t, int64_t u) {
    return model->joint_net->forward(torch::relu(model->joint_enc->forward(encoded[b][t]) + model->joint_pred->forward(predicted[b][u])));
  };
  EXPECT_TRUE(torch::allclose(logits[0], dense_cell(0, 0, 0)));
  EXPECT_TRUE(torch::allclose(logits[7], dense_cell(0, 1, 3)));   // t = 1, u = 3
  EXPECT_TRUE(torch::allclose(logits[16], dense_cell(1, 0, 0)));  // the second utterance: 2 frames, no token
  EXPECT_TRUE(torch::allclose(logits[17], dense_cell(1, 1, 0)));
  EXPECT_EQ(cells.next_tokens[7].item<int64_t>(), model->options().blank());  // u = U_b: no label transition
  EXPECT_EQ(cells.next_tokens[6].item<int64_t>(), 3);
  EXPECT_EQ(testing::error_message([&] {
              lattice_cells(torch::tensor({5}), torch::tensor({1}), tokens, 4, 3, model->options().blank(), torch::kCPU);
            }),
            "rnnt lattice: utterance 0 has 5 steps and 1 tokens; expected 1 to 4 and 0 to 3");
}

// The reference's own RNNT, RNNTLoss and greedy decoder (rnnt_reference.py step), on the same weights under
// their official names.
TEST(RnntModel, TwoStepsAndGreedyDecodingMatchTheReferencesOwnCode) {
  if (!fs::exists(fs::path(TRAINBENCH_REFERENCE_CODE_DIR) / "mlcommons-training/rnn_speech_recognition/pytorch/rnnt/model.py"))
    GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
  torch::manual_seed(5);
  const RnntOptions options = small_options();
  Rnnt model(options), ema(options);
  const int64_t batch = 3;
  const torch::Tensor features = torch::randn({batch, 9, options.input_features()});
  const torch::Tensor frame_counts = torch::tensor({9, 5, 7});
  const torch::Tensor tokens = torch::randint(options.vocab_size(), {batch, 4}, torch::kInt64);
  const torch::Tensor token_counts = torch::tensor({4, 2, 3});
  const double lr = 0.01, decay = 0.9;
  const int64_t max_symbols_per_step = 3, max_symbols_per_sample = 8;

  c10::Dict<std::string, torch::Tensor> inputs;
  for (const NamedTensor& named : official_state(model)) inputs.insert("state." + named.name, named.tensor.detach().clone());
  inputs.insert("features", features);
  inputs.insert("frame_counts", frame_counts);
  inputs.insert("tokens", tokens);
  inputs.insert("token_counts", token_counts);
  inputs.insert("setting.shape", torch::tensor({options.input_features(), options.encoder_hidden(), options.encoder_pre_layers(),
                                                options.encoder_post_layers(), options.stack_time_factor(),
                                                options.prediction_hidden(), options.prediction_layers(),
                                                options.joint_hidden(), options.vocab_size()}));
  inputs.insert("setting.optimizer", torch::tensor({lr, 0.9, 0.999, 1e-9, 1e-3, 1.0, decay}, torch::kFloat64));
  inputs.insert("setting.limits", torch::tensor({max_symbols_per_step, max_symbols_per_sample}));
  const auto expected = run_reference("step", inputs);

  update_ema(ema, model, 0.0);
  const std::vector<torch::Tensor> parameters = model->parameters();
  optim::Lamb optimizer(optim::all_decaying(parameters),
                        optim::LambOptions().beta1(0.9).beta2(0.999).epsilon(1e-9).weight_decay(1e-3).max_grad_norm(1.0));
  model->train();
  const Config step_config = testing::step_config(1);
  TrainingLoop loop(step_config, torch::kCPU, parameters, nullptr);
  for (int step = 1; step <= 2; ++step) {
    const double loss = loop.update(training_step(model, optimizer, features, frame_counts, tokens, token_counts, lr, ema, decay));
    EXPECT_NEAR(loss, tensor_at(expected, "loss" + std::to_string(step)).item<double>(), 1e-4) << "step " << step;
  }
  for (const NamedTensor& named : official_state(model))
    EXPECT_TRUE(torch::allclose(named.tensor, tensor_at(expected, "state." + named.name), 1e-4, 1e-6)) << named.name;
  for (const NamedTensor& named : official_state(ema))
    EXPECT_TRUE(torch::allclose(named.tensor, tensor_at(expected, "ema." + named.name), 1e-4, 1e-6)) << named.name;

  ema->eval();
  const std::vector<std::vector<int>> decoded =
      greedy_decode(ema, features, frame_counts, max_symbols_per_step, max_symbols_per_sample);
  const torch::Tensor reference = tensor_at(expected, "decoded");
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int> want;
    for (int64_t i = 0; i < reference.size(1) && reference[b][i].item<int64_t>() >= 0; ++i)
      want.push_back(static_cast<int>(reference[b][i].item<int64_t>()));
    EXPECT_EQ(decoded[static_cast<size_t>(b)], want) << "utterance " << b;
  }
}

TEST(RnntSettings, TheSettingsStructReadsEverySettingOfSettingsJson) {
  testing::expect_settings_struct_matches_rules<Settings>("rnnt");
}

TEST(RnntSchedule, WarmsUpHoldsAndDecaysExponentially) {
  const RnntLrSchedule schedule{0.004, 2, 3, 10, 0.9, 1e-5};
  EXPECT_DOUBLE_EQ(schedule.at(1, 1), 0.004 * 2 / 21);     // steps counted from 1: (step + 1) / (warmup + 1)
  EXPECT_DOUBLE_EQ(schedule.at(19, 2), 0.004 * 20 / 21);
  EXPECT_DOUBLE_EQ(schedule.at(20, 3), 0.004);              // hold
  EXPECT_DOUBLE_EQ(schedule.at(49, 5), 0.004);
  EXPECT_DOUBLE_EQ(schedule.at(50, 6), 0.004 * 0.9);        // gamma^(epoch - warmup - hold)
  EXPECT_DOUBLE_EQ(schedule.at(75, 8), 0.004 * 0.9 * 0.9 * 0.9);
  EXPECT_DOUBLE_EQ(schedule.at(100000, 200), 1e-5);         // floor
}

TEST(RnntQualityGate, TinyPresetReachesItsWordErrorRate) {
  const testing::QualityGateRun gate("rnnt", 1234);
  ASSERT_FALSE(gate.outcome().last_metric.parts().empty());
  EXPECT_LE(gate.outcome().last_metric.part(""), 0.75);
}

// The transducer loss is a mean over utterances (NVIDIA's --ga_steps divides by the steps): K micro-batches of
// a padded batch give the full batch's gradient.
TEST(RnntModel, AccumulatedMicroBatchesGiveTheFullBatchsGradient) {
  torch::manual_seed(8);
  Rnnt model(small_options());
  model->to(torch::kFloat64);
  model->train();
  optim::Lamb optimizer(optim::all_decaying(model->parameters()), optim::LambOptions());
  const auto features = torch::randn({4, 9, 12}, torch::kFloat64);
  const auto frame_counts = torch::tensor({9, 7, 8, 5}, torch::kInt64);
  const auto tokens = torch::randint(6, {4, 3}, torch::kInt64);
  const auto token_counts = torch::tensor({3, 2, 3, 1}, torch::kInt64);
  testing::expect_accumulation_matches_full_batch(
      *model, [&] { return training_step(model, optimizer, features, frame_counts, tokens, token_counts, 1e-3); });
}

// `data prepare rnnt` of a LibriSpeech tree outside the prepared folder writes manifests the loader reads
// without leaving --data: fnames relative to the prepared folder, through its link to the source tree.
TEST(RnntData, PreparedManifestsNamePathsInsideTheirFolder) {
  const fs::path root = fs::temp_directory_path() / ("trainbench_rnnt_prepare_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const WorkloadEntry& entry = find_workload("rnnt");
  const Config config = Config::from_presets("rnnt", entry.presets_json, "tiny",
                                             {"dataset.train_utterances=40", "dataset.eval_utterances=4"});
  entry.make_dataset(config, (root / "source").string(), 1);
  entry.prepare_dataset(config, (root / "source").string(), (root / "prepared").string());
  const std::string subset = config.values().at("train_subsets")[0].get<std::string>();
  const auto utterances = speech::read_librispeech_manifest(
      (root / "prepared" / ("librispeech-" + subset + "-wav.json")).string(), (root / "prepared").string());
  ASSERT_EQ(utterances.size(), 40u);
  for (const auto& utterance : utterances) {
    EXPECT_EQ(utterance.audio_path.rfind((root / "prepared" / "librispeech").string(), 0), 0u) << utterance.audio_path;
    EXPECT_TRUE(fs::exists(utterance.audio_path)) << utterance.audio_path;
  }
  // Audit R2: a given tokenizer (the reference's librispeech1023.model for a reference run) is copied in, not
  // retrained, and the run logs the md5 of the model it encoded the transcripts with.
  const int vocab = static_cast<int>(config.integer("vocab_size"));
  const std::string given = speech::sentencepiece_model_path((root / "source").string(), vocab);
  const Config with_model = Config::from_presets("rnnt", entry.presets_json, "tiny",
                                                 {"dataset.train_utterances=40", "dataset.eval_utterances=4", "tokenizer_model=" + given});
  entry.prepare_dataset(with_model, (root / "source").string(), (root / "copied").string());
  const std::string copied = speech::sentencepiece_model_path((root / "copied").string(), vocab);
  EXPECT_EQ(md5_hex(copied), md5_hex(given));
  WorkloadSettings settings;
  settings.config = with_model;
  settings.device = "cpu";
  settings.data_dir = (root / "copied").string();
  const DataSummary summary = entry.create(settings)->open_data();
  const auto logged = std::find_if(summary.derived_hyperparameters.begin(), summary.derived_hyperparameters.end(),
                                   [](const auto& item) { return item.key == "trainbench_tokenizer_md5"; });
  ASSERT_NE(logged, summary.derived_hyperparameters.end());
  EXPECT_EQ(logged->value, md5_hex(given));
  const Config wrong_size = Config::from_presets("rnnt", entry.presets_json, "tiny", {"vocab_size=21", "tokenizer_model=" + given});
  EXPECT_EQ(testing::error_message([&] { entry.prepare_dataset(wrong_size, (root / "source").string(), (root / "other").string()); }),
            "rnnt/tiny: tokenizer_model: " + given + " holds 20 pieces; the preset's vocab_size is 21");
  fs::remove_all(root);
}

// Issue 32: loader_workers=100000 started 25,000 threads before SIGTERM could end the run, and a max_duration
// that filters out every utterance was reported as a batch that could not be filled. Both are refused when the
// data opens, before the log is kept.
TEST(RnntData, LoaderWorkersBeyondTheCpusAndAnEmptyingDurationFilterAreNamed) {
  const fs::path root = fs::temp_directory_path() / ("trainbench_rnnt_settings_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const WorkloadEntry& entry = find_workload("rnnt");
  const std::vector<std::string> small_dataset{"dataset.train_utterances=8", "dataset.eval_utterances=2"};
  entry.make_dataset(Config::from_presets("rnnt", entry.presets_json, "tiny", small_dataset), root.string(), 1);
  const auto open_error = [&](const std::string& setting) {
    std::vector<std::string> overrides = small_dataset;
    overrides.push_back(setting);
    WorkloadSettings settings;
    settings.config = Config::from_presets("rnnt", entry.presets_json, "tiny", overrides);
    settings.device = "cpu";
    settings.data_dir = root.string();
    return testing::error_message([&] { entry.create(settings)->open_data(); });
  };
  EXPECT_EQ(open_error("loader_workers=100000"), "rnnt/tiny: loader_workers: expected at most " +
                                                     std::to_string(affinity_cpus().size()) +
                                                     " (the CPUs this process may run on), got 100000");
  EXPECT_EQ(open_error("max_duration=0.01"), "rnnt/tiny: max_duration: 0.01 s leaves none of the 8 training utterances");
  // Audit R5: durations come from the manifests `data make` and `data prepare` write, never from reading
  // each FLAC's header after run_start; a tree without them is refused by name.
  const std::string subset = Config::from_presets("rnnt", entry.presets_json, "tiny", small_dataset).string("eval_subset");
  const fs::path manifest = root / ("librispeech-" + subset + "-wav.json");
  ASSERT_TRUE(fs::exists(manifest));
  ASSERT_TRUE(fs::exists(root / "librispeech-dev-librivox-wav.json"));  // every subset of the generated tree
  fs::remove(manifest);
  EXPECT_EQ(open_error("loader_workers=1"),
            manifest.string() + ": not found: a run reads each subset's manifest; `trainbench data prepare rnnt --in "
                                "LIBRISPEECH --out DIR` writes them once from a LibriSpeech tree (then --data DIR)");
  fs::remove_all(root);
}

}  // namespace
}  // namespace trainbench::rnnt
