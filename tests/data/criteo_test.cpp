#include "data/criteo.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <zlib.h>

#include <gtest/gtest.h>

#include "support/error_message.h"
#include "util/atomic_file.h"

namespace trainbench::data {
namespace {

namespace fs = std::filesystem;
using testing::error_message;

// label, 13 integers, 26 hex values: "1\t0\t1\t...\t12\t00000000\t00000001\t...".
std::string full_line(int label = 1) {
  std::string line = std::to_string(label);
  for (int i = 0; i < kCriteoDense; ++i) line += "\t" + std::to_string(i);
  char hex[16];
  for (int i = 0; i < kCriteoSparse; ++i) {
    std::snprintf(hex, sizeof hex, "%08x", 0x10 * i + 0xa);
    line += std::string("\t") + hex;
  }
  return line;
}

std::vector<uint64_t> sizes(uint64_t size) { return std::vector<uint64_t>(kCriteoSparse, size); }

class CriteoFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_criteo_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_plain(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string write_gzip(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    gzFile file = gzopen(path.string().c_str(), "wb");
    gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
    gzclose(file);
    return path.string();
  }
  fs::path dir_;
};

TEST(CriteoParse, ReadsLabelIntegersAndHex) {
  const CriteoRow row = parse_criteo_line(full_line(1), "day_0", 1);
  EXPECT_EQ(row.label, 1);
  EXPECT_EQ(row.dense[0], 0);
  EXPECT_EQ(row.dense[12], 12);
  EXPECT_EQ(row.sparse[0], 0xau);
  EXPECT_EQ(row.sparse[25], 0x19au);
}

TEST(CriteoParse, EmptyFieldsReadAsZeroAndNegativeIntegersAreKept) {
  std::string line = "0\t\t-2";
  for (int i = 2; i < kCriteoDense; ++i) line += "\t";
  for (int i = 0; i < kCriteoSparse; ++i) line += i == 3 ? "\tffffffff" : "\t";
  const CriteoRow row = parse_criteo_line(line, "day_0", 7);
  EXPECT_EQ(row.label, 0);
  EXPECT_EQ(row.dense[0], 0);
  EXPECT_EQ(row.dense[1], -2);  // clamped only when prepared, as the reference does
  EXPECT_EQ(row.sparse[0], 0u);
  EXPECT_EQ(row.sparse[3], 0xffffffffu);
}

TEST(CriteoParse, ErrorsNameFileLineAndField) {
  std::string bad_hex = full_line();
  bad_hex.replace(bad_hex.rfind('\t') + 1, 8, "0000zz00");
  EXPECT_EQ(error_message([&] { parse_criteo_line(bad_hex, "day_3", 42); }),
            "day_3:42: bad hex value \"0000zz00\" in field C26 (expected up to 8 hex digits)");
  std::string long_hex = full_line();
  long_hex += "0";  // 9 digits in C26
  EXPECT_NE(error_message([&] { parse_criteo_line(long_hex, "day_3", 1); }).find("bad hex value"), std::string::npos);

  std::string bad_integer = full_line();
  bad_integer.replace(2, 1, "1x");
  EXPECT_EQ(error_message([&] { parse_criteo_line(bad_integer, "day_3", 5); }),
            "day_3:5: bad integer \"1x\" in field I1");

  EXPECT_EQ(error_message([&] { parse_criteo_line("2" + full_line().substr(1), "f", 9); }),
            "f:9: bad label \"2\" (expected 0 or 1)");
  EXPECT_EQ(error_message([&] { parse_criteo_line(full_line().substr(1), "f", 9); }),
            "f:9: bad label \"\" (expected 0 or 1)");

  const std::string short_line = full_line().substr(0, full_line().rfind('\t'));
  EXPECT_EQ(error_message([&] { parse_criteo_line(short_line, "day_0", 3); }),
            "day_0:3: short line: 39 tab-separated fields, expected 40 (label, 13 integer, 26 categorical)");
  EXPECT_NE(error_message([&] { parse_criteo_line(full_line() + "\t1", "day_0", 3); }).find("more than 40"),
            std::string::npos);
}

TEST_F(CriteoFiles, ReadsPlainAndGzipAlikeAndCountsLines) {
  const std::string text = full_line(1) + "\n" + full_line(0) + "\r\n" + full_line(1);  // no final newline
  for (const std::string& path : {write_plain("day_0", text), write_gzip("day_1.gz", text)}) {
    CriteoDayReader reader(path);
    CriteoRow row;
    std::vector<int> labels;
    while (reader.next(row)) labels.push_back(row.label);
    EXPECT_EQ(labels, (std::vector<int>{1, 0, 1})) << path;
    EXPECT_EQ(reader.line_number(), 3);
  }
}

TEST_F(CriteoFiles, ShortLineInAGzipFileNamesItsLine) {
  const std::string path = write_gzip("day_0.gz", full_line() + "\n" + full_line() + "\n1\t2\t3\n");
  CriteoDayReader reader(path);
  CriteoRow row;
  EXPECT_EQ(error_message([&] {
              while (reader.next(row)) {
              }
            }),
            path + ":3: short line: 3 tab-separated fields, expected 40 (label, 13 integer, 26 categorical)");
}

TEST_F(CriteoFiles, PreparedFilesRoundTripWithHashingAndTheLastDayAsEval) {
  std::string day0 = full_line(1) + "\n", day1;
  std::string negative = "0\t-1";
  for (int i = 1; i < kCriteoDense; ++i) negative += "\t3";
  for (int i = 0; i < kCriteoSparse; ++i) negative += i == 0 ? "\t" : "\t0000000b";
  day0 += negative + "\n";
  day1 = full_line(0) + "\n";
  write_plain("day_0", day0);
  write_gzip("day_1.gz", day1);
  const fs::path out = dir_ / "prepared";
  const PreparedCounts counts = prepare_criteo(dir_.string(), out.string(), sizes(7), 2);
  EXPECT_EQ(counts.train_samples, 2);
  EXPECT_EQ(counts.eval_samples, 1);
  EXPECT_FALSE(fs::exists(out / "train.bin.partial"));
  const PreparedHeader header = read_prepared_header((out / "train.bin").string());
  EXPECT_EQ(header.samples, 2);
  EXPECT_EQ(header.table_sizes, sizes(7));

  CriteoReaderOptions options;
  options.global_batch_size = 2;
  CriteoBatchReader reader((out / "train.bin").string(), options, sizes(7));
  reader.start_epoch(0);
  CriteoBatch batch;
  ASSERT_TRUE(reader.next(batch));
  ASSERT_EQ(batch.size, 2);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 0}));
  EXPECT_FLOAT_EQ(batch.dense[5], std::log1p(5.0f));
  EXPECT_EQ(batch.dense[kCriteoDense + 0], 0.0f);  // -1 clamped to 0, then log(0 + 1)
  EXPECT_FLOAT_EQ(batch.dense[kCriteoDense + 1], std::log1p(3.0f));
  EXPECT_EQ(batch.sparse[0], 0xa % 7);
  EXPECT_EQ(batch.sparse[25], 0x19a % 7);
  EXPECT_EQ(batch.sparse[kCriteoSparse + 0], 0);  // empty -> 0
  EXPECT_EQ(batch.sparse[kCriteoSparse + 1], 0xb % 7);
  EXPECT_FALSE(reader.next(batch));
}

