// The speech layer without features: LibriSpeech readers and the errors they name, the tokenizer, word error
// rate on hand-made cases, the transducer lattice against brute-force path enumeration, the bucketing
// sampler, the loader and the espeak-ng generator.
#include <cmath>
#include <functional>
#include <cstdio>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "data/random.h"
#include "data/test_files.h"
#include "speech/audio.h"
#include "speech/librispeech.h"
#include "speech/loader.h"
#include "speech/synthetic.h"
#include "speech/text.h"
#include "speech/transducer.h"
#include "util/error.h"

namespace trainbench::speech {
namespace {

using data::testing::TempDir;
using data::testing::write_file;

std::vector<float> tone(int64_t samples, double hz = 300) {
  std::vector<float> out(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) out[i] = static_cast<float>(0.3 * std::sin(2 * M_PI * hz * i / 16000.0));
  return out;
}

// A two-utterance chapter 19/198 in subset `subset`.
void write_chapter(const TempDir& dir, const std::string& subset, const std::string& transcript, int rate = 16000) {
  std::filesystem::create_directories(dir.path() / subset / "19" / "198");
  write_flac(dir / (subset + "/19/198/19-198-0000.flac"), tone(16000), rate);
  write_flac(dir / (subset + "/19/198/19-198-0001.flac"), tone(8000), rate);
  write_file(dir / (subset + "/19/198/19-198.trans.txt"), transcript);
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(LibriSpeech, ReadsTheDistributedLayout) {
  TempDir dir;
  write_chapter(dir, "dev-clean", "19-198-0000 NORTHANGER ABBEY\n19-198-0001 CHAPTER ONE\n");
  const std::vector<Utterance> utterances = read_librispeech(dir.path().string(), "dev-clean");
  ASSERT_EQ(utterances.size(), 2u);
  EXPECT_EQ(utterances[0].id, "19-198-0000");
  EXPECT_EQ(utterances[0].transcript, "northanger abbey");
  EXPECT_DOUBLE_EQ(utterances[0].duration, 1.0);
  EXPECT_DOUBLE_EQ(utterances[1].duration, 0.5);
  EXPECT_EQ(filter_by_duration(utterances, 0.7).size(), 1u);
  EXPECT_EQ(filter_by_duration(utterances, 0).size(), 2u);
  const Audio audio = read_audio(utterances[1].audio_path, 16000);
  EXPECT_EQ(audio.samples.size(), 8000u);
  EXPECT_NEAR(audio.samples[100], tone(8000)[100], 1e-4);
}

TEST(LibriSpeech, NamesMissingTranscriptLinesAndFiles) {
  TempDir dir;
  write_chapter(dir, "a", "19-198-0000 NORTHANGER ABBEY\n");
  EXPECT_NE(error_of([&] { read_librispeech(dir.path().string(), "a"); }).find("19-198.trans.txt: has no line for"), std::string::npos);
  write_chapter(dir, "b", "19-198-0000 A\n19-198-0001 B\n19-198-0002 C\n");
  EXPECT_NE(error_of([&] { read_librispeech(dir.path().string(), "b"); }).find("line 19-198-0002 has no 19-198-0002.flac"),
            std::string::npos);
  write_chapter(dir, "c", "19-198-0000\n");
  EXPECT_NE(error_of([&] { read_librispeech(dir.path().string(), "c"); }).find("19-198.trans.txt:1: expected '<utterance-id> TEXT'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_librispeech(dir.path().string(), "none"); }).find("nor a LibriSpeech subset directory none/"),
            std::string::npos);
}

TEST(LibriSpeech, NamesAWrongSampleRateAndUnreadableAudio) {
  TempDir dir;
  write_chapter(dir, "a", "19-198-0000 A\n19-198-0001 B\n", 8000);
  const std::string path = dir / "a/19/198/19-198-0000.flac";
  EXPECT_EQ(error_of([&] { read_audio(path, 16000); }), path + ": expected a sample rate of 16000 Hz, got 8000");
  write_file(dir / "broken.flac", "fLaC but not really");
  EXPECT_NE(error_of([&] { read_audio(dir / "broken.flac"); }).find(dir / "broken.flac: cannot read audio"), std::string::npos);
}

TEST(LibriSpeech, ReadsTheReferenceManifestForm) {
  TempDir dir;
  write_file(dir / "librispeech-dev-clean-wav.json",
             R"([{"transcript": "northanger abbey ", "files": [{"channels": 1, "sample_rate": 16000.0, "bitrate": 16,
                  "duration": 3.2, "num_samples": 51200, "encoding": "Signed Integer PCM", "silent": false,
                  "fname": "dev-clean-wav/19-198-0000.wav", "speed": 1}], "original_duration": 3.2,
                  "original_num_samples": 51200}])");
  const std::vector<Utterance> utterances = read_librispeech(dir.path().string(), "dev-clean");
  ASSERT_EQ(utterances.size(), 1u);
  EXPECT_EQ(utterances[0].id, "19-198-0000");
  EXPECT_EQ(utterances[0].audio_path, dir / "dev-clean-wav/19-198-0000.wav");
  EXPECT_EQ(utterances[0].transcript, "northanger abbey");
  EXPECT_DOUBLE_EQ(utterances[0].duration, 3.2);
  write_file(dir / "librispeech-x-wav.json", R"([{"transcript": "a", "files": [{"fname": "a.wav"}]}])");
  EXPECT_EQ(error_of([&] { read_librispeech(dir.path().string(), "x"); }),
            dir / "librispeech-x-wav.json" + ": entry 0: expected files[].duration");
  // Issue 32: an empty manifest surfaced only as a batch that could not be filled, naming no file.
  write_file(dir / "librispeech-x-wav.json", "[]");
  EXPECT_EQ(error_of([&] { read_librispeech(dir.path().string(), "x"); }),
            dir / "librispeech-x-wav.json" + ": expected a JSON list of utterances, at least one");
}

