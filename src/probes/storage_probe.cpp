#include "probes/storage_probe.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "data/random.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::probes {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point begin) { return std::chrono::duration<double>(Clock::now() - begin).count(); }

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string mebibytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  return text;
}

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  return text;
}

// Owns a file descriptor; open failures are Errors naming the path.
class FileDescriptor {
 public:
  FileDescriptor(const std::string& path, int flags) : fd_(::open(path.c_str(), flags | O_CLOEXEC)) {
    if (fd_ < 0) fail(path, system_error("cannot open"));
  }
  ~FileDescriptor() { ::close(fd_); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

uint64_t file_size(int fd, const std::string& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) fail(path, system_error("cannot stat"));
  return static_cast<uint64_t>(info.st_size);
}

// The state of the page cache for these files, after `method` was applied.
CacheState check_page_cache(const std::vector<std::string>& paths, const std::string& method) {
  CacheState state;
  state.method = method;
  for (const auto& path : paths) {
    state.resident_bytes += resident_bytes(path);
    state.total_bytes += fs::file_size(path);
  }
  state.cold = state.resident_bytes == 0;
  if (!state.cold) {
    char share[64];
    std::snprintf(share, sizeof share, " (%.1f%%)", 100.0 * state.resident_bytes / std::max<uint64_t>(state.total_bytes, 1));
    state.reason = mebibytes(state.resident_bytes) + " of " + mebibytes(state.total_bytes) + share +
                   " in the page cache after " + method;
  }
  return state;
}

bool drop_all_caches(std::string& refused) {
  ::sync();  // drop_caches frees clean pages only
  std::ofstream control("/proc/sys/vm/drop_caches");
  control << "1\n";
  control.flush();
  if (control) return true;
  refused = "writing /proc/sys/vm/drop_caches failed";
  return false;
}

// Loader-style read: the data layer reads an image with fopen and 64 KiB freads into a growing buffer
// (data/image_decode.cpp), so the probe measures the same calls. Returns the bytes read.
uint64_t read_whole_file(const std::string& path, std::vector<uint8_t>& bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) fail(path, system_error("cannot open"));
  bytes.clear();  // keeps the capacity: the probe measures storage, not the allocator
  uint8_t chunk[1 << 16];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, file.get())) > 0) bytes.insert(bytes.end(), chunk, chunk + got);
  if (std::ferror(file.get())) fail(path, system_error("cannot read"));
  return bytes.size();
}

double nearest_rank(const std::vector<double>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(fraction * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

// Checkpoint content: one random block, its first 8 bytes overwritten with the chunk's offset, so a
// misplaced or repeated chunk is caught as surely as a flipped byte.
void stamp_chunk(std::string& block, uint64_t offset, size_t size) {
  std::memcpy(block.data(), &offset, std::min(sizeof offset, size));
}

std::string random_block(size_t size, uint64_t seed) {
  data::Rng rng(seed);
  std::string block(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    const uint64_t word = rng.next_u64();
    std::memcpy(block.data() + i, &word, std::min<size_t>(8, size - i));
  }
  return block;
}

void fsync_directory(const std::string& dir) {
  FileDescriptor folder(dir, O_RDONLY | O_DIRECTORY);
  if (::fsync(folder.get()) != 0) fail(dir, system_error("cannot sync the folder"));
}

void require_directory(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail(flag + " " + dir, "does not exist; expected a folder");
  if (!fs::is_directory(dir, ec)) fail(flag + " " + dir, "is not a folder");
}

// Removes the probe's checkpoint (and its temporary name) however the probe ends.
struct RemoveOnExit {
  std::vector<std::string> paths;
  ~RemoveOnExit() {
    for (const auto& path : paths) ::unlink(path.c_str());
  }
};

}  // namespace

uint64_t parse_byte_size(const std::string& text, const std::string& where) {
  const auto bad = [&] {
    fail(where + " '" + text + "'", "expected a size in bytes like 4096, 512K, 512M or 1G (K, M, G, T are powers of 1024)");
  };
  const char* end = text.data() + text.size();
  uint64_t value = 0;
  const auto [unit_begin, error] = std::from_chars(text.data(), end, value);
  if (unit_begin == text.data()) bad();
  if (error == std::errc::result_out_of_range) fail(where + " '" + text + "'", "is too large");
  std::string unit(unit_begin, end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && (unit.back() == 'B')) unit.pop_back();                      // "MB", "MiB"
  if (unit.size() == 2 && unit[1] == 'I') unit.pop_back();                           // "Mi"
  static const std::string kUnits = "KMGT";
  int shift = 0;
  if (unit.size() == 1 && kUnits.find(unit[0]) != std::string::npos) shift = 10 * (1 + static_cast<int>(kUnits.find(unit[0])));
  else if (!unit.empty() && unit != "B") bad();
  if (value == 0) fail(where + " '" + text + "'", "must be more than 0 bytes");
  if (value > (uint64_t{1} << 63 >> shift)) fail(where + " '" + text + "'", "is too large");
  return value << shift;
}

uint64_t resident_bytes(const std::string& path) {
  FileDescriptor file(path, O_RDONLY);
  const uint64_t size = file_size(file.get(), path);
  if (size == 0) return 0;
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, file.get(), 0);
  if (mapping == MAP_FAILED) fail(path, system_error("cannot map to check the page cache"));
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> pages((size + page - 1) / page);
  const int status = ::mincore(mapping, size, pages.data());
  ::munmap(mapping, size);
  if (status != 0) fail(path, system_error("mincore failed"));
  uint64_t resident = 0;
  for (size_t i = 0; i < pages.size(); ++i)
    if (pages[i] & 1) resident += std::min(page, size - i * page);
  return resident;
}

