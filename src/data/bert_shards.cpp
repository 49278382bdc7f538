#include "data/bert_shards.h"

#include <H5Cpp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "data/random.h"
#include "util/error.h"

namespace trainbench::data {

namespace {

namespace fs = std::filesystem;

template <typename T>
const H5::PredType& native_type();
template <>
const H5::PredType& native_type<int32_t>() { return H5::PredType::NATIVE_INT32; }
template <>
const H5::PredType& native_type<int8_t>() { return H5::PredType::NATIVE_INT8; }

template <typename T>
void write_dataset(H5::H5File& file, const std::string& name, const std::vector<T>& values, int64_t rows, int64_t columns,
                   const H5::PredType& stored_type) {
  const int rank = columns > 0 ? 2 : 1;
  const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(columns)};
  H5::DataSpace space(rank, dims);
  H5::DSetCreatPropList properties;
  if (rows > 0) {
    const hsize_t chunk[2] = {static_cast<hsize_t>(std::min<int64_t>(rows, 1024)), dims[1]};
    properties.setChunk(rank, chunk);
    properties.setDeflate(4);
  }
  H5::DataSet dataset = file.createDataSet(name, stored_type, space, properties);
  if (!values.empty()) dataset.write(values.data(), native_type<T>());
}

// The shape of one dataset, checked against what the format says it is.
struct DatasetShape {
  int64_t rows = 0, columns = 0;
};

template <typename T>
DatasetShape check_dataset(const H5::H5File& file, const std::string& path, const std::string& name, int rank) {
  if (!file.nameExists(name)) fail(path, "has no dataset '" + name + "'");
  H5::DataSet dataset = file.openDataSet(name);
  const H5T_class_t type_class = dataset.getTypeClass();
  const size_t expected_bytes = sizeof(T);
  if (type_class != H5T_INTEGER || dataset.getIntType().getSize() != expected_bytes)
    fail(path + ": " + name, "expected " + std::to_string(8 * expected_bytes) + "-bit integers");
  H5::DataSpace space = dataset.getSpace();
  if (space.getSimpleExtentNdims() != rank)
    fail(path + ": " + name, "expected " + std::to_string(rank) + " dimensions, found " +
                                 std::to_string(space.getSimpleExtentNdims()));
  hsize_t dims[2] = {0, 0};
  space.getSimpleExtentDims(dims);
  return {static_cast<int64_t>(dims[0]), rank == 2 ? static_cast<int64_t>(dims[1]) : 0};
}

template <typename T>
std::vector<T> read_dataset(const H5::H5File& file, const std::string& name, size_t count) {
  std::vector<T> values(count);
  if (count > 0) file.openDataSet(name).read(values.data(), native_type<T>());
  return values;
}

// HDF5 prints its own error stack to stderr by default; our Error messages say what went wrong instead.
void silence_hdf5() {
  static const bool silenced = [] {
    H5::Exception::dontPrint();
    return true;
  }();
  (void)silenced;
}

}  // namespace

void BertSamples::append(const BertSamples& other, int64_t index) {
  const auto copy = [index](auto& into, const auto& from, int64_t width) {
    into.insert(into.end(), from.begin() + index * width, from.begin() + (index + 1) * width);
  };
  copy(input_ids, other.input_ids, seq_length);
  copy(input_mask, other.input_mask, seq_length);
  copy(segment_ids, other.segment_ids, seq_length);
  copy(masked_lm_positions, other.masked_lm_positions, max_predictions);
  copy(masked_lm_ids, other.masked_lm_ids, max_predictions);
  copy(next_sentence_labels, other.next_sentence_labels, 1);
}

void write_bert_shard(const std::string& path, const BertSamples& samples) {
  silence_hdf5();
  const int64_t n = samples.size(), seq = samples.seq_length, preds = samples.max_predictions;
  if (static_cast<int64_t>(samples.input_ids.size()) != n * seq || static_cast<int64_t>(samples.input_mask.size()) != n * seq ||
      static_cast<int64_t>(samples.segment_ids.size()) != n * seq ||
      static_cast<int64_t>(samples.masked_lm_positions.size()) != n * preds ||
      static_cast<int64_t>(samples.masked_lm_ids.size()) != n * preds)
    fail(path, "BERT samples have inconsistent buffer sizes");
  const std::string partial = path + ".partial";
  try {
    H5::H5File file(partial, H5F_ACC_TRUNC);
    write_dataset(file, "input_ids", samples.input_ids, n, seq, H5::PredType::STD_I32LE);
    write_dataset(file, "input_mask", samples.input_mask, n, seq, H5::PredType::STD_I8LE);
    write_dataset(file, "segment_ids", samples.segment_ids, n, seq, H5::PredType::STD_I8LE);
    write_dataset(file, "masked_lm_positions", samples.masked_lm_positions, n, preds, H5::PredType::STD_I32LE);
    write_dataset(file, "masked_lm_ids", samples.masked_lm_ids, n, preds, H5::PredType::STD_I32LE);
    write_dataset(file, "next_sentence_labels", samples.next_sentence_labels, n, 0, H5::PredType::STD_I8LE);
  } catch (const H5::Exception& error) {
    fail(path, "cannot write HDF5: " + error.getDetailMsg());
  }
  fs::rename(partial, path);
}

