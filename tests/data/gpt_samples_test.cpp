// The GPT sample index against the MLPerf GPT-3 reference's own gpt_dataset.py with its compiled helpers.cpp
// (doc_idx, sample_idx, shuffle_idx and the samples themselves, for two seeds, both sample lengths, one and
// several epochs, both separate_last_epoch branches and the whole-set validation index), numpy's RandomState
// against numpy, and the blend against blendable_dataset.py.
#include "data/gpt_samples.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/random.h"
#include "support/python_script.h"
#include "test_files.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

namespace python = trainbench::testing;  // run_python_script; data::testing is the data tests' own
using testing::TempDir;

python::PythonRun run_megatron_reference(const std::string& arguments) {
  return python::run_python_script(
      TRAINBENCH_MEGATRON_DATA_SCRIPT,
      std::string(TRAINBENCH_MEGATRON_LM_DIR) + " " + TRAINBENCH_MEGATRON_HELPERS_DIR + " " + arguments);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
}

// Documents of 1 to max_length tokens (ids below 50257), written by our writer as uint16. With total_tokens,
// the documents are lengthened evenly to hold exactly that many tokens.
std::shared_ptr<const IndexedDataset> write_corpus(const std::string& prefix, int documents, int max_length,
                                                   uint64_t seed, int64_t total_tokens = 0) {
  Rng random(seed);
  std::vector<int64_t> lengths(static_cast<size_t>(documents));
  int64_t sum = 0;
  for (auto& length : lengths) sum += length = 1 + static_cast<int64_t>(random.next_u64() % uint64_t(max_length));
  if (total_tokens > 0) {
    const int64_t missing = total_tokens - sum;
    if (missing < 0) throw std::logic_error("write_corpus: documents too long for total_tokens");
    for (size_t d = 0; d < lengths.size(); ++d)
      lengths[d] += missing / documents + (static_cast<int64_t>(d) < missing % documents ? 1 : 0);
  }
  IndexedDatasetWriter writer(prefix, best_token_type(50257));
  std::vector<int32_t> tokens;
  for (const int64_t length : lengths) {
    tokens.resize(static_cast<size_t>(length));
    for (auto& token : tokens) token = static_cast<int32_t>(random.next_u64() % 50257);
    writer.add_document(tokens);
  }
  writer.finish();
  return std::make_shared<IndexedDataset>(prefix);
}

std::vector<int32_t> document_range(int32_t begin, int32_t end) {
  std::vector<int32_t> documents;
  for (int32_t d = begin; d < end; ++d) documents.push_back(d);
  return documents;
}

std::vector<int32_t> flattened(const std::vector<SampleStart>& rows) {
  std::vector<int32_t> flat;
  for (const SampleStart& row : rows) {
    flat.push_back(row.doc_position);
    flat.push_back(row.offset);
  }
  return flat;
}

// Samples worth comparing token by token: the first ones, a stride through the rest, and wherever the last
// (possibly short) sample of sample_idx was shuffled to.
std::vector<int64_t> samples_to_compare(const GptSamples& samples) {
  std::vector<int64_t> chosen;
  for (int64_t i = 0; i < samples.size(); ++i)
    if (i < 64 || i % 37 == 0 || samples.index().shuffle_idx[static_cast<size_t>(i)] == samples.size() - 1)
      chosen.push_back(i);
  return chosen;
}

struct ReferenceCase {
  std::string name;
  GptSampleSpec spec;
};

nlohmann::json case_json(const ReferenceCase& c, const GptSamples& ours) {
  return {{"name", c.name},
          {"first_document", c.spec.documents.front()},
          {"end_document", c.spec.documents.back() + 1},
          {"num_samples", c.spec.num_samples},
          {"seq_length", c.spec.seq_length},
          {"seed", c.spec.seed},
          {"plus_one", c.spec.seq_len_plus_one_tokens},
          {"samples", samples_to_compare(ours)}};
}