CacheState evict_from_page_cache(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    FileDescriptor file(path, O_RDONLY);
    ::fdatasync(file.get());  // dirty pages cannot be dropped; a freshly written dataset has some
    ::posix_fadvise(file.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
  std::string method = "fdatasync + posix_fadvise(DONTNEED)";
  CacheState state = check_page_cache(paths, method);
  if (state.cold) return state;
  // Pages another process maps, or pages of a filesystem that lives in memory, survive DONTNEED. Only root
  // may drop the whole page cache, and it slows everyone else's reads, so it is the fallback, not the rule.
  if (::geteuid() == 0) {
    std::string refused;
    method += drop_all_caches(refused) ? " + drop_caches" : " (" + refused + ")";
    state = check_page_cache(paths, method);
  } else if (!state.cold) {
    state.reason += "; as root the probe would also try /proc/sys/vm/drop_caches";
  }
  const std::string filesystem = paths.empty() ? "" : filesystem_type(paths.front());
  if (!state.cold && (filesystem == "tmpfs" || filesystem == "ramfs"))
    state.reason += "; " + filesystem + " keeps files in memory, so they cannot be read cold";
  return state;
}

std::vector<std::string> list_dataset_files(const std::string& dir) {
  require_directory(dir, "--dir");
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file()) files.push_back(it->path().string());
  if (ec) fail("--dir " + dir, "cannot list: " + ec.message());
  if (files.empty()) fail("--dir " + dir, "holds no files to read");
  std::sort(files.begin(), files.end());
  return files;
}

DatasetReadResult probe_dataset_reads(const DatasetReadOptions& options) {
  if (options.threads < 1) fail("--threads", "must be at least 1");
  if (options.files_max < 0) fail("--files-max", "must be 0 (every file) or more");
  std::vector<std::string> files = list_dataset_files(options.dir);
  DatasetReadResult result;
  result.files_listed = static_cast<int64_t>(files.size());
  data::Rng rng(options.seed);  // Fisher-Yates with our own PRNG: a seed names the same order everywhere
  for (size_t i = files.size() - 1; i > 0; --i) std::swap(files[i], files[rng.below(i + 1)]);
  if (options.files_max > 0 && files.size() > static_cast<size_t>(options.files_max)) files.resize(options.files_max);
  result.cache = options.evict ? evict_from_page_cache(files) : check_page_cache(files, "no eviction (--no-evict)");

  std::vector<double> latencies(files.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  const auto worker = [&] {
    std::vector<uint8_t> buffer;
    for (size_t i; (i = next++) < files.size();) {
      const auto begin = Clock::now();
      try {
        bytes += read_whole_file(files[i], buffer);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = files.size();
        return;
      }
      latencies[i] = seconds_since(begin);
    }
  };
  const auto begin = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) threads.emplace_back(worker);
  for (auto& thread : threads) thread.join();
  result.seconds = seconds_since(begin);
  if (error) std::rethrow_exception(error);

  result.files_read = static_cast<int64_t>(files.size());
  result.bytes = bytes;
  std::sort(latencies.begin(), latencies.end());
  result.latency = {nearest_rank(latencies, 0.50), nearest_rank(latencies, 0.90), nearest_rank(latencies, 0.99),
                    latencies.back()};
  return result;
}

