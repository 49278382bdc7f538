#pragma once
// GPT-3's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>

#include "harness/typed_settings.h"

namespace trainbench::gpt3 {

// What `data make gpt3` generates: a public-domain book split into documents, a SentencePiece BPE vocabulary
// trained on the training documents, both sets in Megatron's indexed format, and the mini's starting checkpoint.
struct DatasetSettings {
  int64_t spm_vocab_size = 0;
  int64_t documents_per_validation_document = 0;
  int64_t pretraining_steps = 0;  // of the starting checkpoint, at base_learning_rate with batch_size

  template <typename Visit>
  void fields(Visit& visit) {
    visit("spm_vocab_size", spm_vocab_size);
    visit("documents_per_validation_document", documents_per_validation_document);
    visit("pretraining_steps", pretraining_steps);
  }
};

struct Settings {
  int64_t max_samples = 0;
  std::optional<int64_t> eval_interval_samples;  // none: the rules' ceil(24576 / batch) steps
  int64_t eval_samples = 0, eval_batch_size = 0;
  int64_t batch_size = 0;  // global
  int64_t seq_length = 0;
  int64_t vocab_size = 0, hidden = 0, layers = 0, heads = 0, ffn_hidden = 0, max_positions = 0;
  double init_std = 0;
  bool recompute_activations = false;
  // The learning rate: by the rules for the global batch where absent (docs/gpt3.md).
  std::optional<double> base_learning_rate, end_learning_rate;
  std::optional<int64_t> warmup_steps, decay_steps, init_checkpoint_step;
  double beta1 = 0, beta2 = 0, epsilon = 0, weight_decay = 0, max_grad_norm = 0;
  int64_t tensor_parallel = 1, pipeline_parallel = 1, virtual_pipeline_stages = 1, make_vocab_size_divisible_by = 128;
  std::string pipeline_schedule;
  // Megatron's --train-data-path and --valid-data-path: "weight prefix weight prefix …" or one prefix, relative
  // to the dataset directory.
  std::string train_data, valid_data;
  std::string init_checkpoint;             // a distributed checkpoint directory, relative to the dataset directory
  std::string tokenizer_model;             // data prepare: empty reads C4_PATH/tokenizers/c4_spm/sentencepiece.model
  std::optional<DatasetSettings> dataset;  // none: the preset trains on the prepared C4

  template <typename Visit>
  void fields(Visit& visit) {
    visit("max_samples", max_samples);
    visit("eval_interval_samples", eval_interval_samples);
    visit("eval_samples", eval_samples);
    visit("eval_batch_size", eval_batch_size);
    visit("batch_size", batch_size);
    visit("seq_length", seq_length);
    visit("vocab_size", vocab_size);
    visit("hidden", hidden);
    visit("layers", layers);
    visit("heads", heads);
    visit("ffn_hidden", ffn_hidden);
    visit("max_positions", max_positions);
    visit("init_std", init_std);
    visit("recompute_activations", recompute_activations);
    visit("base_learning_rate", base_learning_rate);
    visit("end_learning_rate", end_learning_rate);
    visit("warmup_steps", warmup_steps);
    visit("decay_steps", decay_steps);
    visit("init_checkpoint_step", init_checkpoint_step);
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
    visit("train_data", train_data);
    visit("valid_data", valid_data);
    visit("init_checkpoint", init_checkpoint);
    visit("tokenizer_model", tokenizer_model);
    visit("dataset", dataset);
  }
};

}  // namespace trainbench::gpt3
