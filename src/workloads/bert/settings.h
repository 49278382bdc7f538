#pragma once
// BERT's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>

#include "harness/typed_settings.h"

namespace trainbench::bert {

// The generated stand-in for the MLPerf shards that `data make bert` writes (create_pretraining_data.py's
// options).
struct DatasetSettings {
  std::string corpus;
  int64_t dupe_factor = 0;
  double masked_lm_prob = 0, short_seq_prob = 0;
  int64_t eval_every_nth_document = 0, eval_samples = 0, train_shards = 0;

  template <typename Visit>
  void fields(Visit& visit) {
    visit("corpus", corpus);
    visit("dupe_factor", dupe_factor);
    visit("masked_lm_prob", masked_lm_prob);
    visit("short_seq_prob", short_seq_prob);
    visit("eval_every_nth_document", eval_every_nth_document);
    visit("eval_samples", eval_samples);
    visit("train_shards", train_shards);
  }
};

struct Settings {
  int64_t max_samples = 0;
  std::optional<int64_t> eval_interval_samples;  // none: the rules' interval for the batch size
  int64_t eval_samples = 0, eval_batch_size = 0;
  int64_t batch_size = 0;  // global
  int64_t seq_length = 0, max_predictions = 0;
  int64_t vocab_size = 0, hidden = 0, layers = 0, heads = 0, intermediate = 0, max_positions = 0;
  double dropout = 0;
  double base_learning_rate = 0;
  int64_t warmup_steps = 0, start_warmup_step = 0, train_steps = 0;
  double poly_power = 0;
  double beta1 = 0, beta2 = 0, epsilon = 0, weight_decay = 0, max_grad_norm = 0;
  // The 3-D parallel plan (parallel/plan.h); 1 and 1: the whole model on every rank.
  int64_t tensor_parallel = 1, pipeline_parallel = 1, virtual_pipeline_stages = 1, make_vocab_size_divisible_by = 128;
  std::string pipeline_schedule;
  std::string init_checkpoint;  // relative to the dataset directory unless absolute; empty: none
  std::optional<DatasetSettings> dataset;  // none: the preset trains on the MLPerf shards

  template <typename Visit>
  void fields(Visit& visit) {
    visit("max_samples", max_samples);
    visit("eval_interval_samples", eval_interval_samples);
    visit("eval_samples", eval_samples);
    visit("eval_batch_size", eval_batch_size);
    visit("batch_size", batch_size);
    visit("seq_length", seq_length);
    visit("max_predictions", max_predictions);
    visit("vocab_size", vocab_size);
    visit("hidden", hidden);
    visit("layers", layers);
    visit("heads", heads);
    visit("intermediate", intermediate);
    visit("max_positions", max_positions);
    visit("dropout", dropout);
    visit("base_learning_rate", base_learning_rate);
    visit("warmup_steps", warmup_steps);
    visit("start_warmup_step", start_warmup_step);
    visit("train_steps", train_steps);
    visit("poly_power", poly_power);
    visit("beta1", beta1);
    visit("beta2", beta2);
    visit("epsilon", epsilon);
    visit("weight_decay", weight_decay);
    visit("max_grad_norm", max_grad_norm);
    visit("tensor_parallel", tensor_parallel);
    visit("pipeline_parallel", pipeline_parallel);
    visit("pipeline_schedule", pipeline_schedule);
    visit("virtual_pipeline_stages", virtual_pipeline_stages);
    visit("make_vocab_size_divisible_by", make_vocab_size_divisible_by);
    visit("init_checkpoint", init_checkpoint);
    visit("dataset", dataset);
  }
};

}  // namespace trainbench::bert