namespace {
constexpr uint64_t kCheckpointSeed = 1;
}  // namespace

void write_checkpoint_file(const std::string& path, const CheckpointOptions& options, CheckpointResult& result) {
  std::string block = random_block(options.chunk_bytes, kCheckpointSeed);
  result.bytes = options.bytes;
  const auto begin = Clock::now();
  AtomicFile file(path);
  for (uint64_t offset = 0; offset < options.bytes; offset += options.chunk_bytes) {
    const size_t size = static_cast<size_t>(std::min<uint64_t>(options.chunk_bytes, options.bytes - offset));
    stamp_chunk(block, offset, size);
    file.write(size == block.size() ? block : block.substr(0, size));
  }
  const auto written = Clock::now();
  file.commit();  // fsync, then rename into place
  fsync_directory(fs::path(path).parent_path().string());  // the rename is durable only once the folder is synced
  result.write_seconds = seconds_since(begin);
  result.sync_seconds = seconds_since(written);
}

void read_back_checkpoint_file(const std::string& path, const CheckpointOptions& options, CheckpointResult& result) {
  result.read_cache = options.evict ? evict_from_page_cache({path}) : check_page_cache({path}, "no eviction (--no-evict)");
  std::string expected = random_block(options.chunk_bytes, kCheckpointSeed);
  std::string chunk(options.chunk_bytes, '\0');
  result.verified = true;
  uint64_t offset = 0;
  const auto begin = Clock::now();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!in) fail(path, system_error("cannot open"));
  while (const size_t got = std::fread(chunk.data(), 1, chunk.size(), in.get())) {
    stamp_chunk(expected, offset, got);
    if (result.verified && (offset + got > options.bytes || std::memcmp(chunk.data(), expected.data(), got) != 0)) {
      result.verified = false;
      result.first_mismatch = offset + static_cast<uint64_t>(
          std::mismatch(chunk.begin(), chunk.begin() + got, expected.begin()).first - chunk.begin());
    }
    offset += got;
  }
  result.read_seconds = seconds_since(begin);
  if (std::ferror(in.get())) fail(path, system_error("cannot read back"));
  if (offset < options.bytes && result.verified) {  // a short file
    result.verified = false;
    result.first_mismatch = offset;
  }
}

CheckpointResult probe_checkpoint(const CheckpointOptions& options) {
  require_directory(options.dir, "--checkpoint-dir");
  if (options.bytes == 0) fail("--checkpoint-size", "must be more than 0 bytes");
  struct statvfs space {};
  if (::statvfs(options.dir.c_str(), &space) == 0 &&
      static_cast<uint64_t>(space.f_bavail) * space.f_frsize < options.bytes + (64ull << 20))
    fail("--checkpoint-size", mebibytes(options.bytes) + " does not fit in " + options.dir + " (" +
                                  mebibytes(static_cast<uint64_t>(space.f_bavail) * space.f_frsize) + " free)");
  const std::string path = (fs::path(options.dir) / (".trainbench-probe-checkpoint-" + std::to_string(::getpid()))).string();
  const RemoveOnExit cleanup{{path, AtomicFile::partial_path_for(path)}};  // written there until commit()
  CheckpointResult result;
  write_checkpoint_file(path, options, result);
  read_back_checkpoint_file(path, options, result);
  return result;
}

