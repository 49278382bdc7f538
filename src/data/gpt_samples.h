#pragma once
// The GPT sample index of MLPerf's GPT-3 reference (Megatron-LM's megatron/data/gpt_dataset.py with its C++
// helper helpers.cpp, and the blend of blendable_dataset.py / dataset_utils.py), computed as they compute it, so
// that a seed gives the reference's samples in the reference's order. Over the documents of a split:
//   doc_idx     the documents of every epoch in order. Upstream Megatron shuffles it; the MLPerf reference has
//               that shuffle commented out ("Disabled document shuffling"), so it is the epochs back to back.
//   sample_idx  rows (position in doc_idx, token offset): sample i runs from row i to row i + 1, seq_length
//               tokens (+1 that overlaps the next sample when seq_len_plus_one_tokens).
//   shuffle_idx numpy RandomState(seed) shuffles of the samples, the last epoch shuffled on its own when it is
//               used for less than 80% (separate_last_epoch).
// Plain C++, no LibTorch.
#include <cstdint>
#include <memory>
#include <vector>

#include "data/megatron_indexed.h"
#include "data/numpy_random.h"

namespace trainbench::data {

struct GptSampleSpec {
  std::vector<int32_t> documents;  // sequence numbers of the split, gpt_dataset.py's `documents`
  // Samples wanted. Negative (what `--eval-iters -1` asks for validation): one epoch, every token used, the last
  // sample kept although short (GptSamples pads it with -1).
  int64_t num_samples = 0;
  int32_t seq_length = 0;
  uint32_t seed = 0;
  // Megatron's default: samples of seq_length + 1 tokens, overlapping by one. MLPerf's run_gpt3.sh passes
  // --no-seq-len-plus-one-tokens: seq_length tokens, not overlapping (labels are the tokens rolled by one, the
  // last position without a label).
  bool seq_len_plus_one_tokens = true;
};

// A row of sample_idx.
struct SampleStart {
  int32_t doc_position;  // index into doc_idx
  int32_t offset;        // first token within that document
  bool operator==(const SampleStart& other) const {
    return doc_position == other.doc_position && offset == other.offset;
  }
};

// How many epochs the samples take and whether the last one is shuffled apart (_build_index_mappings).
struct EpochPlan {
  int32_t num_epochs = 0;
  bool separate_last_epoch = false;
  int64_t samples_before_last_epoch = 0;  // the first part of shuffle_idx when separate_last_epoch
};

struct GptSampleIndex {
  int64_t tokens_per_epoch = 0;
  EpochPlan epochs;
  std::vector<int32_t> doc_idx;
  std::vector<SampleStart> sample_idx;
  std::vector<int64_t> shuffle_idx;
};

// _num_tokens: the tokens of the split's documents.
int64_t count_tokens(const std::vector<int32_t>& sizes, const std::vector<int32_t>& documents);
// _num_epochs and the separate_last_epoch rule. extra_token is 1 with seq_len_plus_one_tokens, else 0.
EpochPlan plan_epochs(int64_t tokens_per_epoch, int32_t seq_length, int64_t num_samples, int32_t extra_token);
// _build_doc_idx of the MLPerf reference (no document shuffle).
std::vector<int32_t> build_doc_idx(const std::vector<int32_t>& documents, int32_t num_epochs);
// helpers.cpp's build_sample_idx, including its single-precision ceil when keep_last_sequence.
std::vector<SampleStart> build_sample_idx(const std::vector<int32_t>& sizes, const std::vector<int32_t>& doc_idx,
                                          int32_t seq_length, int32_t num_epochs, int64_t tokens_per_epoch,
                                          bool keep_last_sequence, int32_t extra_token);
// _build_shuffle_idx: [0, first_part) shuffled, then [first_part, total) shuffled, from the same generator.
std::vector<int64_t> build_shuffle_idx(int64_t first_part, int64_t total, NumpyRandomState& random);
// All of _build_index_mappings. Throws Error where the reference would stop (a document outside the dataset,
// seq_length below 2, fewer than 2 tokens, an index beyond its int32 fields).
GptSampleIndex build_gpt_sample_index(const std::vector<int32_t>& sizes, const GptSampleSpec& spec);

// GPTDataset: sample i as GPTDataset.__getitem__(i) reads it, seq_length (+1) tokens, -1 after the end of a
// short last sample.
class GptSamples {
 public:
  GptSamples(std::shared_ptr<const IndexedDataset> dataset, GptSampleSpec spec);

  int64_t size() const { return static_cast<int64_t>(index_.sample_idx.size()) - 1; }
  int32_t sample_length() const { return spec_.seq_length + (spec_.seq_len_plus_one_tokens ? 1 : 0); }
  const GptSampleIndex& index() const { return index_; }
  const GptSampleSpec& spec() const { return spec_; }

  // Writes sample_length() tokens. Throws Error naming the sample when i is outside [0, size()).
  void sample(int64_t i, int32_t* out) const;
  std::vector<int32_t> sample(int64_t i) const;

 private:
  std::shared_ptr<const IndexedDataset> dataset_;
  GptSampleSpec spec_;
  GptSampleIndex index_;
};

// ---- the blend (blendable_dataset.py, dataset_utils.py) ----

// Weights divided by their sum, as get_datasets_weights_and_num_samples normalises them.
std::vector<double> normalized_blend_weights(const std::vector<double>& weights);
// Samples to build from each dataset of a blend: ceil(num_samples * normalised weight * 1.005), the 0.5% margin
// get_datasets_weights_and_num_samples adds. A negative num_samples stays -1 for a weight of 1 (the whole set).
std::vector<int64_t> blend_num_samples(const std::vector<double>& weights, int64_t num_samples);

struct BlendingIndices {
  std::vector<uint8_t> dataset_index;         // which dataset blended sample i comes from
  std::vector<int64_t> dataset_sample_index;  // its sample number in that dataset
};
// helpers.cpp's build_blending_indices over `size` samples (the blend's size is the sum of its datasets'
// sizes), with the weights normalised as dataset_utils.py and then BlendableDataset normalise them.
BlendingIndices blending_indices(const std::vector<double>& weights, int64_t size);

// BlendableDataset over GPT datasets. Its size is the datasets' sizes added up, as the reference's; its tail can
// ask a dataset for more samples than it holds (each holds whole epochs, not its share of the blend), which
// throws Error here (IndexError there). Training reads only the first num_samples, which the 0.5% margin of
// blend_num_samples is there to keep inside every dataset.
class BlendedSamples {
 public:
  BlendedSamples(std::vector<std::shared_ptr<const GptSamples>> datasets, const std::vector<double>& weights);

  int64_t size() const { return static_cast<int64_t>(indices_.dataset_index.size()); }
  int32_t sample_length() const { return datasets_.front()->sample_length(); }
  const BlendingIndices& indices() const { return indices_; }
  void sample(int64_t i, int32_t* out) const;
  std::vector<int32_t> sample(int64_t i) const;

 private:
  std::vector<std::shared_ptr<const GptSamples>> datasets_;
  BlendingIndices indices_;
};

}  // namespace trainbench::data