// Issue 32: an fname of ../../../etc/passwd or an absolute path opened files outside --data, a duration of -5
// and a duplicate transcript line were accepted.
TEST(LibriSpeech, ManifestEntriesOutsideTheDataFolderOrOfNegativeLengthAreNamed) {
  TempDir dir;
  const auto manifest_error = [&](const std::string& fname, const std::string& duration) {
    write_file(dir / "librispeech-x-wav.json",
               R"([{"transcript": "a", "files": [{"fname": ")" + fname + R"(", "duration": )" + duration + "}]}]");
    return error_of([&] { read_librispeech(dir.path().string(), "x"); });
  };
  const std::string manifest = dir / "librispeech-x-wav.json";
  EXPECT_EQ(manifest_error("../../../etc/passwd", "1"),
            manifest + ": entry 0: files[].fname: \"../../../etc/passwd\" leads out of " + dir.path().string() +
                "; expected a path inside it");
  EXPECT_EQ(manifest_error("/etc/passwd", "1"),
            manifest + ": entry 0: files[].fname: \"/etc/passwd\" is an absolute path; expected a path relative to " +
                dir.path().string());
  EXPECT_EQ(manifest_error("a.wav", "-5"), manifest + ": entry 0: files[].duration: expected seconds >= 0, got -5");
  write_file(dir / "librispeech-x-wav.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(error_of([&] { read_librispeech(dir.path().string(), "x"); }), manifest + ": JSON nested deeper than 64 levels");
  write_file(dir / "librispeech-y-wav.json", R"([{"transcript": "a", "files": [{"fname": "/srv/a.wav", "duration": 1}]}])");
  EXPECT_EQ(read_librispeech_manifest(dir / "librispeech-y-wav.json", dir.path().string(), true)[0].audio_path, "/srv/a.wav");
  write_chapter(dir, "twice", "19-198-0000 A\n19-198-0000 B\n");
  EXPECT_NE(error_of([&] { read_librispeech(dir.path().string(), "twice"); })
                .find("19-198.trans.txt:2: a second line for utterance 19-198-0000"),
            std::string::npos);
}

TEST(SpeechText, WordErrorRateCountsEditsAgainstTheReference) {
  EXPECT_EQ(word_errors("the cat sat", "the cat sat").errors, 0);
  EXPECT_EQ(word_errors("the cat sat", "the cat sat").words, 3);
  EXPECT_EQ(word_errors("the bat sat", "the cat sat").errors, 1);          // substitution
  EXPECT_EQ(word_errors("the cat", "the cat sat").errors, 1);              // deletion
  EXPECT_EQ(word_errors("the the cat sat down", "the cat sat").errors, 2);  // insertions
  EXPECT_EQ(word_errors("", "a b c").errors, 3);
  EXPECT_EQ(word_errors("a b", "").errors, 2);
  EXPECT_EQ(word_errors("a b", "").words, 0);
  EXPECT_EQ(word_errors("  sat  cat the ", "the cat sat").errors, 2);  // order matters, spacing does not
  WordErrors corpus;
  corpus += word_errors("a", "a b c d");
  corpus += word_errors("x", "y");
  EXPECT_EQ(corpus.errors, 4);
  EXPECT_EQ(corpus.words, 5);  // corpus WER 4/5, not the mean of 3/4 and 1/1
}

TEST(SpeechText, SentencepieceRoundTripsAndRefusesUnknownCharacters) {
  TempDir dir;
  std::vector<std::string> lines;
  data::Rng rng(1);
  const std::vector<std::string> words = {"and", "the", "earth", "was", "without", "form", "void", "darkness", "upon", "face"};
  for (int i = 0; i < 200; ++i) {
    std::string line;
    for (int w = 0; w < 6; ++w) line += (w ? " " : "") + words[rng.below(words.size())];
    lines.push_back(line);
  }
  train_sentencepiece(lines, 30, dir / "spm");
  const Tokenizer tokenizer(dir / "spm.model");
  EXPECT_EQ(tokenizer.vocab_size(), 30);
  // The same ids as sentencepiece's own encoder, on the training text and on unseen word orders and spacing.
  std::vector<std::string> probes(lines.begin(), lines.begin() + 50);
  probes.insert(probes.end(), {"face", "  upon  the   face ", "darknessvoid formwas", "the"});
  write_file(dir / "probes.txt", [&] {
    std::string text;
    for (const auto& probe : probes) text += probe + "\n";
    return text;
  }());
  FILE* pipe = popen(("spm_encode --model=" + (dir / "spm.model") + " --output_format=id < " + (dir / "probes.txt")).c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string expected;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) expected.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0);
  std::istringstream expected_lines(expected);
  for (const auto& probe : probes) {
    std::string line;
    ASSERT_TRUE(std::getline(expected_lines, line));
    std::string ours;
    for (const int id : tokenizer.encode(probe)) ours += (ours.empty() ? "" : " ") + std::to_string(id);
    EXPECT_EQ(ours, line) << "'" << probe << "'";
  }
  const std::vector<int> ids = tokenizer.encode("the earth was void");
  for (const int id : ids) EXPECT_GT(id, 0);
  EXPECT_EQ(tokenizer.decode(ids), "the earth was void");
  EXPECT_NE(error_of([&] { tokenizer.encode("the quiz"); }).find("'the quiz' needs <unk>"), std::string::npos);
  EXPECT_NE(error_of([&] { train_sentencepiece(lines, 5000, dir / "big"); }).find("sentencepiece training failed"),
            std::string::npos);
}

