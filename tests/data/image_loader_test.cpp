#include "data/image_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "data/image_decode.h"
#include "test_files.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

using testing::TempDir;
using testing::write_file;

// `count` small JPEGs; sample i has label i and a uniform grey level of 10 * i, so a batch's pixels
// reveal which files went into it.
std::vector<ImageSample> make_samples(const TempDir& dir, int count) {
  std::vector<ImageSample> samples;
  for (int i = 0; i < count; ++i) {
    Image image;
    image.width = 24 + i % 5;
    image.height = 20 + i % 3;
    image.rgb = std::vector<uint8_t>(size_t(image.width) * image.height * 3, static_cast<uint8_t>(10 * i));
    const std::string path = dir / ("img_" + std::to_string(i) + ".JPEG");
    write_file(path, encode_jpeg(image, 95));
    samples.push_back({path, i});
  }
  return samples;
}

ImageLoaderOptions small_options(LoaderMode mode) {
  ImageLoaderOptions options;
  options.mode = mode;
  options.crop_size = 8;
  options.resize_size = 10;
  options.batch_size = 4;
  options.drop_last = false;
  options.workers = 2;
  options.prefetch_batches = 3;
  options.seed = 17;
  options.normalization.mean = {0, 0, 0};
  options.normalization.std = {1, 1, 1};
  return options;
}

std::vector<ImageBatch> run_epoch(ImageLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<ImageBatch> batches;
  while (auto batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

std::vector<int64_t> labels_of(const std::vector<ImageBatch>& batches) {
  std::vector<int64_t> labels;
  for (const auto& batch : batches) labels.insert(labels.end(), batch.labels.begin(), batch.labels.end());
  return labels;
}

std::vector<int64_t> iota_vector(int64_t count) {
  std::vector<int64_t> values(count);
  for (int64_t i = 0; i < count; ++i) values[i] = i;
  return values;
}

TEST(DataImageLoader, EverySampleOncePerEpoch) {
  TempDir dir;
  ImageLoader loader(make_samples(dir, 23), small_options(LoaderMode::Train));
  EXPECT_EQ(loader.samples_per_epoch(), 23);
  EXPECT_EQ(loader.batches_per_epoch(), 6);
  const auto batches = run_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 6u);
  EXPECT_EQ(batches.back().size, 3);
  for (const auto& batch : batches) {
    EXPECT_EQ(batch.skipped, 0);
    EXPECT_EQ(batch.images.size(), size_t(batch.size) * 3 * 8 * 8);
    EXPECT_EQ(batch.labels.size(), size_t(batch.size));
  }
  auto labels = labels_of(batches);
  EXPECT_NE(labels, iota_vector(23));  // shuffled
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, iota_vector(23));
}

TEST(DataImageLoader, DropLastKeepsOnlyFullBatches) {
  TempDir dir;
  auto options = small_options(LoaderMode::Train);
  options.drop_last = true;
  ImageLoader loader(make_samples(dir, 23), options);
  EXPECT_EQ(loader.batches_per_epoch(), 5);
  EXPECT_EQ(loader.samples_per_epoch(), 20);
  const auto batches = run_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 5u);
  auto labels = labels_of(batches);
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(std::adjacent_find(labels.begin(), labels.end()), labels.end());  // no repeats
}

TEST(DataImageLoader, SameSeedSameBatchesWhateverTheThreadCount) {
  TempDir dir;
  const auto samples = make_samples(dir, 18);
  auto options = small_options(LoaderMode::Train);
  ImageLoader two_workers(samples, options);
  options.workers = 3;
  options.prefetch_batches = 5;
  ImageLoader three_workers(samples, options);
  options.workers = 1;
  options.prefetch_batches = 1;
  ImageLoader one_worker(samples, options);
  const auto reference = run_epoch(two_workers, 4);
  for (ImageLoader* other : {&three_workers, &one_worker}) {
    const auto batches = run_epoch(*other, 4);
    ASSERT_EQ(batches.size(), reference.size());
    for (size_t b = 0; b < batches.size(); ++b) {
      EXPECT_EQ(batches[b].labels, reference[b].labels);
      EXPECT_EQ(batches[b].images, reference[b].images);  // bit-identical augmentation
    }
  }
}

TEST(DataImageLoader, EpochsShuffleDifferently) {
  TempDir dir;
  ImageLoader loader(make_samples(dir, 20), small_options(LoaderMode::Train));
  const auto first = labels_of(run_epoch(loader, 0));
  const auto second = labels_of(run_epoch(loader, 1));
  const auto first_again = labels_of(run_epoch(loader, 0));
  EXPECT_NE(first, second);
  EXPECT_EQ(first, first_again);
}

TEST(DataImageLoader, EpochsReadOneAfterAnotherEqualEpochsStartedAfresh) {
  TempDir dir;
  const auto samples = make_samples(dir, 18);
  ImageLoader streaming(samples, small_options(LoaderMode::Train));
  run_epoch(streaming, 2);
  const auto third = run_epoch(streaming, 3);  // built from the stream that ran on past epoch 2
  streaming.start_epoch(4);
  streaming.next();                            // epoch 4 abandoned after one batch ...
  const auto sixth = run_epoch(streaming, 6);  // ... so epoch 6 starts a new stream
  ImageLoader fresh(samples, small_options(LoaderMode::Train));
  for (const auto& [streamed, epoch] : {std::pair{&third, 3}, std::pair{&sixth, 6}}) {
    const auto expected = run_epoch(fresh, epoch);
    ASSERT_EQ(streamed->size(), expected.size()) << "epoch " << epoch;
    for (size_t b = 0; b < expected.size(); ++b) {
      EXPECT_EQ((*streamed)[b].labels, expected[b].labels) << "epoch " << epoch << " batch " << b;
      EXPECT_EQ((*streamed)[b].images, expected[b].images) << "epoch " << epoch << " batch " << b;
    }
  }
}