BertSamples read_bert_shard(const std::string& path) {
  silence_hdf5();
  if (!fs::is_regular_file(path)) fail(path, "BERT shard does not exist");
  try {
    const H5::H5File file(path, H5F_ACC_RDONLY);
    const DatasetShape ids = check_dataset<int32_t>(file, path, "input_ids", 2);
    const DatasetShape positions = check_dataset<int32_t>(file, path, "masked_lm_positions", 2);
    const auto expect = [&](const std::string& name, DatasetShape shape, DatasetShape expected) {
      if (shape.rows != expected.rows || shape.columns != expected.columns)
        fail(path + ": " + name, "shape [" + std::to_string(shape.rows) + (shape.columns ? ", " + std::to_string(shape.columns) : "") +
                                     "] does not match the expected [" + std::to_string(expected.rows) +
                                     (expected.columns ? ", " + std::to_string(expected.columns) : "") + "]");
    };
    expect("input_mask", check_dataset<int8_t>(file, path, "input_mask", 2), ids);
    expect("segment_ids", check_dataset<int8_t>(file, path, "segment_ids", 2), ids);
    expect("masked_lm_positions", positions, {ids.rows, positions.columns});
    expect("masked_lm_ids", check_dataset<int32_t>(file, path, "masked_lm_ids", 2), {ids.rows, positions.columns});
    expect("next_sentence_labels", check_dataset<int8_t>(file, path, "next_sentence_labels", 1), {ids.rows, 0});

    BertSamples samples;
    samples.seq_length = ids.columns;
    samples.max_predictions = positions.columns;
    const size_t tokens = static_cast<size_t>(ids.rows * ids.columns), predictions = static_cast<size_t>(ids.rows * positions.columns);
    samples.input_ids = read_dataset<int32_t>(file, "input_ids", tokens);
    samples.input_mask = read_dataset<int8_t>(file, "input_mask", tokens);
    samples.segment_ids = read_dataset<int8_t>(file, "segment_ids", tokens);
    samples.masked_lm_positions = read_dataset<int32_t>(file, "masked_lm_positions", predictions);
    samples.masked_lm_ids = read_dataset<int32_t>(file, "masked_lm_ids", predictions);
    samples.next_sentence_labels = read_dataset<int8_t>(file, "next_sentence_labels", static_cast<size_t>(ids.rows));
    return samples;
  } catch (const H5::Exception& error) {
    fail(path, "cannot read as HDF5: " + error.getDetailMsg());
  }
}

BertShardSet::BertShardSet(std::vector<std::string> files, size_t cached_shards)
    : files_(std::move(files)), offsets_{0}, cached_shards_(std::max<size_t>(1, cached_shards)) {
  silence_hdf5();
  if (files_.empty()) fail("BERT dataset", "no shard files given");
  for (const std::string& path : files_) {
    if (!fs::is_regular_file(path)) fail(path, "BERT shard does not exist");
    try {
      const H5::H5File file(path, H5F_ACC_RDONLY);
      const DatasetShape ids = check_dataset<int32_t>(file, path, "input_ids", 2);
      const DatasetShape positions = check_dataset<int32_t>(file, path, "masked_lm_positions", 2);
      if (offsets_.size() == 1) {
        seq_length_ = ids.columns;
        max_predictions_ = positions.columns;
      } else if (ids.columns != seq_length_ || positions.columns != max_predictions_) {
        fail(path, "has sequence length " + std::to_string(ids.columns) + " and " + std::to_string(positions.columns) +
                       " predictions, but " + files_.front() + " has " + std::to_string(seq_length_) + " and " +
                       std::to_string(max_predictions_));
      }
      offsets_.push_back(offsets_.back() + ids.rows);
    } catch (const H5::Exception& error) {
      fail(path, "cannot read as HDF5: " + error.getDetailMsg());
    }
  }
  if (size() == 0) fail(files_.front(), "BERT dataset has no samples");
}