// -log P(y|x) by summing over every alignment: each path is an order of T blanks and U labels ending in a blank.
double brute_force_nll(const std::vector<float>& blank, const std::vector<float>& label, int64_t T, int64_t U) {
  std::function<double(int64_t, int64_t)> paths = [&](int64_t t, int64_t u) -> double {
    const double b = std::exp(blank[t * (U + 1) + u]);
    if (t == T - 1 && u == U) return b;
    double total = 0;
    if (t < T - 1) total += b * paths(t + 1, u);
    if (u < U) total += std::exp(label[t * U + u]) * paths(t, u + 1);
    return total;
  };
  return -std::log(paths(0, 0));
}

TEST(Transducer, LatticeMatchesBruteForceAndFiniteDifferences) {
  data::Rng rng(7);
  for (const auto& [T, U] : std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {1, 3}, {4, 0}, {3, 2}, {5, 4}}) {
    std::vector<float> blank(static_cast<size_t>(T * (U + 1))), label(static_cast<size_t>(T * std::max<int64_t>(U, 1)));
    for (float& v : blank) v = static_cast<float>(std::log(rng.uniform(0.05, 0.6)));
    for (float& v : label) v = static_cast<float>(std::log(rng.uniform(0.05, 0.6)));
    LatticeView lattice{T, U, blank.data(), U + 1, label.data(), U};
    std::vector<float> grad_blank(blank.size()), grad_label(label.size());
    const double nll = rnnt_negative_log_likelihood(lattice, grad_blank.data(), grad_label.data());
    EXPECT_NEAR(nll, brute_force_nll(blank, label, T, U), 1e-5) << "T " << T << " U " << U;
    const auto numeric = [&](std::vector<float>& values, size_t i) {
      const float saved = values[i];
      values[i] = saved + 1e-2f;
      const double up = rnnt_negative_log_likelihood(lattice, nullptr, nullptr);
      values[i] = saved - 1e-2f;
      const double down = rnnt_negative_log_likelihood(lattice, nullptr, nullptr);
      values[i] = saved;
      return (up - down) / 2e-2;
    };
    for (size_t i = 0; i < blank.size(); ++i) EXPECT_NEAR(grad_blank[i], numeric(blank, i), 1e-3) << "blank " << i;
    for (int64_t i = 0; i < T * U; ++i) EXPECT_NEAR(grad_label[i], numeric(label, static_cast<size_t>(i)), 1e-3) << "label " << i;
  }
}

