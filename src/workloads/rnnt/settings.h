#pragma once
// RNN-T's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/typed_settings.h"

namespace trainbench::rnnt {

// The generated LibriSpeech-layout corpus that `data make rnnt` writes.
struct DatasetSettings {
  std::string text;  // "kjv" or "digits"
  int64_t min_words = 0, max_words = 0, train_utterances = 0, eval_utterances = 0;
  nlohmann::json voices;  // a list of espeak-ng voice names (typed settings read no lists of strings)

  template <typename Visit>
  void fields(Visit& visit) {
    visit("text", text);
    visit("min_words", min_words);
    visit("max_words", max_words);
    visit("train_utterances", train_utterances);
    visit("eval_utterances", eval_utterances);
    visit("voices", voices);
  }
};

struct Settings {
  int64_t max_epochs = 0;
  int64_t batch_size = 0;  // global
  int64_t eval_batch_size = 0;  // per rank
  nlohmann::json train_subsets;  // a list of LibriSpeech subset names: training_subsets()
  std::string eval_subset;
  double max_duration = 0;
  int64_t num_buckets = 0, loader_workers = 0;
  int64_t encoder_hidden = 0, encoder_pre_layers = 0, encoder_post_layers = 0, stack_time_factor = 0;
  int64_t prediction_hidden = 0, prediction_layers = 0, joint_hidden = 0;
  std::string tokenizer_model;  // data prepare: empty trains a tokenizer
  int64_t vocab_size = 0;
  double encoder_dropout = 0, prediction_dropout = 0, joint_dropout = 0;
  double forget_gate_bias = 0, weights_init_scale = 0, hidden_hidden_bias_scale = 0;
  double learning_rate = 0, beta1 = 0, beta2 = 0, epsilon = 0, weight_decay = 0, max_grad_norm = 0;
  double min_learning_rate = 0;
  int64_t warmup_epochs = 0, hold_epochs = 0;
  double lr_exp_gamma = 0, ema = 0;
  int64_t max_symbols_per_step = 0, max_symbols_per_sample = 0;
  double bench_utterance_seconds = 0;
  int64_t bench_tokens = 0;
  std::optional<DatasetSettings> dataset;  // none: the preset trains on prepared LibriSpeech

  std::vector<std::string> training_subsets() const { return train_subsets.get<std::vector<std::string>>(); }

  template <typename Visit>
  void fields(Visit& visit) {
    visit("max_epochs", max_epochs);
    visit("batch_size", batch_size);
    visit("eval_batch_size", eval_batch_size);
    visit("train_subsets", train_subsets);
    visit("eval_subset", eval_subset);
    visit("max_duration", max_duration);
    visit("num_buckets", num_buckets);
    visit("loader_workers", loader_workers);
    visit("encoder_hidden", encoder_hidden);
    visit("encoder_pre_layers", encoder_pre_layers);
    visit("encoder_post_layers", encoder_post_layers);
    visit("stack_time_factor", stack_time_factor);
    visit("prediction_hidden", prediction_hidden);
    visit("prediction_layers", prediction_layers);
    visit("joint_hidden", joint_hidden);
    visit("tokenizer_model", tokenizer_model);
    visit("vocab_size", vocab_size);
    visit("encoder_dropout", encoder_dropout);
    visit("prediction_dropout", prediction_dropout);
    visit("joint_dropout", joint_dropout);
    visit("forget_gate_bias", forget_gate_bias);
    visit("weights_init_scale", weights_init_scale);
    visit("hidden_hidden_bias_scale", hidden_hidden_bias_scale);
    visit("learning_rate", learning_rate);
    visit("beta1", beta1);
    visit("beta2", beta2);
    visit("epsilon", epsilon);
    visit("weight_decay", weight_decay);
    visit("max_grad_norm", max_grad_norm);
    visit("min_learning_rate", min_learning_rate);
    visit("warmup_epochs", warmup_epochs);
    visit("hold_epochs", hold_epochs);
    visit("lr_exp_gamma", lr_exp_gamma);
    visit("ema", ema);
    visit("max_symbols_per_step", max_symbols_per_step);
    visit("max_symbols_per_sample", max_symbols_per_sample);
    visit("bench_utterance_seconds", bench_utterance_seconds);
    visit("bench_tokens", bench_tokens);
    visit("dataset", dataset);
  }
};

}  // namespace trainbench::rnnt