// Builds each case here and in gpt_dataset.py (through GPTDataset, as the reference's training builds it) and
// compares everything. Returns why not where the reference cannot run (its code or python modules absent).
std::string expect_equal_to_reference(const std::string& prefix, const std::shared_ptr<const IndexedDataset>& dataset,
                                      const std::vector<ReferenceCase>& cases, const std::string& work) {
  std::vector<GptSamples> ours;
  nlohmann::json requests = nlohmann::json::array();
  for (const ReferenceCase& c : cases) {
    ours.emplace_back(dataset, c.spec);
    requests.push_back(case_json(c, ours.back()));
  }
  std::ofstream(work + "/cases.json") << requests.dump();
  const python::PythonRun run =
      run_megatron_reference("index " + prefix + " " + work + "/cases.json " + work + "/index.json");
  if (run.missing_reference_code()) return run.errors.empty() ? "reference unavailable" : run.errors;
  if (!run.ok()) throw std::runtime_error(run.failure());
  const nlohmann::json theirs = read_json(work + "/index.json");
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(cases[c].name);
    const GptSampleIndex& index = ours[c].index();
    EXPECT_EQ(index.epochs.num_epochs, theirs[c]["num_epochs"].get<int32_t>());
    EXPECT_EQ(index.doc_idx, theirs[c]["doc_idx"].get<std::vector<int32_t>>());
    EXPECT_EQ(flattened(index.sample_idx), theirs[c]["sample_idx"].get<std::vector<int32_t>>());
    EXPECT_EQ(index.shuffle_idx, theirs[c]["shuffle_idx"].get<std::vector<int64_t>>());
    for (const auto& [sample, tokens] : theirs[c]["samples"].items())
      EXPECT_EQ(ours[c].sample(std::stoll(sample)), tokens.get<std::vector<int32_t>>()) << "sample " << sample;
  }
  return "";
}

TEST(GptSamples, IndexAndSamplesEqualTheReferenceForTwoSeedsAndBothSampleLengths) {
  TempDir dir;
  const std::string prefix = dir / "corpus";
  const auto dataset = write_corpus(prefix, 1500, 300, 42);  // about 226,000 tokens
  constexpr int32_t kSeqLength = 128;
  const std::vector<int32_t> all = document_range(0, 1500);
  const int64_t per_epoch = count_tokens(dataset->sizes(), all) / kSeqLength;
  std::vector<ReferenceCase> cases;
  bool separated = false;
  bool not_separated = false;
  for (const uint32_t seed : {1234u, 31337u}) {
    for (const bool plus_one : {true, false}) {
      const std::string tag = std::to_string(seed) + (plus_one ? "_plus_one" : "_exact");
      // One epoch; 2.3 epochs (the last used under 80%: separate_last_epoch); 2.9 epochs (over 80%); the whole set.
      const std::vector<std::pair<std::string, int64_t>> wanted{{"one_epoch", per_epoch / 2},
                                                                {"separate", per_epoch * 23 / 10},
                                                                {"joined", per_epoch * 29 / 10},
                                                                {"all", -1}};
      for (const auto& [name, num_samples] : wanted) {
        cases.push_back({name + "_" + tag, {all, num_samples, kSeqLength, seed, plus_one}});
        const EpochPlan plan =
            plan_epochs(count_tokens(dataset->sizes(), all), kSeqLength, num_samples, plus_one ? 1 : 0);
        (plan.separate_last_epoch ? separated : not_separated) |= plan.num_epochs > 1;
      }
    }
  }
  cases.push_back({"split", {document_range(200, 1100), per_epoch, 100, 7, true}});  // a split's documents
  EXPECT_TRUE(separated && not_separated) << "the cases must cover both separate_last_epoch branches";
  const std::string unavailable = expect_equal_to_reference(prefix, dataset, cases, dir.path().string());
  if (!unavailable.empty()) GTEST_SKIP() << unavailable;
}