TEST_F(CriteoFiles, HeaderValidationRejectsForeignTruncatedAndMismatchedFiles) {
  write_plain("day_0", full_line() + "\n" + full_line() + "\n");
  write_plain("day_1", full_line() + "\n");
  const fs::path out = dir_ / "prepared";
  prepare_criteo(dir_.string(), out.string(), sizes(5), 2);
  const std::string train = (out / "train.bin").string();

  EXPECT_EQ(error_message([&] { CriteoBatchReader(train, {}, sizes(6)); }).find(train + ": was prepared with table sizes [5,5"),
            0u);
  fs::resize_file(train, fs::file_size(train) - 1);
  EXPECT_NE(error_message([&] { read_prepared_header(train); }).find("does not match its header"), std::string::npos);
  const std::string foreign = write_plain("foreign.bin", std::string(300, 'x'));
  EXPECT_EQ(error_message([&] { read_prepared_header(foreign); }),
            foreign + ": not a trainbench prepared Criteo file (magic \"TBCRITEO\" missing)");
  std::string bytes = std::string("TBCRITEO") + std::string(232, '\0');
  bytes[8] = 2;  // version 2
  const std::string future = write_plain("future.bin", bytes);
  EXPECT_EQ(error_message([&] { read_prepared_header(future); }),
            future + ": format version 2, this build reads version 1");
}