TEST(Transducer, LongLatticesStayFiniteWherePathProbabilitiesUnderflow) {
  const int64_t T = 2000, U = 300;
  std::vector<float> blank(static_cast<size_t>(T * (U + 1)), std::log(0.01f)), label(static_cast<size_t>(T * U), std::log(0.01f));
  LatticeView lattice{T, U, blank.data(), U + 1, label.data(), U};
  std::vector<float> grad_blank(blank.size()), grad_label(label.size());
  const double nll = rnnt_negative_log_likelihood(lattice, grad_blank.data(), grad_label.data());
  // Every path has T blanks and U labels of probability 0.01: -log P = (T + U) log 100 - log C(T - 1 + U, U).
  const double paths = std::lgamma(static_cast<double>(T + U)) - std::lgamma(static_cast<double>(U + 1)) - std::lgamma(static_cast<double>(T));
  EXPECT_NEAR(nll, static_cast<double>(T + U) * std::log(100.0) - paths, 1e-6 * nll);
  // Each frame is left by exactly one blank on every path: the blank gradients of a frame sum to -1.
  double frame_sum = 0;
  for (int64_t u = 0; u <= U; ++u) frame_sum += grad_blank[static_cast<size_t>(1000 * (U + 1) + u)];
  EXPECT_NEAR(frame_sum, -1.0, 1e-4);
}