TEST(GptSamples, MiniScaleIndexEqualsTheReference) {
  // The mini preset's scale: 100,000 documents, 10,000 training samples of 2048 tokens (two epochs, the second
  // separated), and the whole-set validation index. Its 16,779,265 tokens (8193 x 2048 + 1) are past float's
  // exact integers (2^24): helpers.cpp counts ceil(float(tokens) / 2048) = 8193 samples where an exact ceil
  // counts 8194, so the reference leaves the last token out, and so must we.
  TempDir dir;
  const std::string prefix = dir / "mini";
  const auto dataset = write_corpus(prefix, 100000, 330, 5, 16779265);
  const std::vector<int32_t> all = document_range(0, 100000);
  EXPECT_EQ(GptSamples(dataset, {all, -1, 2048, 1234, false}).size(), 8193);
  EXPECT_TRUE(GptSamples(dataset, {all, 10000, 2048, 1234, false}).index().epochs.separate_last_epoch);
  const std::vector<ReferenceCase> cases{{"train", {all, 10000, 2048, 1234, false}},
                                         {"valid", {all, -1, 2048, 1234, false}}};
  const std::string unavailable = expect_equal_to_reference(prefix, dataset, cases, dir.path().string());
  if (!unavailable.empty()) GTEST_SKIP() << unavailable;
}

TEST(GptSamples, NumpyRandomStateEqualsNumpy) {
  TempDir dir;
  // Seeds at both ends of numpy's range; sizes with masks of every width up to 2^17.
  const std::vector<std::tuple<uint32_t, int64_t, int64_t>> cases{
      {0, 0, 1}, {1, 1, 2}, {1234, 10, 1000}, {4294967295u, 70000, 3}, {31337, 65537, 5000}};
  nlohmann::json requests = nlohmann::json::array();
  for (const auto& [seed, permutation, shuffle] : cases)
    requests.push_back({{"seed", seed}, {"permutation", permutation}, {"shuffle", shuffle}});
  std::ofstream(dir / "random.json") << requests.dump();
  const python::PythonRun run =
      run_megatron_reference("numpy_random " + (dir / "random.json") + " " + (dir / "drawn.json"));
  if (run.missing_reference_code()) GTEST_SKIP() << run.errors;
  ASSERT_TRUE(python::succeeded(run));
  const nlohmann::json theirs = read_json(dir / "drawn.json");
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& [seed, permutation, shuffle] = cases[c];
    NumpyRandomState random(seed);
    EXPECT_EQ(random.permutation(permutation), theirs[c]["permutation"].get<std::vector<int64_t>>()) << "seed " << seed;
    std::vector<uint32_t> shuffled(static_cast<size_t>(shuffle));
    for (size_t i = 0; i < shuffled.size(); ++i) shuffled[i] = static_cast<uint32_t>(i);
    random.shuffle(shuffled);  // continuing the same stream, as the shuffle index's second part does
    EXPECT_EQ(shuffled, theirs[c]["shuffle"].get<std::vector<uint32_t>>()) << "seed " << seed;
  }
}

TEST(GptSamples, BlendingIndicesEqualTheReference) {
  TempDir dir;
  Rng random(9);
  const auto random_weights = [&](int count) {
    std::vector<double> weights;
    for (int i = 0; i < count; ++i) weights.push_back(0.05 + random.uniform());
    return weights;
  };
  struct BlendCase {
    std::vector<double> weights;
    int64_t num_samples;
    std::vector<int64_t> sizes;
  };
  // MLPerf's train blend (0.5 c4_en_6, 0.5 c4_en_7) and validation (1.00 one set, -1: the whole set); three and
  // nine odd weights; 20 and 150 datasets for numpy's pairwise sums of the weights.
  std::vector<BlendCase> cases{{{0.5, 0.5}, 20000000, {1000, 1000}},
                               {{1.0}, -1, {5000}},
                               {{0.3, 0.2, 0.5}, 12345, {3800, 2500, 6300}},
                               {random_weights(9), 7, {3, 1, 2, 1, 1, 3, 2, 1, 1}},
                               {random_weights(20), 5000, std::vector<int64_t>(20, 300)},
                               {random_weights(150), 100000, std::vector<int64_t>(150, 700)},
                               {{0.5, 0.5}, -1, {40, 41}}};
  nlohmann::json requests = nlohmann::json::array();
  for (const BlendCase& c : cases)
    requests.push_back({{"weights", c.weights}, {"num_samples", c.num_samples}, {"sizes", c.sizes}});
  std::ofstream(dir / "blend.json") << requests.dump();
  const python::PythonRun run = run_megatron_reference("blend " + (dir / "blend.json") + " " + (dir / "out.json"));
  if (run.missing_reference_code()) GTEST_SKIP() << run.errors;
  ASSERT_TRUE(python::succeeded(run));
  const nlohmann::json theirs = read_json(dir / "out.json");
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("blend case " + std::to_string(c));
    EXPECT_EQ(blend_num_samples(cases[c].weights, cases[c].num_samples),
              theirs[c]["num_samples"].get<std::vector<int64_t>>());
    int64_t size = 0;
    for (const int64_t s : cases[c].sizes) size += s;
    const BlendingIndices ours = blending_indices(cases[c].weights, size);
    EXPECT_EQ(ours.dataset_index, theirs[c]["dataset_index"].get<std::vector<uint8_t>>());
    EXPECT_EQ(ours.dataset_sample_index, theirs[c]["dataset_sample_index"].get<std::vector<int64_t>>());
  }
  EXPECT_EQ(blend_num_samples({0.5, 0.5}, 20000000), (std::vector<int64_t>{10050000, 10050000}));
  EXPECT_EQ(blend_num_samples({1.0}, -1), std::vector<int64_t>{-1});  // the validation set stays "all of it"
}

