#include "data/bert_shards.h"

#include <H5Cpp.h>

#include <algorithm>
#include <functional>
#include <set>

#include <gtest/gtest.h>

#include "test_files.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

// `count` samples whose every value encodes (first + sample, field), so a gathered sample identifies itself.
BertSamples numbered_samples(int64_t first, int64_t count, int64_t seq = 6, int64_t preds = 2) {
  BertSamples samples;
  samples.seq_length = seq;
  samples.max_predictions = preds;
  for (int64_t n = first; n < first + count; ++n) {
    for (int64_t i = 0; i < seq; ++i) {
      samples.input_ids.push_back(static_cast<int32_t>(1000 * n + i));
      samples.input_mask.push_back(static_cast<int8_t>(i < seq - 1));
      samples.segment_ids.push_back(static_cast<int8_t>(i >= seq / 2));
    }
    for (int64_t i = 0; i < preds; ++i) {
      samples.masked_lm_positions.push_back(static_cast<int32_t>(i + 1));
      samples.masked_lm_ids.push_back(static_cast<int32_t>(2000 * n + i));
    }
    samples.next_sentence_labels.push_back(static_cast<int8_t>(n % 2));
  }
  return samples;
}

void expect_error_mentions(const std::function<void()>& action, const std::vector<std::string>& parts) {
  try {
    action();
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    for (const auto& part : parts) EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
  }
}

TEST(BertShards, RoundTripKeepsEveryDatasetAndTheOnDiskTypes) {
  testing::TempDir dir;
  const BertSamples written = numbered_samples(0, 5);
  write_bert_shard(dir / "a.hdf5", written);
  const BertSamples read = read_bert_shard(dir / "a.hdf5");
  EXPECT_EQ(read.seq_length, 6);
  EXPECT_EQ(read.max_predictions, 2);
  EXPECT_EQ(read.input_ids, written.input_ids);
  EXPECT_EQ(read.input_mask, written.input_mask);
  EXPECT_EQ(read.segment_ids, written.segment_ids);
  EXPECT_EQ(read.masked_lm_positions, written.masked_lm_positions);
  EXPECT_EQ(read.masked_lm_ids, written.masked_lm_ids);
  EXPECT_EQ(read.next_sentence_labels, written.next_sentence_labels);
  // The MLPerf element types: int32 ids and positions, int8 masks, segments and labels.
  const H5::H5File file(dir / "a.hdf5", H5F_ACC_RDONLY);
  EXPECT_EQ(file.openDataSet("input_ids").getIntType().getSize(), 4u);
  EXPECT_EQ(file.openDataSet("input_mask").getIntType().getSize(), 1u);
  EXPECT_EQ(file.openDataSet("next_sentence_labels").getSpace().getSimpleExtentNdims(), 1);
}

TEST(BertShards, BadFilesAreErrorsNamingFileAndDataset) {
  testing::TempDir dir;
  expect_error_mentions([&] { read_bert_shard(dir / "absent.hdf5"); }, {"absent.hdf5", "does not exist"});
  testing::write_file(dir / "text.hdf5", std::vector<uint8_t>{'n', 'o', 't'});
  expect_error_mentions([&] { read_bert_shard(dir / "text.hdf5"); }, {"text.hdf5", "HDF5"});

  const auto write_with = [&](const std::string& name, const std::function<void(H5::H5File&)>& change) {
    write_bert_shard(dir / name, numbered_samples(0, 3));
    H5::H5File file(dir / name, H5F_ACC_RDWR);
    change(file);
  };
  write_with("missing.hdf5", [](H5::H5File& file) { file.unlink("masked_lm_ids"); });
  expect_error_mentions([&] { read_bert_shard(dir / "missing.hdf5"); }, {"missing.hdf5", "masked_lm_ids"});

  write_with("shape.hdf5", [](H5::H5File& file) {
    file.unlink("segment_ids");
    const hsize_t dims[2] = {3, 5};
    file.createDataSet("segment_ids", H5::PredType::STD_I8LE, H5::DataSpace(2, dims));
  });
  expect_error_mentions([&] { read_bert_shard(dir / "shape.hdf5"); }, {"shape.hdf5", "segment_ids", "[3, 5]", "[3, 6]"});

  write_with("type.hdf5", [](H5::H5File& file) {
    file.unlink("input_ids");
    const hsize_t dims[2] = {3, 6};
    file.createDataSet("input_ids", H5::PredType::IEEE_F32LE, H5::DataSpace(2, dims));
  });
  expect_error_mentions([&] { read_bert_shard(dir / "type.hdf5"); }, {"type.hdf5", "input_ids", "32-bit integers"});

  write_with("rank.hdf5", [](H5::H5File& file) {
    file.unlink("next_sentence_labels");
    const hsize_t dims[2] = {3, 1};
    file.createDataSet("next_sentence_labels", H5::PredType::STD_I8LE, H5::DataSpace(2, dims));
  });
  expect_error_mentions([&] { read_bert_shard(dir / "rank.hdf5"); },
                        {"rank.hdf5", "next_sentence_labels", "1 dimensions"});
}