const BertSamples& BertShardSet::shard(size_t index) {
  const auto cached = std::find_if(cache_.begin(), cache_.end(), [&](const auto& entry) { return entry.first == index; });
  if (cached != cache_.end()) {
    std::rotate(cached, cached + 1, cache_.end());
    return *cache_.back().second;
  }
  auto samples = std::make_shared<const BertSamples>(read_bert_shard(files_[index]));
  if (samples->size() != shard_size(index)) fail(files_[index], "changed while it was being read");
  if (cache_.size() == cached_shards_) cache_.erase(cache_.begin());
  cache_.emplace_back(index, std::move(samples));
  return *cache_.back().second;
}

BertSamples BertShardSet::gather(const std::vector<int64_t>& indices) {
  BertSamples batch;
  batch.seq_length = seq_length_;
  batch.max_predictions = max_predictions_;
  batch.input_ids.reserve(indices.size() * seq_length_);
  for (const int64_t index : indices) {
    if (index < 0 || index >= size()) fail("BERT dataset", "sample index " + std::to_string(index) + " out of range");
    const size_t file = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), index) - offsets_.begin() - 1);
    batch.append(shard(file), index - offsets_[file]);
  }
  return batch;
}

std::vector<std::string> list_bert_shards(const std::string& directory) {
  if (!fs::is_directory(directory)) fail(directory, "BERT data directory does not exist");
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string extension = entry.path().extension().string();
    if (extension != ".hdf5" && extension != ".h5") continue;
    if (!entry.is_regular_file())
      fail(entry.path().string(), "is named like a shard (.hdf5, .h5) but is not a regular file (a directory, a broken link?)");
    files.push_back(entry.path().string());
  }
  if (files.empty()) fail(directory, "has no .hdf5 shard files");
  std::sort(files.begin(), files.end());
  return files;
}

BertTrainOrder::BertTrainOrder(const BertShardSet& shards, uint64_t seed) : seed_(seed), total_(shards.size()) {
  for (size_t i = 0; i < shards.files().size(); ++i) {
    shard_sizes_.push_back(shards.shard_size(i));
    shard_offsets_.push_back(shards.shard_offset(i));
  }
}

// Fisher-Yates with the project's portable PRNG, so an order is the same on every standard library.
template <typename T>
static void shuffle(std::vector<T>& values, Rng& rng) {
  for (size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[rng.next_u64() % i]);
}

void BertTrainOrder::visit_epoch(int64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  shard_order_.resize(shard_sizes_.size());
  std::iota(shard_order_.begin(), shard_order_.end(), size_t{0});
  Rng rng(mix_seed(seed_, static_cast<uint64_t>(epoch)));
  shuffle(shard_order_, rng);
  epoch_starts_.assign(1, 0);
  for (const size_t shard : shard_order_) epoch_starts_.push_back(epoch_starts_.back() + shard_sizes_[shard]);
  slot_ = SIZE_MAX;
}

void BertTrainOrder::visit_shard(size_t slot) {
  if (slot == slot_) return;
  slot_ = slot;
  const size_t shard = shard_order_[slot];
  sample_order_.resize(static_cast<size_t>(shard_sizes_[shard]));
  std::iota(sample_order_.begin(), sample_order_.end(), shard_offsets_[shard]);
  Rng rng(mix_seed(seed_, static_cast<uint64_t>(epoch_), shard + 1));
  shuffle(sample_order_, rng);
}

int64_t BertTrainOrder::at(int64_t position) {
  visit_epoch(position / total_);
  const int64_t within = position % total_;
  const size_t slot = static_cast<size_t>(std::upper_bound(epoch_starts_.begin(), epoch_starts_.end(), within) - epoch_starts_.begin() - 1);
  visit_shard(slot);
  return sample_order_[static_cast<size_t>(within - epoch_starts_[slot])];
}

std::vector<int64_t> BertTrainOrder::batch(int64_t batch, int64_t batch_size, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world || batch_size % world != 0)
    fail("BERT train order", "global batch " + std::to_string(batch_size) + " cannot be split evenly over " +
                                 std::to_string(world) + " ranks (rank " + std::to_string(rank) + ")");
  const int64_t local = batch_size / world;
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(local));
  for (int64_t i = 0; i < local; ++i) indices.push_back(at(batch * batch_size + rank * local + i));
  return indices;
}

std::pair<int64_t, int64_t> eval_range(int64_t count, int rank, int world) {
  return {count * rank / world, count * (rank + 1) / world};
}

}  // namespace trainbench::data