TEST(GptSamples, WholeSetIndexCoversEveryTokenOnceAndPadsTheLastSample) {
  TempDir dir;
  const auto dataset = write_corpus(dir / "valid", 40, 50, 3);
  const std::vector<int32_t> all = document_range(0, 40);
  std::vector<int32_t> corpus;
  for (const int32_t d : all) {
    const std::vector<int32_t> document = dataset->read(d);
    corpus.insert(corpus.end(), document.begin(), document.end());
  }
  for (const bool plus_one : {false, true}) {
    SCOPED_TRACE(plus_one ? "seq_length + 1 tokens" : "seq_length tokens");
    const GptSamples samples(dataset, {all, -1, 16, 99, plus_one});
    const int32_t extra = plus_one ? 1 : 0;
    const int64_t count = (static_cast<int64_t>(corpus.size()) - extra + 15) / 16;
    ASSERT_EQ(samples.size(), count);
    EXPECT_EQ(samples.sample_length(), 16 + extra);
    std::vector<int64_t> at_position(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) at_position[static_cast<size_t>(samples.index().shuffle_idx[i])] = i;
    // Samples in sample_idx order, each but the last without its overlapping token, give the corpus once,
    // followed by the last sample's -1 padding.
    std::vector<int32_t> joined;
    for (int64_t position = 0; position < count; ++position) {
      const std::vector<int32_t> sample = samples.sample(at_position[static_cast<size_t>(position)]);
      joined.insert(joined.end(), sample.begin(), sample.end() - (position + 1 < count ? extra : 0));
    }
    ASSERT_GE(joined.size(), corpus.size());
    const size_t padding = joined.size() - corpus.size();
    EXPECT_LT(padding, static_cast<size_t>(samples.sample_length()));
    EXPECT_EQ(std::vector<int32_t>(joined.begin(), joined.begin() + static_cast<long>(corpus.size())), corpus);
    EXPECT_EQ(std::vector<int32_t>(joined.begin() + static_cast<long>(corpus.size()), joined.end()),
              std::vector<int32_t>(padding, -1));
  }
}

TEST(GptSamples, PlusOneSamplesOverlapTheNextByOneToken) {
  TempDir dir;
  const auto dataset = write_corpus(dir / "c4", 30, 40, 8);
  const std::vector<int32_t> all = document_range(0, 30);
  const GptSamples plus_one(dataset, {all, 20, 8, 5, true});
  const GptSamples exact(dataset, {all, 20, 8, 5, false});
  EXPECT_EQ(plus_one.sample_length(), 9);
  EXPECT_EQ(exact.sample_length(), 8);
  const auto by_position = [](const GptSamples& samples, int64_t position) {
    for (int64_t i = 0; i < samples.size(); ++i)
      if (samples.index().shuffle_idx[static_cast<size_t>(i)] == position) return samples.sample(i);
    return std::vector<int32_t>{};
  };
  for (int64_t position = 0; position + 1 < 10; ++position) {
    EXPECT_EQ(by_position(plus_one, position).back(), by_position(plus_one, position + 1).front());
    const auto first = by_position(exact, position);
    const auto second = by_position(exact, position + 1);
    std::vector<int32_t> both(first);
    both.insert(both.end(), second.begin(), second.end());
    EXPECT_EQ(std::vector<int32_t>(both.begin(), both.begin() + 9), by_position(plus_one, position));
  }
}

