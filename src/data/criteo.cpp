#include "data/criteo.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include "data/random.h"
#include "util/error.h"

namespace trainbench::data {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'T', 'B', 'C', 'R', 'I', 'T', 'E', 'O'};
constexpr uint32_t kVersion = 1;
constexpr int kRecordInts = 1 + kCriteoDense + kCriteoSparse;
constexpr uint32_t kRecordBytes = kRecordInts * sizeof(int32_t);
constexpr size_t kHeaderBytes = 8 + 4 * 4 + 8 + 8 * kCriteoSparse;

std::string where(const std::string& file, int64_t line_number) { return file + ":" + std::to_string(line_number); }

std::string field_name(int field) {
  if (field == 0) return "label";
  if (field <= kCriteoDense) return "I" + std::to_string(field);
  return "C" + std::to_string(field - kCriteoDense);
}

// The prepared header as bytes, in the documented order (x86/ARM little-endian, as written natively).
std::string encode_header(int64_t samples, const std::vector<uint64_t>& table_sizes) {
  std::string bytes(kMagic, sizeof kMagic);
  const auto put = [&](const auto value) { bytes.append(reinterpret_cast<const char*>(&value), sizeof value); };
  put(kVersion);
  put(static_cast<uint32_t>(kCriteoDense));
  put(static_cast<uint32_t>(kCriteoSparse));
  put(kRecordBytes);
  put(static_cast<uint64_t>(samples));
  for (const uint64_t size : table_sizes) put(size);
  return bytes;
}

void check_table_sizes(const std::vector<uint64_t>& table_sizes, const std::string& where_from) {
  if (table_sizes.size() != kCriteoSparse)
    fail(where_from, "expected " + std::to_string(kCriteoSparse) + " table sizes, got " + std::to_string(table_sizes.size()));
  for (size_t i = 0; i < table_sizes.size(); ++i)
    if (table_sizes[i] == 0 || table_sizes[i] > static_cast<uint64_t>(INT32_MAX))
      fail(where_from, "table size " + std::to_string(i) + " is " + std::to_string(table_sizes[i]) +
                           " (expected 1 .. 2147483647)");
}

// Streams records into "<path>.partial", then writes the header (whose sample count is known only at the
// end) and renames. Not util/AtomicFile: that one is append-only and cannot patch the header.
class PreparedWriter {
 public:
  PreparedWriter(std::string path, const std::vector<uint64_t>& table_sizes)
      : path_(std::move(path)), table_sizes_(table_sizes) {
    file_ = std::fopen(partial().c_str(), "wb");
    if (!file_) fail(partial(), std::string("cannot open for writing: ") + std::strerror(errno));
    write(encode_header(0, table_sizes_));
  }
  // Unfinished (an error, a full disk): no half-written file stays behind.
  ~PreparedWriter() {
    if (!file_) return;
    std::fclose(file_);
    std::remove(partial().c_str());
  }

  void add(const CriteoRow& row) {
    std::array<int32_t, kRecordInts> record;
    record[0] = row.label;
    for (int i = 0; i < kCriteoDense; ++i) record[1 + i] = static_cast<int32_t>(std::max<int64_t>(row.dense[i], 0));
    for (int i = 0; i < kCriteoSparse; ++i) record[1 + kCriteoDense + i] = hash_to_row(row.sparse[i], table_sizes_[i]);
    write(std::string(reinterpret_cast<const char*>(record.data()), kRecordBytes));
    ++samples_;
  }

  int64_t commit() {
    if (std::fseek(file_, 0, SEEK_SET) != 0) fail(partial(), std::string("cannot seek: ") + std::strerror(errno));
    write(encode_header(samples_, table_sizes_));
    const bool synced = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
    std::fclose(file_);
    file_ = nullptr;
    if (!synced) fail(partial(), std::string("cannot sync to disk: ") + std::strerror(errno));
    std::error_code ec;
    fs::rename(partial(), path_, ec);
    if (ec) fail(path_, "cannot move into place: " + ec.message());
    return samples_;
  }

 private:
  std::string partial() const { return path_ + ".partial"; }
  void write(const std::string& bytes) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
      fail(partial(), std::string("write failed: ") + std::strerror(errno));
  }
  std::string path_;
  std::vector<uint64_t> table_sizes_;
  std::FILE* file_ = nullptr;
  int64_t samples_ = 0;
};