TEST_F(CriteoFiles, ShardsSplitEachGlobalBatchDisjointlyAndShuffleBatchOrderPerEpoch) {
  // 10 samples whose I1 is their index; global batch 4 -> 2 full batches (drop_last), or 3 for eval.
  std::string text;
  for (int i = 0; i < 10; ++i) {
    std::string line = full_line(i % 2);
    line.replace(2, 1, std::to_string(i));
    text += line + "\n";
  }
  write_plain("day_0", text);
  write_plain("day_1", text);
  const fs::path out = dir_ / "prepared";
  prepare_criteo(dir_.string(), out.string(), sizes(3), 0);
  const auto sample_ids = [&](int rank, int world, bool drop_last, bool shuffle, int64_t epoch) {
    CriteoReaderOptions options;
    options.global_batch_size = 4;
    options.rank = rank;
    options.world_size = world;
    options.drop_last = drop_last;
    options.shuffle = shuffle;
    options.seed = 11;
    CriteoBatchReader reader((out / "train.bin").string(), options, sizes(3));
    reader.start_epoch(epoch);
    std::vector<std::vector<int>> batches;
    CriteoBatch batch;
    while (reader.next(batch)) {
      batches.emplace_back();
      for (int64_t i = 0; i < batch.size; ++i)
        batches.back().push_back(static_cast<int>(std::lround(std::expm1(batch.dense[i * kCriteoDense]))));
    }
    return batches;
  };
  EXPECT_EQ(sample_ids(0, 1, true, false, 0), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(sample_ids(0, 2, true, false, 0), (std::vector<std::vector<int>>{{0, 1}, {4, 5}}));
  EXPECT_EQ(sample_ids(1, 2, true, false, 0), (std::vector<std::vector<int>>{{2, 3}, {6, 7}}));
  EXPECT_EQ(sample_ids(1, 2, false, false, 0), (std::vector<std::vector<int>>{{2, 3}, {6, 7}, {9}}));
  // Shuffled: the same global batches in a per-epoch order, the same on every rank.
  std::set<std::vector<std::vector<int>>> orders;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    const auto whole = sample_ids(0, 1, true, true, epoch);
    const auto rank0 = sample_ids(0, 2, true, true, epoch), rank1 = sample_ids(1, 2, true, true, epoch);
    ASSERT_EQ(whole.size(), 2u);
    for (size_t b = 0; b < whole.size(); ++b) {
      EXPECT_EQ(whole[b], (std::vector<int>{rank0[b][0], rank0[b][1], rank1[b][0], rank1[b][1]}));
    }
    orders.insert(whole);
  }
  EXPECT_EQ(orders.size(), 2u);  // both orders of the two batches occur
}

// A .gz cut at a line boundary decompresses to whole lines; only the missing end-of-stream block and CRC
// trailer tell, and they must (issue 18: such a file was prepared, smaller, with exit code 0).
TEST_F(CriteoFiles, TruncatedGzipAndCorruptCrcAreErrorsNamingTheFile) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += full_line(i % 2) + "\n";
  write_plain("day_0", text);
  const std::string whole = read_file(write_gzip("day_1.gz", text));
  const fs::path out = dir_ / "prepared";
  for (const size_t cut : {whole.size() - 8, whole.size() - 4, whole.size() / 2}) {
    write_plain("day_1.gz", whole.substr(0, cut));
    const std::string message = error_message([&] { prepare_criteo(dir_.string(), out.string(), sizes(3), 2); });
    EXPECT_EQ(message, (dir_ / "day_1.gz").string() + ": truncated gzip file: it ends before the gzip end-of-stream marker and CRC")
        << cut;
    EXPECT_FALSE(fs::exists(out / "eval.bin.partial"));
  }
  std::string bad_crc = whole;
  bad_crc[bad_crc.size() - 6] ^= 0x55;  // inside the CRC32 of the trailer
  write_plain("day_1.gz", bad_crc);
  EXPECT_NE(error_message([&] { prepare_criteo(dir_.string(), out.string(), sizes(3), 2); }).find(": cannot read: incorrect data check"),
            std::string::npos);
  write_plain("day_1.gz", whole);
  EXPECT_EQ(prepare_criteo(dir_.string(), out.string(), sizes(3), 2).eval_samples, 200);
}

TEST_F(CriteoFiles, PreparingNeedsEveryDayThePresetNames) {
  write_plain("day_0", full_line() + "\n");
  write_plain("day_2", full_line() + "\n");
  write_plain("day_3", full_line() + "\n");
  const fs::path out = dir_ / "prepared";
  EXPECT_EQ(error_message([&] { prepare_criteo(dir_.string(), out.string(), sizes(3), 0); }),
            (dir_ / "day_1").string() + ": missing (expected day_0 .. day_3, plain or .gz)");
  write_plain("day_1", full_line() + "\n");
  EXPECT_EQ(error_message([&] { prepare_criteo(dir_.string(), out.string(), sizes(3), 5); }),
            (dir_ / "day_4").string() + ": missing (expected day_0 .. day_4, plain or .gz: the preset's 5 days)");
  EXPECT_EQ(error_message([&] { prepare_criteo(dir_.string(), out.string(), sizes(3), 3); }),
            (dir_ / "day_3").string() + ": is not one of the preset's days (expected day_0 .. day_2, plain or .gz: the preset's 3 days)");
  EXPECT_EQ(prepare_criteo(dir_.string(), out.string(), sizes(3), 4).train_samples, 3);
}

TEST_F(CriteoFiles, DayFilesAreFoundInDayOrder) {
  for (const char* name : {"day_10", "day_2.gz", "day_0", "notes.txt", "day_x"}) write_plain(name, "");
  const auto days = find_day_files(dir_.string());
  ASSERT_EQ(days.size(), 3u);
  EXPECT_EQ(fs::path(days[0]).filename(), "day_0");
  EXPECT_EQ(fs::path(days[1]).filename(), "day_2.gz");
  EXPECT_EQ(fs::path(days[2]).filename(), "day_10");
}

}  // namespace
}  // namespace trainbench::data
