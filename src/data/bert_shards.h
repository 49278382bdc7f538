#pragma once
// The MLPerf BERT pre-training HDF5 format (one file per shard, as the reference's
// create_pretraining_data.py output is converted to by the MLPerf PyTorch/NVIDIA loaders):
//   input_ids            int32 [N, seq]    token ids, [CLS] a [SEP] b [SEP], zero padded
//   input_mask           int8  [N, seq]    1 for real tokens
//   segment_ids          int8  [N, seq]    0 for sentence a, 1 for sentence b
//   masked_lm_positions  int32 [N, preds]  masked token positions, zero padded (position 0 is [CLS],
//                                          never masked, so the first 0 ends the list)
//   masked_lm_ids        int32 [N, preds]  the original ids at those positions, zero padded
//   next_sentence_labels int8  [N]         1 when b is a random sentence, 0 when it follows a
// Files are read and written with the HDF5 C++ API; samples are addressed globally across a list of shards.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trainbench::data {

// Samples in row-major flat buffers, the layout of the HDF5 datasets and of the tensors built from them.
struct BertSamples {
  int64_t seq_length = 0;
  int64_t max_predictions = 0;
  std::vector<int32_t> input_ids;
  std::vector<int8_t> input_mask;
  std::vector<int8_t> segment_ids;
  std::vector<int32_t> masked_lm_positions;
  std::vector<int32_t> masked_lm_ids;
  std::vector<int8_t> next_sentence_labels;

  int64_t size() const { return static_cast<int64_t>(next_sentence_labels.size()); }
  // Appends sample `index` of `other` (same shape).
  void append(const BertSamples& other, int64_t index);
};

// Writes one shard atomically (a temporary name, renamed when complete), chunked and deflate-compressed.
void write_bert_shard(const std::string& path, const BertSamples& samples);
// Reads a whole shard. Throws Error naming the file and dataset on a missing dataset, a wrong rank,
// shape or element type, or disagreeing sample counts.
BertSamples read_bert_shard(const std::string& path);

// A list of shard files as one sequence of samples (global index = offset of its file + index in it).
// Opening reads only the shapes; whole shards are read when needed and the last few are kept, because the
// reference loaders read a shard at a time and the order below visits shards one after another.
class BertShardSet {
 public:
  explicit BertShardSet(std::vector<std::string> files, size_t cached_shards = 2);
  int64_t size() const { return offsets_.back(); }
  int64_t seq_length() const { return seq_length_; }
  int64_t max_predictions() const { return max_predictions_; }
  const std::vector<std::string>& files() const { return files_; }
  int64_t shard_size(size_t shard) const { return offsets_[shard + 1] - offsets_[shard]; }
  int64_t shard_offset(size_t shard) const { return offsets_[shard]; }

  // Copies the samples at these global indices, in this order.
  BertSamples gather(const std::vector<int64_t>& indices);

 private:
  const BertSamples& shard(size_t index);

  std::vector<std::string> files_;
  std::vector<int64_t> offsets_;
  int64_t seq_length_ = 0, max_predictions_ = 0;
  size_t cached_shards_;
  std::vector<std::pair<size_t, std::shared_ptr<const BertSamples>>> cache_;  // most recent last
};

// Lists the *.hdf5 / *.h5 files of a directory in name order; throws Error naming it when there are none.
std::vector<std::string> list_bert_shards(const std::string& directory);

// The training order: each epoch visits the shards in a seeded random order and each shard's samples in a
// seeded random order, and the stream runs on across epochs (BERT counts samples, not epochs). Global batch
// b is stream positions [b*B, (b+1)*B); rank r of W takes its contiguous slice, so the global batch is the
// same for any world size and every sample is seen once per epoch.
class BertTrainOrder {
 public:
  BertTrainOrder(const BertShardSet& shards, uint64_t seed);
  // Global sample indices of rank `rank`'s part of global batch `batch` (batch_size must divide by world).
  std::vector<int64_t> batch(int64_t batch, int64_t batch_size, int rank = 0, int world = 1);
  // The global sample index at stream position `position`.
  int64_t at(int64_t position);

 private:
  void visit_epoch(int64_t epoch);
  void visit_shard(size_t slot);

  std::vector<int64_t> shard_sizes_, shard_offsets_;
  uint64_t seed_;
  int64_t total_;
  // Only the current epoch's shard order and the current shard's sample order are materialised, so the
  // memory is O(shards + shard size) however large the dataset is.
  int64_t epoch_ = -1;
  std::vector<size_t> shard_order_;
  std::vector<int64_t> epoch_starts_;  // stream offset of each slot of shard_order_ within the epoch
  size_t slot_ = SIZE_MAX;
  std::vector<int64_t> sample_order_;
};

// Rank `rank`'s share of [0, count) for evaluation: a contiguous range, the ranks together covering all.
std::pair<int64_t, int64_t> eval_range(int64_t count, int rank, int world);

}  // namespace trainbench::data
