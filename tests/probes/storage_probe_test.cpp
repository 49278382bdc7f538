// probe storage on small temporary trees: exact file and byte counts, a cache label that agrees with
// mincore(), a checkpoint round trip that catches a changed byte, and the errors a user meets.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "data/test_files.h"
#include "probes/storage_probe.h"
#include "support/error_message.h"

namespace trainbench::probes {
namespace {

namespace fs = std::filesystem;
using trainbench::testing::error_message;

class StorageProbeTest : public ::testing::Test {
 protected:
  // A nested tree of `count` files whose sizes are distinct powers of two (1 B .. 2^(count-1) B) plus one
  // empty file, so a byte total names exactly which files were read. Returns the total.
  uint64_t make_tree(int count) {
    uint64_t total = 0;
    for (int i = 0; i < count; ++i) {
      const fs::path path = dir_ / ("class" + std::to_string(i % 3)) / (i % 2 ? "deeper" : "") / ("sample" + std::to_string(i));
      fs::create_directories(path.parent_path());
      std::ofstream(path, std::ios::binary) << std::string(uint64_t{1} << i, static_cast<char>('a' + i));
      total += uint64_t{1} << i;
    }
    std::ofstream(dir_ / "empty_marker");
    return total;
  }

  std::vector<std::string> files() const { return list_dataset_files(dir_.string()); }