int64_t prepare_files(const std::vector<std::string>& days, const std::string& out_path,
                      const std::vector<uint64_t>& table_sizes) {
  PreparedWriter writer(out_path, table_sizes);
  CriteoRow row;
  for (const std::string& day : days) {
    CriteoDayReader reader(day);
    while (reader.next(row)) writer.add(row);
  }
  return writer.commit();
}

}  // namespace

CriteoRow parse_criteo_line(std::string_view line, const std::string& file, int64_t line_number) {
  CriteoRow row;
  size_t start = 0;
  int field = 0;
  for (;; ++field) {
    const size_t tab = line.find('\t', start);
    const std::string_view text = line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start);
    if (field >= 1 + kCriteoDense + kCriteoSparse)
      fail(where(file, line_number), "more than 40 tab-separated fields (expected label, 13 integer, 26 categorical)");
    const char* first = text.data();
    const char* last = text.data() + text.size();
    if (field == 0) {
      if (text != "0" && text != "1")
        fail(where(file, line_number), "bad label \"" + std::string(text) + "\" (expected 0 or 1)");
      row.label = text[0] - '0';
    } else if (!text.empty() && field <= kCriteoDense) {
      int64_t value = 0;
      const auto result = std::from_chars(first, last, value, 10);
      if (result.ec != std::errc() || result.ptr != last)
        fail(where(file, line_number), "bad integer \"" + std::string(text) + "\" in field " + field_name(field));
      row.dense[field - 1] = value;
    } else if (!text.empty()) {
      uint32_t value = 0;
      const auto result = std::from_chars(first, last, value, 16);
      if (result.ec != std::errc() || result.ptr != last || text.size() > 8)
        fail(where(file, line_number),
             "bad hex value \"" + std::string(text) + "\" in field " + field_name(field) + " (expected up to 8 hex digits)");
      row.sparse[field - 1 - kCriteoDense] = value;
    }
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (field + 1 != 1 + kCriteoDense + kCriteoSparse)
    fail(where(file, line_number), "short line: " + std::to_string(field + 1) +
                                       " tab-separated fields, expected 40 (label, 13 integer, 26 categorical)");
  return row;
}

CriteoDayReader::CriteoDayReader(std::string path) : path_(std::move(path)) {
  file_ = gzopen(path_.c_str(), "rb");
  if (!file_) fail(path_, std::string("cannot open for reading: ") + std::strerror(errno));
  gzbuffer(static_cast<gzFile>(file_), 1 << 20);
}

CriteoDayReader::~CriteoDayReader() {
  if (file_) gzclose(static_cast<gzFile>(file_));
}

bool CriteoDayReader::next(CriteoRow& row) {
  auto* file = static_cast<gzFile>(file_);
  line_.clear();
  char buffer[4096];
  bool got_any = false;
  while (gzgets(file, buffer, sizeof buffer)) {
    got_any = true;
    line_ += buffer;
    if (!line_.empty() && line_.back() == '\n') break;
  }
  // zlib reports a gzip stream cut short (no end-of-stream block, no CRC and length trailer) as Z_BUF_ERROR
  // and a wrong CRC as Z_DATA_ERROR; either may surface while the last (partial) line is returned.
  // The whole file is then bad, wherever zlib noticed, so the error names the file, not a line.
  int error = Z_OK;
  std::string message = gzerror(file, &error);
  if (message.rfind(path_ + ": ", 0) == 0) message.erase(0, path_.size() + 2);  // zlib prefixes the path
  if (error == Z_BUF_ERROR) fail(path_, "truncated gzip file: it ends before the gzip end-of-stream marker and CRC");
  if (error != Z_OK) fail(path_, "cannot read: " + message);
  if (!got_any) {
    if (!gzeof(file)) fail(where(path_, line_number_ + 1), "cannot read (truncated gzip stream?)");
    return false;
  }
  ++line_number_;
  if (!line_.empty() && line_.back() == '\n') line_.pop_back();
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  row = parse_criteo_line(line_, path_, line_number_);
  return true;
}