TEST(GptSamples, BlendedSamplesReadFromTheirDatasets) {
  // As the reference builds the training blend: each dataset asked for its share of 100 samples (+0.5%), the
  // blend as long as the datasets together, of which training reads the first 100.
  TempDir dir;
  const std::vector<double> weights{0.5, 0.5};
  const std::vector<int64_t> wanted = blend_num_samples(weights, 100);
  EXPECT_EQ(wanted, (std::vector<int64_t>{51, 51}));
  const auto first = std::make_shared<const GptSamples>(write_corpus(dir / "c4_en_6", 60, 80, 1),
                                                        GptSampleSpec{document_range(0, 60), wanted[0], 32, 1, false});
  const auto second = std::make_shared<const GptSamples>(write_corpus(dir / "c4_en_7", 70, 80, 2),
                                                         GptSampleSpec{document_range(0, 70), wanted[1], 32, 1, false});
  const BlendedSamples blend({first, second}, weights);
  EXPECT_EQ(blend.size(), first->size() + second->size());
  for (int64_t i = 0; i < 100; ++i) {
    const auto& from = blend.indices().dataset_index[static_cast<size_t>(i)] == 0 ? first : second;
    EXPECT_EQ(blend.sample(i), from->sample(blend.indices().dataset_sample_index[static_cast<size_t>(i)]));
  }
  EXPECT_THROW(blend.sample(blend.size()), Error);
}

TEST(GptSamples, BadSpecificationsAreRefusedNamingTheDataset) {
  TempDir dir;
  const auto dataset = write_corpus(dir / "c4", 10, 20, 4);
  const auto message_of = [&](const GptSampleSpec& spec) -> std::string {
    try {
      GptSamples samples(dataset, spec);
    } catch (const Error& error) {
      return error.what();
    }
    return "no error";
  };
  const std::string outside = message_of({{0, 10}, 5, 8, 1, true});
  EXPECT_NE(outside.find(dir / "c4"), std::string::npos) << outside;
  EXPECT_NE(outside.find("document 10 is outside the dataset's 10 sequences"), std::string::npos) << outside;
  EXPECT_NE(message_of({{0, 1}, 5, 1, 1, true}).find("seq_length is 1"), std::string::npos);
  EXPECT_NE(message_of({{}, 5, 8, 1, true}).find("no documents"), std::string::npos);
  const GptSamples samples(dataset, {document_range(0, 10), 3, 8, 1, true});
  EXPECT_THROW(samples.sample(-1), Error);
  EXPECT_THROW(samples.sample(samples.size()), Error);
  EXPECT_THROW(blending_indices({0.0, 0.0}, 4), Error);
  EXPECT_THROW(blending_indices({-1.0, 2.0}, 4), Error);
}

TEST(GptSamples, EpochPlanFollowsTheEightyPercentRule) {
  // 1000 tokens an epoch, 10 a sample: 99 samples an epoch with the extra token, 100 without.
  EXPECT_EQ(plan_epochs(1000, 10, 99, 1).num_epochs, 1);
  EXPECT_EQ(plan_epochs(1000, 10, 100, 1).num_epochs, 2);
  EXPECT_EQ(plan_epochs(1000, 10, 100, 0).num_epochs, 1);
  EXPECT_EQ(plan_epochs(1000, 10, -1, 0).num_epochs, 1);
  const EpochPlan few = plan_epochs(1000, 10, 99 + 78, 1);  // 78 of the last epoch's 100: under 80% of 99
  EXPECT_EQ(few.num_epochs, 2);
  EXPECT_TRUE(few.separate_last_epoch);
  EXPECT_EQ(few.samples_before_last_epoch, 99);
  EXPECT_FALSE(plan_epochs(1000, 10, 99 + 80, 1).separate_last_epoch);
}

}  // namespace
}  // namespace trainbench::data
