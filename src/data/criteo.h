#pragma once
// Criteo click logs (the DLRM dataset): the day-file text format, the hashing of categorical values into
// embedding-table rows, and trainbench's prepared binary form with a shard-aware batch reader.
//
// Day files (Criteo 1TB "day_0" ... "day_23", optionally gzip-compressed): one sample per line,
//   label \t I1 ... I13 \t C1 ... C26
// label is 0 or 1; I* are decimal integers (may be negative), C* are hexadecimal 32-bit hashes (Criteo
// prints 8 digits); any of I*/C* may be empty. As in the reference (facebookresearch/dlrm data_utils.py),
// an empty field reads as 0 and negative integers are clamped to 0.
//
// Prepared form (`trainbench data prepare dlrm`, written once): two files, train.bin and eval.bin, each
//   header (240 bytes, little-endian):
//     char     magic[8]       "TBCRITEO"
//     uint32   version        1
//     uint32   dense_count    13
//     uint32   sparse_count   26
//     uint32   record_bytes   160
//     uint64   samples
//     uint64   table_sizes[26]   rows of each embedding table the categorical values were hashed into
//   then `samples` records of 40 int32: label, 13 dense values (clamped to >= 0, not yet log-transformed),
//   26 table rows (categorical value % table size).
// Fixed-size records let a reader seek straight to any global batch, so training can shuffle the batch
// order and every rank can read only its own slice of each batch.
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace trainbench::data {

constexpr int kCriteoDense = 13;
constexpr int kCriteoSparse = 26;

struct CriteoRow {
  int32_t label = 0;
  std::array<int64_t, kCriteoDense> dense{};      // as written; empty -> 0
  std::array<uint32_t, kCriteoSparse> sparse{};   // as written; empty -> 0
};

// Parses one line (without its newline). Errors name `file:line` and the field that is wrong.
CriteoRow parse_criteo_line(std::string_view line, const std::string& file, int64_t line_number);

// Reads a day file line by line, plain or gzip (zlib detects which).
class CriteoDayReader {
 public:
  explicit CriteoDayReader(std::string path);
  ~CriteoDayReader();
  CriteoDayReader(const CriteoDayReader&) = delete;
  CriteoDayReader& operator=(const CriteoDayReader&) = delete;

  // False at the end of the file.
  bool next(CriteoRow& row);
  int64_t line_number() const { return line_number_; }

 private:
  std::string path_;
  void* file_ = nullptr;  // gzFile, kept out of the header so users need no zlib.h
  std::string line_;
  int64_t line_number_ = 0;
};

// The embedding row of a categorical value: its value modulo the table size (the reference's
// --max-ind-range hashing).
inline int32_t hash_to_row(uint32_t value, uint64_t table_size) { return static_cast<int32_t>(value % table_size); }

// The day files of a directory in day order: day_0, day_1, ... (each plain or .gz). Fails when there are none.
std::vector<std::string> find_day_files(const std::string& dir);

struct PreparedCounts {
  int64_t train_samples = 0;
  int64_t eval_samples = 0;
};

// Writes out_dir/train.bin from every day file but the last and out_dir/eval.bin from the last (MLPerf
// trains on days 0-22 and evaluates on day 23). The days must be day_0 .. day_{N-1} with none missing, and
// N = expected_days unless that is 0. Each file appears atomically; a failed one leaves no .partial.
PreparedCounts prepare_criteo(const std::string& in_dir, const std::string& out_dir,
                              const std::vector<uint64_t>& table_sizes, int expected_days);

// A prepared file: header validated on open.
struct PreparedHeader {
  int64_t samples = 0;
  std::vector<uint64_t> table_sizes;
};
PreparedHeader read_prepared_header(const std::string& path);

// One rank's part of one global batch, ready to wrap as tensors.
struct CriteoBatch {
  int64_t size = 0;
  std::vector<float> dense;     // size x 13, log(x + 1) as the reference feeds the bottom MLP
  std::vector<int64_t> sparse;  // size x 26 table rows
  std::vector<float> labels;    // size
};

struct CriteoReaderOptions {
  int64_t global_batch_size = 1;
  int rank = 0;
  int world_size = 1;
  bool drop_last = true;   // training: only full global batches; eval: the last, partial one too
  bool shuffle = false;    // training: a new batch order each epoch, drawn from (seed, epoch)
  uint64_t seed = 0;
};

// Reads a prepared file by global batch. Global batch b holds records [b*G, (b+1)*G); rank r of W reads
// the contiguous slice [r*G/W, (r+1)*G/W) of it, so every sample is read once per epoch by exactly one
// rank, and what makes up a global batch does not depend on W. With shuffle, the order of the global
// batches is permuted per epoch (as the reference's --mlperf-bin-shuffle does); samples stay with their
// batch, so each read is one sequential pread.
class CriteoBatchReader {
 public:
  CriteoBatchReader(std::string path, CriteoReaderOptions options,
                    const std::vector<uint64_t>& expected_table_sizes);
  ~CriteoBatchReader();
  CriteoBatchReader(const CriteoBatchReader&) = delete;
  CriteoBatchReader& operator=(const CriteoBatchReader&) = delete;

  int64_t samples() const { return header_.samples; }
  int64_t batches_per_epoch() const;
  // Samples one epoch trains on, over all ranks.
  int64_t samples_per_epoch() const;
  void start_epoch(int64_t epoch);
  // The next batch of this epoch, or false when the epoch is over. A rank's slice may be empty when a
  // partial last batch has fewer samples than ranks.
  bool next(CriteoBatch& batch);
  int64_t position() const { return next_batch_; }  // batches of this epoch already read

 private:
  std::string path_;
  CriteoReaderOptions options_;
  PreparedHeader header_;
  int fd_ = -1;
  std::vector<int64_t> order_;
  int64_t next_batch_ = 0;
  std::vector<int32_t> records_;
};

}  // namespace trainbench::data