TEST(DataImageLoader, EvalKeepsOrderAndPixels) {
  TempDir dir;
  ImageLoader loader(make_samples(dir, 10), small_options(LoaderMode::Eval));
  const auto batches = run_epoch(loader, 3);
  EXPECT_EQ(labels_of(batches), iota_vector(10));
  // Uniform grey 10 * label survives JPEG, resize and crop (identity normalisation).
  for (const auto& batch : batches)
    for (int64_t i = 0; i < batch.size; ++i)
      for (int j = 0; j < 3 * 8 * 8; ++j)
        ASSERT_NEAR(batch.images[i * 3 * 8 * 8 + j], 10.0f * batch.labels[i], 2.0f);
}

TEST(DataImageLoader, ShardsAreDisjointAndCover) {
  TempDir dir;
  const auto samples = make_samples(dir, 23);
  for (bool drop_last : {false, true}) {
    auto options = small_options(LoaderMode::Train);
    options.drop_last = drop_last;
    options.world = 2;
    std::vector<int64_t> per_rank[2];
    for (int rank = 0; rank < 2; ++rank) {
      options.rank = rank;
      ImageLoader loader(samples, options);
      per_rank[rank] = labels_of(run_epoch(loader, 2));
      EXPECT_EQ(int64_t(per_rank[rank].size()), loader.samples_per_epoch());
    }
    std::set<int64_t> rank0(per_rank[0].begin(), per_rank[0].end());
    for (int64_t label : per_rank[1]) EXPECT_EQ(rank0.count(label), 0u) << label;
    if (drop_last) {
      EXPECT_EQ(per_rank[0].size(), 8u);  // 23 / (2 ranks * 4) = 2 full batches each
      EXPECT_EQ(per_rank[1].size(), 8u);
    } else {
      EXPECT_EQ(per_rank[0].size() + per_rank[1].size(), 23u);
    }
  }
}

TEST(DataImageLoader, CorruptFileIsAnErrorNamingIt) {
  TempDir dir;
  auto samples = make_samples(dir, 10);
  const std::string corrupt = dir / "corrupt.JPEG";
  write_file(corrupt, std::string("\xFF\xD8\xFF garbage"));
  samples.insert(samples.begin() + 5, {corrupt, 99});
  ImageLoader loader(samples, small_options(LoaderMode::Eval));
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());  // samples 0-3
  try {
    loader.next();  // samples 4-7 include the corrupt file
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(corrupt), std::string::npos) << e.what();
  }
  const auto rest = loader.next();  // the loader carries on with the batch after
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->labels, (std::vector<int64_t>{7, 8, 9}));
}

TEST(DataImageLoader, SkipCorruptCountsAndLeavesItOut) {
  TempDir dir;
  auto samples = make_samples(dir, 10);
  const std::string corrupt = dir / "corrupt.JPEG";
  write_file(corrupt, std::string("not an image"));
  samples.insert(samples.begin() + 5, {corrupt, 99});
  auto options = small_options(LoaderMode::Eval);
  options.skip_corrupt = true;
  ImageLoader loader(samples, options);
  const auto batches = run_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[1].size, 3);
  EXPECT_EQ(batches[1].skipped, 1);
  EXPECT_EQ(batches[1].images.size(), 3u * 3 * 8 * 8);
  EXPECT_EQ(batches[1].labels, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(labels_of(batches), iota_vector(10));
}

TEST(DataImageLoader, DestructionMidEpochDoesNotHang) {
  TempDir dir;
  const auto samples = make_samples(dir, 40);
  const auto start = std::chrono::steady_clock::now();
  {
    ImageLoader loader(samples, small_options(LoaderMode::Train));
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next().has_value());
  }  // workers are blocked waiting for room, or mid-batch
  {
    ImageLoader never_started(samples, small_options(LoaderMode::Train));
  }
  {
    ImageLoader restarted(samples, small_options(LoaderMode::Train));
    restarted.start_epoch(0);
    restarted.start_epoch(1);  // abandons epoch 0
    EXPECT_EQ(labels_of(run_epoch(restarted, 1)).size(), 40u);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(DataImageLoader, RejectsBadOptions) {
  TempDir dir;
  const auto samples = make_samples(dir, 3);
  auto options = small_options(LoaderMode::Train);
  options.rank = 2;
  options.world = 2;
  EXPECT_THROW(ImageLoader(samples, options), Error);
  options = small_options(LoaderMode::Train);
  options.drop_last = true;  // 3 samples cannot fill a batch of 4
  EXPECT_THROW(ImageLoader(samples, options), Error);
  ImageLoader loader(samples, small_options(LoaderMode::Train));
  EXPECT_THROW(loader.next(), Error);  // before start_epoch
}

}  // namespace
}  // namespace trainbench::data