TEST(BertShards, ShardSetIndexesSamplesGloballyAcrossFiles) {
  testing::TempDir dir;
  write_bert_shard(dir / "part-0.hdf5", numbered_samples(0, 3));
  write_bert_shard(dir / "part-1.hdf5", numbered_samples(3, 4));
  write_bert_shard(dir / "part-2.hdf5", numbered_samples(7, 2));
  BertShardSet shards(list_bert_shards(dir.path().string()), 1);
  ASSERT_EQ(shards.size(), 9);
  const BertSamples batch = shards.gather({8, 0, 4, 3});
  ASSERT_EQ(batch.size(), 4);
  const std::vector<int32_t> wanted = {8, 0, 4, 3};
  for (size_t i = 0; i < wanted.size(); ++i) EXPECT_EQ(batch.input_ids[i * 6], 1000 * wanted[i]);
  EXPECT_EQ(batch.masked_lm_ids[2], 2000 * 0);
  EXPECT_EQ(batch.next_sentence_labels, (std::vector<int8_t>{0, 0, 0, 1}));

  std::filesystem::create_directories(dir.path() / "part-00000.hdf5");  // a directory named like a shard
  expect_error_mentions([&] { list_bert_shards(dir.path().string()); }, {"part-00000.hdf5", "is not a regular file"});
  std::filesystem::remove(dir.path() / "part-00000.hdf5");

  write_bert_shard(dir / "part-3.hdf5", numbered_samples(9, 1, 8, 2));
  expect_error_mentions([&] { BertShardSet(list_bert_shards(dir.path().string())); }, {"part-3.hdf5", "sequence length 8"});
}

TEST(BertShards, TrainOrderSeesEachSampleOncePerEpochAndSplitsGlobalBatchesByRank) {
  testing::TempDir dir;
  write_bert_shard(dir / "part-0.hdf5", numbered_samples(0, 5));
  write_bert_shard(dir / "part-1.hdf5", numbered_samples(5, 7));
  BertShardSet shards(list_bert_shards(dir.path().string()));
  BertTrainOrder single(shards, 42), rank0(shards, 42), rank1(shards, 42);
  std::multiset<int64_t> first_epoch;
  for (int64_t batch = 0; batch < 6; ++batch) {  // 6 global batches of 4 = two epochs of 12
    const std::vector<int64_t> whole = single.batch(batch, 4);
    std::vector<int64_t> joined = rank0.batch(batch, 4, 0, 2);
    const std::vector<int64_t> second = rank1.batch(batch, 4, 1, 2);
    joined.insert(joined.end(), second.begin(), second.end());
    EXPECT_EQ(joined, whole) << "global batch " << batch << " depends on the world size";
    if (batch < 3) first_epoch.insert(whole.begin(), whole.end());
  }
  std::multiset<int64_t> all;
  for (int64_t i = 0; i < 12; ++i) all.insert(i);
  EXPECT_EQ(first_epoch, all);
  // Another epoch, another order; another seed, another order.
  BertTrainOrder again(shards, 42), other(shards, 43);
  EXPECT_NE(again.batch(0, 12), again.batch(1, 12));
  EXPECT_NE(BertTrainOrder(shards, 42).batch(0, 12), other.batch(0, 12));
  EXPECT_THROW(single.batch(0, 5, 0, 2), Error);
  EXPECT_EQ(eval_range(10, 0, 3), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(eval_range(10, 2, 3), (std::pair<int64_t, int64_t>{6, 10}));
}

}  // namespace
}  // namespace trainbench::data