std::vector<std::string> find_day_files(const std::string& dir) {
  if (!fs::is_directory(dir)) fail(dir, "is not a directory (expected Criteo day files day_0, day_1, ...)");
  std::vector<std::pair<int, std::string>> days;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) name.resize(name.size() - 3);
    if (name.rfind("day_", 0) != 0) continue;
    int day = 0;
    const char* digits = name.c_str() + 4;
    const auto result = std::from_chars(digits, name.c_str() + name.size(), day);
    if (result.ec != std::errc() || result.ptr != name.c_str() + name.size() || name.size() == 4) continue;
    days.emplace_back(day, entry.path().string());
  }
  std::sort(days.begin(), days.end());
  for (size_t i = 1; i < days.size(); ++i)
    if (days[i].first == days[i - 1].first) fail(days[i].second, "duplicates " + days[i - 1].second);
  if (days.size() < 2) fail(dir, "needs at least two day files day_N[.gz] (the last one is the eval set)");
  std::vector<std::string> paths;
  for (auto& day : days) paths.push_back(std::move(day.second));
  return paths;
}

PreparedCounts prepare_criteo(const std::string& in_dir, const std::string& out_dir,
                              const std::vector<uint64_t>& table_sizes, int expected_days) {
  check_table_sizes(table_sizes, "table sizes");
  std::vector<std::string> days = find_day_files(in_dir);
  // day_N must be the N-th file: a missing day would silently shrink the training set or make an earlier
  // day the eval set.
  std::string last = fs::path(days.back()).filename().string();
  const int last_day = std::atoi(last.c_str() + 4);  // find_day_files checked the name: day_<N>[.gz]
  const int day_count = std::max(expected_days, last_day + 1);
  const int named_days = expected_days ? expected_days : day_count;
  std::string expected = "day_0 .. day_" + std::to_string(named_days - 1) + ", plain or .gz";
  if (expected_days) expected += ": the preset's " + std::to_string(expected_days) + " days";
  for (int day = 0; day < day_count; ++day) {
    const std::string name = "day_" + std::to_string(day);
    std::string found = day < static_cast<int>(days.size()) ? fs::path(days[day]).filename().string() : "";
    if (found.size() > 3 && found.compare(found.size() - 3, 3, ".gz") == 0) found.resize(found.size() - 3);
    if (found != name) fail((fs::path(in_dir) / name).string(), "missing (expected " + expected + ")");
  }
  if (expected_days && static_cast<int>(days.size()) > expected_days)
    fail(days[expected_days], "is not one of the preset's days (expected " + expected + ")");
  const std::string eval_day = days.back();
  days.pop_back();
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail(out_dir, "cannot create directory: " + ec.message());
  PreparedCounts counts;
  counts.train_samples = prepare_files(days, (fs::path(out_dir) / "train.bin").string(), table_sizes);
  counts.eval_samples = prepare_files({eval_day}, (fs::path(out_dir) / "eval.bin").string(), table_sizes);
  return counts;
}