std::string filesystem_type(const std::string& path) {
  struct statfs info {};
  if (::statfs(path.c_str(), &info) != 0) return "unknown";
  switch (static_cast<uint64_t>(info.f_type)) {
    case 0xEF53: return "ext4";  // also ext2/ext3: one magic number
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x858458F6: return "ramfs";
    case 0x794C7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    case 0x2FC12FC1: return "zfs";
    case 0x0BD00BD0: return "lustre";
    case 0x47504653: return "gpfs";
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(info.f_type));
  return hex;
}

nlohmann::ordered_json to_json(const CacheState& cache) {
  return {{"label", cache.label()}, {"resident_bytes", cache.resident_bytes}, {"total_bytes", cache.total_bytes},
          {"method", cache.method}, {"reason", cache.reason}};
}

nlohmann::ordered_json to_json(const DatasetReadResult& result) {
  return {{"files_listed", result.files_listed},
          {"files_read", result.files_read},
          {"bytes", result.bytes},
          {"seconds", result.seconds},
          {"files_per_second", result.files_per_second()},
          {"megabytes_per_second", result.bytes_per_second() / 1e6},
          {"latency_seconds", {{"p50", result.latency.p50}, {"p90", result.latency.p90}, {"p99", result.latency.p99},
                               {"max", result.latency.max}}},
          {"cache", to_json(result.cache)}};
}

nlohmann::ordered_json to_json(const CheckpointResult& result) {
  return {{"bytes", result.bytes},
          {"write_seconds", result.write_seconds},
          {"sync_seconds", result.sync_seconds},
          {"write_megabytes_per_second", result.write_bytes_per_second() / 1e6},
          {"read_seconds", result.read_seconds},
          {"read_megabytes_per_second", result.read_bytes_per_second() / 1e6},
          {"read_cache", to_json(result.read_cache)},
          {"verified", result.verified},
          {"first_mismatch", result.verified ? nlohmann::ordered_json() : nlohmann::ordered_json(result.first_mismatch)}};
}

namespace {
std::string cache_line(const CacheState& cache) {
  return cache.cold ? "cold (mincore: none of " + mebibytes(cache.total_bytes) + " resident after " + cache.method + ")"
                    : "warm (" + cache.reason + ")";
}
}  // namespace

void print_dataset_reads(const DatasetReadOptions& options, const DatasetReadResult& result, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof line, "dataset reads: %lld of %lld files under %s (%s), %d threads, random order (seed %llu)\n",
                static_cast<long long>(result.files_read), static_cast<long long>(result.files_listed), options.dir.c_str(),
                filesystem_type(options.dir).c_str(), options.threads, static_cast<unsigned long long>(options.seed));
  out << line << "  cache: " << cache_line(result.cache) << "\n";
  std::snprintf(line, sizeof line, "  %s in %.3f s: %.1f files/s, %.1f MB/s\n", mebibytes(result.bytes).c_str(), result.seconds,
                result.files_per_second(), result.bytes_per_second() / 1e6);
  out << line << "  latency per file (open to close): p50 " << milliseconds(result.latency.p50) << ", p90 "
      << milliseconds(result.latency.p90) << ", p99 " << milliseconds(result.latency.p99) << ", max "
      << milliseconds(result.latency.max) << "\n";
}

void print_checkpoint(const CheckpointOptions& options, const CheckpointResult& result, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof line, "checkpoint: %s in %s (%s), %s writes and reads\n", mebibytes(result.bytes).c_str(),
                options.dir.c_str(), filesystem_type(options.dir).c_str(), mebibytes(options.chunk_bytes).c_str());
  out << line;
  std::snprintf(line, sizeof line, "  write (temp file, write, fsync, rename, fsync folder): %.3f s, %.1f MB/s (%.3f s of it syncing)\n",
                result.write_seconds, result.write_bytes_per_second() / 1e6, result.sync_seconds);
  out << line;
  std::snprintf(line, sizeof line, "  read back: %.3f s, %.1f MB/s, ", result.read_seconds, result.read_bytes_per_second() / 1e6);
  out << line << cache_line(result.read_cache) << "\n";
  if (result.verified)
    out << "  every byte read back matched what was written; the file was removed\n";
  else
    out << "  READ-BACK MISMATCH at byte " << result.first_mismatch << "; the file was removed\n";
}

}  // namespace trainbench::probes
