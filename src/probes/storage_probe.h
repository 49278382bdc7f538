#pragma once
// probe storage: how fast a dataset folder feeds the loader (whole-file reads of randomly ordered files on
// N threads) and how fast a checkpoint is written durably and read back. Cache state is measured, not
// assumed: a result is "cold" only when mincore() showed none of its files' pages resident before reading.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainbench::probes {

// "4096", "512K", "512M", "1G", "2T" (optionally "MB"/"MiB"; 1024-based, as fio and dd read them).
// Throws Error naming `where` for anything else, for zero and for sizes past 2^63.
uint64_t parse_byte_size(const std::string& text, const std::string& where);

// Whether the files' pages were out of the page cache right before a measurement.
struct CacheState {
  bool cold = false;         // mincore() found no resident page in any of the files
  uint64_t resident_bytes = 0;
  uint64_t total_bytes = 0;
  std::string method;        // how eviction was attempted
  std::string reason;        // why the result is warm (empty when cold)
  std::string label() const { return cold ? "cold" : "warm"; }
};

// Bytes of `path` that are in the page cache now (mincore over a read-only mapping).
uint64_t resident_bytes(const std::string& path);

// Writes back and drops the files' cached pages: fdatasync + posix_fadvise(DONTNEED), which any user may do
// for files they can open; if pages remain and we are root, also sync + /proc/sys/vm/drop_caches. Then checks
// every file with mincore() and reports what it found.
CacheState evict_from_page_cache(const std::vector<std::string>& paths);

// Every regular file under `dir`, recursively, sorted. Error naming --dir when it is missing, not a folder,
// or holds no files.
std::vector<std::string> list_dataset_files(const std::string& dir);

struct DatasetReadOptions {
  std::string dir;
  int threads = 1;
  int64_t files_max = 0;  // read at most this many (a seeded random sample); 0: every file
  uint64_t seed = 1;
  bool evict = true;      // false: measure whatever the page cache holds
};

struct LatencySummary {  // seconds per file, open to close; nearest-rank percentiles
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct DatasetReadResult {
  int64_t files_listed = 0;
  int64_t files_read = 0;
  uint64_t bytes = 0;
  double seconds = 0;  // first open to last close, all threads
  CacheState cache;
  LatencySummary latency;
  double files_per_second() const { return seconds > 0 ? files_read / seconds : 0; }
  double bytes_per_second() const { return seconds > 0 ? bytes / seconds : 0; }
};

// Reads the chosen files whole, in a seeded random order, with `threads` threads pulling from one queue.
DatasetReadResult probe_dataset_reads(const DatasetReadOptions& options);

struct CheckpointOptions {
  std::string dir;
  uint64_t bytes = 1ull << 30;
  uint64_t chunk_bytes = 8ull << 20;  // one write() / read() call
  bool evict = true;
};

struct CheckpointResult {
  uint64_t bytes = 0;
  double write_seconds = 0;  // create, write, fsync, rename, fsync the folder: until the file is durable
  double sync_seconds = 0;   // the fsync + rename + folder fsync part of write_seconds
  double read_seconds = 0;
  CacheState read_cache;
  bool verified = false;     // every byte read back equals what was written
  uint64_t first_mismatch = 0;  // offset of the first differing byte when not verified
  double write_bytes_per_second() const { return write_seconds > 0 ? bytes / write_seconds : 0; }
  double read_bytes_per_second() const { return read_seconds > 0 ? bytes / read_seconds : 0; }
};

// Writes a checkpoint-sized file the way trainbench writes results (temporary name, write, fsync, rename,
// fsync the folder), reads it back and compares every byte, then deletes it.
CheckpointResult probe_checkpoint(const CheckpointOptions& options);
// The two halves: write `path` durably (fills write_seconds, sync_seconds), and read it back after eviction,
// comparing every byte with what write_checkpoint_file writes (fills read_*, verified, first_mismatch).
void write_checkpoint_file(const std::string& path, const CheckpointOptions& options, CheckpointResult& result);
void read_back_checkpoint_file(const std::string& path, const CheckpointOptions& options, CheckpointResult& result);

// The filesystem holding `path` ("ext4", "tmpfs", ... or the magic number in hex).
std::string filesystem_type(const std::string& path);

nlohmann::ordered_json to_json(const CacheState& cache);
nlohmann::ordered_json to_json(const DatasetReadResult& result);
nlohmann::ordered_json to_json(const CheckpointResult& result);
void print_dataset_reads(const DatasetReadOptions& options, const DatasetReadResult& result, std::ostream& out);
void print_checkpoint(const CheckpointOptions& options, const CheckpointResult& result, std::ostream& out);

}  // namespace trainbench::probes