PreparedHeader read_prepared_header(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) fail(path, std::string("cannot open for reading: ") + std::strerror(errno) +
                            " (write it with `trainbench data prepare dlrm`)");
  std::string bytes(kHeaderBytes, '\0');
  const size_t got = std::fread(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
  if (got != kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    fail(path, "not a trainbench prepared Criteo file (magic \"TBCRITEO\" missing)");
  size_t offset = sizeof kMagic;
  const auto take = [&](auto& value) {
    std::memcpy(&value, bytes.data() + offset, sizeof value);
    offset += sizeof value;
  };
  uint32_t version = 0, dense = 0, sparse = 0, record_bytes = 0;
  uint64_t samples = 0;
  take(version);
  take(dense);
  take(sparse);
  take(record_bytes);
  take(samples);
  if (version != kVersion) fail(path, "format version " + std::to_string(version) + ", this build reads version 1");
  if (dense != kCriteoDense || sparse != kCriteoSparse || record_bytes != kRecordBytes)
    fail(path, "header says " + std::to_string(dense) + " dense, " + std::to_string(sparse) + " categorical, " +
                   std::to_string(record_bytes) + "-byte records (expected 13, 26, 160)");
  PreparedHeader header;
  header.table_sizes.resize(kCriteoSparse);
  for (auto& size : header.table_sizes) take(size);
  check_table_sizes(header.table_sizes, path);
  std::error_code ec;
  const uint64_t file_size = fs::file_size(path, ec);
  if (ec || file_size != kHeaderBytes + samples * kRecordBytes)
    fail(path, "size " + std::to_string(file_size) + " bytes does not match its header (" + std::to_string(samples) +
                   " samples: expected " + std::to_string(kHeaderBytes + samples * kRecordBytes) + ")");
  if (samples == 0) fail(path, "holds no samples");
  header.samples = static_cast<int64_t>(samples);
  return header;
}

CriteoBatchReader::CriteoBatchReader(std::string path, CriteoReaderOptions options,
                                     const std::vector<uint64_t>& expected_table_sizes)
    : path_(std::move(path)), options_(options), header_(read_prepared_header(path_)) {
  if (options_.global_batch_size < 1) fail(path_, "global batch size must be at least 1");
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size)
    fail(path_, "rank " + std::to_string(options_.rank) + " is not in 0.." + std::to_string(options_.world_size - 1));
  if (options_.global_batch_size % options_.world_size != 0)
    fail(path_, "global batch size " + std::to_string(options_.global_batch_size) + " is not divisible by " +
                    std::to_string(options_.world_size) + " ranks");
  if (header_.table_sizes != expected_table_sizes) {
    std::string sizes;
    for (const uint64_t size : header_.table_sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(size);
    fail(path_, "was prepared with table sizes [" + sizes + "], which differ from the preset's table_sizes; "
                "prepare it again with the preset's sizes");
  }
  if (batches_per_epoch() == 0)
    fail(path_, "has " + std::to_string(header_.samples) + " samples, fewer than one global batch of " +
                    std::to_string(options_.global_batch_size));
  fd_ = ::open(path_.c_str(), O_RDONLY);
  if (fd_ < 0) fail(path_, std::string("cannot open for reading: ") + std::strerror(errno));
}

CriteoBatchReader::~CriteoBatchReader() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t CriteoBatchReader::batches_per_epoch() const {
  const int64_t full = header_.samples / options_.global_batch_size;
  return options_.drop_last || header_.samples % options_.global_batch_size == 0 ? full : full + 1;
}

int64_t CriteoBatchReader::samples_per_epoch() const {
  return options_.drop_last ? batches_per_epoch() * options_.global_batch_size : header_.samples;
}

void CriteoBatchReader::start_epoch(int64_t epoch) {
  order_.resize(batches_per_epoch());
  std::iota(order_.begin(), order_.end(), 0);
  if (options_.shuffle) {
    Rng rng(mix_seed(options_.seed, static_cast<uint64_t>(epoch), 0x43524954));
    for (int64_t i = static_cast<int64_t>(order_.size()) - 1; i > 0; --i)
      std::swap(order_[i], order_[rng.below(static_cast<uint64_t>(i) + 1)]);
  }
  next_batch_ = 0;
}

bool CriteoBatchReader::next(CriteoBatch& batch) {
  if (next_batch_ >= static_cast<int64_t>(order_.size())) return false;
  const int64_t global_batch = order_[next_batch_++];
  const int64_t batch_begin = global_batch * options_.global_batch_size;
  const int64_t batch_size = std::min(options_.global_batch_size, header_.samples - batch_begin);
  // Ranks split the (possibly partial) batch as evenly as they can, lower ranks first.
  const int64_t begin = batch_begin + batch_size * options_.rank / options_.world_size;
  const int64_t end = batch_begin + batch_size * (options_.rank + 1) / options_.world_size;
  const int64_t count = end - begin;
  records_.resize(static_cast<size_t>(count) * kRecordInts);
  const size_t bytes = static_cast<size_t>(count) * kRecordBytes;
  size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd_, reinterpret_cast<char*>(records_.data()) + done, bytes - done,
                                static_cast<off_t>(kHeaderBytes + begin * kRecordBytes + done));
    if (got <= 0) fail(path_, std::string("read failed: ") + (got < 0 ? std::strerror(errno) : "unexpected end of file"));
    done += static_cast<size_t>(got);
  }
  batch.size = count;
  batch.dense.resize(static_cast<size_t>(count) * kCriteoDense);
  batch.sparse.resize(static_cast<size_t>(count) * kCriteoSparse);
  batch.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int32_t* record = records_.data() + i * kRecordInts;
    batch.labels[i] = static_cast<float>(record[0]);
    for (int j = 0; j < kCriteoDense; ++j) batch.dense[i * kCriteoDense + j] = std::log1p(static_cast<float>(record[1 + j]));
    for (int j = 0; j < kCriteoSparse; ++j) {
      const int32_t row = record[1 + kCriteoDense + j];
      if (row < 0 || static_cast<uint64_t>(row) >= header_.table_sizes[j])
        fail(path_, "record " + std::to_string(begin + i) + ": row " + std::to_string(row) + " of table " +
                        std::to_string(j) + " is outside its " + std::to_string(header_.table_sizes[j]) + " rows");
      batch.sparse[i * kCriteoSparse + j] = row;
    }
  }
  return true;
}

}  // namespace trainbench::data