TEST(SpeechSampler, BucketsDropAndShuffleAsTheReference) {
  std::vector<double> durations;
  for (int i = 0; i < 103; ++i) durations.push_back(static_cast<double>((i * 37) % 103));
  const auto batches = bucketing_batches(durations, 4, 10, 5, 0);
  ASSERT_EQ(batches.size(), 10u);  // 103 utterances: 3 dropped
  std::set<int64_t> seen;
  for (const auto& batch : batches) {
    ASSERT_EQ(batch.size(), 10u);
    seen.insert(batch.begin(), batch.end());
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_NE(bucketing_batches(durations, 4, 10, 5, 1), batches);  // a new order every epoch
  EXPECT_EQ(bucketing_batches(durations, 4, 10, 5, 0), batches);
  // With one bucket per batch, a batch holds utterances of similar length.
  const auto sorted = bucketing_batches(durations, 10, 10, 5, 0);
  for (const auto& batch : sorted) {
    double low = 1e9, high = -1;
    for (const int64_t i : batch) low = std::min(low, durations[i]), high = std::max(high, durations[i]);
    EXPECT_LT(high - low, 25);
  }
  const auto shares = rank_share(batches, 1, 2);
  EXPECT_EQ(shares[3], std::vector<int64_t>(batches[3].begin() + 5, batches[3].end()));
  EXPECT_EQ(sequential_batches(0, 7, 3), (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
  // Issue 32: eval_batch_size=0 looped forever, allocating, deaf to SIGTERM.
  EXPECT_EQ(error_of([] { sequential_batches(0, 7, 0); }), "eval_batch_size: expected at least 1, got 0");
  EXPECT_EQ(error_of([&] { bucketing_batches(durations, 0, 10, 5, 0); }), "num_buckets: expected at least 1, got 0");
}

TEST(SpeechLoader, BuildsPaddedBatchesInOrderWithAnyNumberOfWorkers) {
  TempDir dir;
  std::vector<Utterance> utterances;
  std::vector<std::vector<int>> tokens;
  for (int i = 0; i < 6; ++i) {
    const std::string path = dir / ("u" + std::to_string(i) + ".flac");
    write_flac(path, tone(4000 + 1600 * i, 200 + 50 * i), 16000);
    utterances.push_back({std::to_string(i), path, "x", (4000 + 1600 * i) / 16000.0});
    tokens.push_back(std::vector<int>(static_cast<size_t>(i + 1), i + 1));
  }
  const std::vector<std::vector<int64_t>> batches = {{5, 0}, {1, 2}, {3, 4}};
  std::vector<std::vector<float>> features_by_workers;
  for (const int workers : {1, 3}) {
    SpeechLoaderOptions options;
    options.train = true;
    options.workers = workers;
    options.prefetch_batches = 2;
    SpeechLoader loader(utterances, tokens, FeatureOptions{}, options);
    loader.start(batches, 4);
    std::vector<float> all;
    for (size_t b = 0; b < batches.size(); ++b) {
      const auto batch = loader.next();
      ASSERT_TRUE(batch.has_value());
      EXPECT_EQ(batch->utterances, batches[b]);
      EXPECT_EQ(batch->max_tokens, std::max(batches[b][0], batches[b][1]) + 1);
      EXPECT_EQ(batch->tokens[static_cast<size_t>(batch->max_tokens)], batches[b][1] + 1);
      EXPECT_EQ(batch->feature_dims, 240);
      EXPECT_EQ(batch->max_frames, std::max(batch->frame_counts[0], batch->frame_counts[1]));
      all.insert(all.end(), batch->features.begin(), batch->features.end());
    }
    EXPECT_FALSE(loader.next().has_value());
    features_by_workers.push_back(all);
  }
  EXPECT_EQ(features_by_workers[0], features_by_workers[1]);

  utterances[2].audio_path = dir / "missing.flac";
  SpeechLoader broken(utterances, tokens, FeatureOptions{}, SpeechLoaderOptions{});
  broken.start(batches, 0);
  EXPECT_TRUE(broken.next().has_value());
  EXPECT_NE(error_of([&] { broken.next(); }).find("missing.flac: cannot read audio"), std::string::npos);
}

TEST(SpeechGenerator, WritesAReadableLibriSpeechLayout) {
  TempDir dir;
  SyntheticSpeechOptions options;
  options.text = "digits";
  options.train_utterances = 6;
  options.eval_utterances = 2;
  options.voices = {"en-us", "en-gb"};
  options.vocab_size = 20;
  make_synthetic_librispeech(dir.path().string(), options);
  const std::vector<Utterance> train = read_librispeech(dir.path().string(), "train-synth");
  ASSERT_EQ(train.size(), 6u);
  EXPECT_EQ(train[0].id, "100-1-0000");
  EXPECT_GT(train[0].duration, 0.5);
  const Tokenizer tokenizer(sentencepiece_model_path(dir.path().string(), 20));
  for (const auto& utterance : train) EXPECT_EQ(tokenizer.decode(tokenizer.encode(utterance.transcript)), utterance.transcript);
  EXPECT_EQ(read_librispeech(dir.path().string(), "dev-synth").size(), 2u);
  const std::vector<Utterance> real = read_librispeech(dir.path().string(), "dev-librivox");
  ASSERT_EQ(real.size(), 5u);
  EXPECT_EQ(real[1].transcript, "he was not an ill disposed young man");
  EXPECT_NEAR(real[1].duration, 3.0, 0.1);
}

}  // namespace
}  // namespace trainbench::speech