  const data::testing::TempDir temp_;
  const fs::path dir_ = temp_.path();
};

TEST(ByteSize, ParsesPlainAndSuffixedSizes) {
  EXPECT_EQ(parse_byte_size("4096", "--size"), 4096u);
  EXPECT_EQ(parse_byte_size("512K", "--size"), 512u << 10);
  EXPECT_EQ(parse_byte_size("512M", "--size"), 512u << 20);
  EXPECT_EQ(parse_byte_size("1G", "--size"), uint64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("1g", "--size"), uint64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("2T", "--size"), uint64_t{2} << 40);
  EXPECT_EQ(parse_byte_size("64MiB", "--size"), uint64_t{64} << 20);
  EXPECT_EQ(parse_byte_size("64MB", "--size"), uint64_t{64} << 20);
  EXPECT_EQ(parse_byte_size("10B", "--size"), 10u);
}

TEST(ByteSize, RejectsWhatIsNotASize) {
  const std::string expected = "expected a size in bytes like 4096, 512K, 512M or 1G";
  for (const char* text : {"", "G", "abc", "12X", "-1", "1.5G", "1GG", "1 G", "1KiBB"})
    EXPECT_NE(error_message([&] { parse_byte_size(text, "--checkpoint-size"); }).find(expected), std::string::npos) << text;
  EXPECT_EQ(error_message([] { parse_byte_size("12X", "--checkpoint-size"); }),
            "--checkpoint-size '12X': expected a size in bytes like 4096, 512K, 512M or 1G (K, M, G, T are powers of 1024)");
  EXPECT_EQ(error_message([] { parse_byte_size("0", "--checkpoint-size"); }), "--checkpoint-size '0': must be more than 0 bytes");
  EXPECT_EQ(error_message([] { parse_byte_size("99999999999999999999", "--checkpoint-size"); }),
            "--checkpoint-size '99999999999999999999': is too large");
  EXPECT_EQ(error_message([] { parse_byte_size("9000000T", "--checkpoint-size"); }), "--checkpoint-size '9000000T': is too large");
}

TEST_F(StorageProbeTest, ReadsEveryFileOnceAndCountsFilesAndBytesExactly) {
  const uint64_t total = make_tree(12);
  DatasetReadOptions options;
  options.dir = dir_.string();
  options.threads = 3;
  const DatasetReadResult result = probe_dataset_reads(options);
  EXPECT_EQ(result.files_listed, 13);
  EXPECT_EQ(result.files_read, 13);
  EXPECT_EQ(result.bytes, total);
  EXPECT_EQ(result.cache.total_bytes, total);
  EXPECT_GT(result.seconds, 0);
  EXPECT_GT(result.files_per_second(), 0);
  EXPECT_GT(result.latency.p50, 0);
  EXPECT_LE(result.latency.p50, result.latency.p90);
  EXPECT_LE(result.latency.p90, result.latency.p99);
  EXPECT_LE(result.latency.p99, result.latency.max);
}

TEST_F(StorageProbeTest, FilesMaxReadsTheSameSeededSampleEachTime) {
  make_tree(12);
  DatasetReadOptions options;
  options.dir = dir_.string();
  options.files_max = 5;
  options.seed = 7;
  const DatasetReadResult first = probe_dataset_reads(options), again = probe_dataset_reads(options);
  EXPECT_EQ(first.files_listed, 13);
  EXPECT_EQ(first.files_read, 5);
  EXPECT_EQ(first.bytes, again.bytes);  // distinct power-of-two sizes: equal totals mean the same files
  options.files_max = 0;
  EXPECT_EQ(probe_dataset_reads(options).files_read, 13);
}

TEST_F(StorageProbeTest, ColdOnlyWhenMincoreFindsNoPageResident) {
  make_tree(16);
  const auto paths = files();
  const CacheState evicted = evict_from_page_cache(paths);
  uint64_t resident = 0;
  for (const auto& path : paths) resident += resident_bytes(path);
  EXPECT_EQ(evicted.cold, resident == 0) << evicted.reason;
  EXPECT_EQ(evicted.cold, evicted.reason.empty());
  EXPECT_EQ(evicted.label(), evicted.cold ? "cold" : "warm");

  // Read everything, then measure without eviction: the pages just read are resident, so the label is warm.
  DatasetReadOptions options;
  options.dir = dir_.string();
  options.evict = false;
  probe_dataset_reads(options);
  const DatasetReadResult warm = probe_dataset_reads(options);
  EXPECT_EQ(warm.cache.label(), "warm");
  EXPECT_GT(warm.cache.resident_bytes, 0u);
  EXPECT_NE(warm.cache.reason.find("no eviction"), std::string::npos) << warm.cache.reason;
}

TEST_F(StorageProbeTest, ResidentBytesCountsOnlyTheFile) {
  const fs::path path = dir_ / "three_pages_and_a_bit";
  std::ofstream(path, std::ios::binary) << std::string(3 * 4096 + 100, 'x');
  std::ifstream(path, std::ios::binary).ignore(1 << 20);  // read it once: all of it is cached now
  EXPECT_EQ(resident_bytes(path.string()), 3u * 4096 + 100);
  std::ofstream(dir_ / "empty");
  EXPECT_EQ(resident_bytes((dir_ / "empty").string()), 0u);
}

TEST_F(StorageProbeTest, CheckpointRoundTripVerifiesEveryByteAndCleansUp) {
  CheckpointOptions options;
  options.dir = dir_.string();
  options.bytes = (3u << 20) + 5;  // not a whole number of chunks
  options.chunk_bytes = 1u << 20;
  const CheckpointResult result = probe_checkpoint(options);
  EXPECT_TRUE(result.verified) << result.first_mismatch;
  EXPECT_EQ(result.bytes, options.bytes);
  EXPECT_GT(result.write_seconds, 0);
  EXPECT_GE(result.write_seconds, result.sync_seconds);
  EXPECT_GT(result.read_seconds, 0);
  EXPECT_EQ(result.read_cache.total_bytes, options.bytes);
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(StorageProbeTest, CheckpointReadBackFindsAChangedOrMissingByte) {
  CheckpointOptions options;
  options.dir = dir_.string();
  options.bytes = 3u << 20;
  options.chunk_bytes = 1u << 20;
  const std::string path = (dir_ / "checkpoint").string();
  CheckpointResult result;
  write_checkpoint_file(path, options, result);
  EXPECT_EQ(fs::file_size(path), options.bytes);
  EXPECT_FALSE(fs::exists(path + ".partial"));

  const uint64_t changed = (1u << 20) + 17;
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(changed);
    const char byte = static_cast<char>(file.get());
    file.seekp(changed);
    file.put(static_cast<char>(byte ^ 0x01));
  }
  read_back_checkpoint_file(path, options, result);
  EXPECT_FALSE(result.verified);
  EXPECT_EQ(result.first_mismatch, changed);

  write_checkpoint_file(path, options, result);
  fs::resize_file(path, options.bytes - 1000);
  read_back_checkpoint_file(path, options, result);
  EXPECT_FALSE(result.verified);
  EXPECT_EQ(result.first_mismatch, options.bytes - 1000);

  write_checkpoint_file(path, options, result);
  read_back_checkpoint_file(path, options, result);
  EXPECT_TRUE(result.verified);
}

TEST_F(StorageProbeTest, ClearErrorsForMissingEmptyOrUnusableFolders) {
  DatasetReadOptions options;
  options.dir = (dir_ / "missing").string();
  EXPECT_EQ(error_message([&] { probe_dataset_reads(options); }), "--dir " + options.dir + ": does not exist; expected a folder");
  options.dir = dir_.string();
  fs::create_directories(dir_ / "only" / "folders");
  EXPECT_EQ(error_message([&] { probe_dataset_reads(options); }), "--dir " + options.dir + ": holds no files to read");
  std::ofstream(dir_ / "a_file");
  options.dir = (dir_ / "a_file").string();
  EXPECT_EQ(error_message([&] { probe_dataset_reads(options); }), "--dir " + options.dir + ": is not a folder");

  CheckpointOptions checkpoint;
  checkpoint.dir = (dir_ / "missing").string();
  EXPECT_EQ(error_message([&] { probe_checkpoint(checkpoint); }),
            "--checkpoint-dir " + checkpoint.dir + ": does not exist; expected a folder");
  checkpoint.dir = dir_.string();
  checkpoint.bytes = uint64_t{1} << 62;
  EXPECT_NE(error_message([&] { probe_checkpoint(checkpoint); }).find("--checkpoint-size: 4398046511104.0 MiB does not fit in"),
            std::string::npos);
}

}  // namespace
}  // namespace trainbench::probes
