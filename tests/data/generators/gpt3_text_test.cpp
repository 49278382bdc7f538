#include "data/generators/gpt3_text.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "data/megatron_indexed.h"
#include "test_files.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;
using testing::write_file;

constexpr int64_t kTinyVocab = 400;

// A public-domain-free stand-in for a book: numbered paragraphs of sentences from a small word list, hard-wrapped
// at 70 columns, between Project Gutenberg's header and footer lines.
std::string generated_book(int paragraphs) {
  static const char* const kWords[] = {
      "the",    "river",  "boy",  "said",   "and",  "old",   "house", "went",  "down",   "to",    "a",     "quiet",
      "street", "where",  "lamp", "burned", "all",  "night", "she",   "found", "letter", "under", "stone", "morning",
      "came",   "slowly", "over", "hill",   "with", "cold",  "wind",  "they",  "walked", "home",  "again", "then"};
  std::string book =
      "\xEF\xBB\xBFProject Gutenberg's Test Book\r\n\r\n*** START OF THIS PROJECT GUTENBERG EBOOK TEST ***\r\n\r\n";
  book += "Produced by a volunteer\r\nand another one\r\n\r\n";
  uint64_t state = 7;
  for (int p = 0; p < paragraphs; ++p) {
    std::string paragraph = "Paragraph " + std::to_string(p) + " begins.";
    for (int word = 0; word < 40 + p % 30; ++word) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      paragraph += (word % 9 == 8 ? ". " : " ") + std::string(kWords[(state >> 33) % 36]);
    }
    paragraph += ".";
    for (size_t at = 70; at < paragraph.size(); at += 71) {
      at = paragraph.rfind(' ', at);
      paragraph[at] = '\n';
    }
    book += paragraph + "\n\n";
  }
  return book + "\r\nEnd of the Project Gutenberg EBook of Test Book\r\nlicence text that is not the book\r\n";
}

// spm_encode run over a text file by the shell, one line of ids per line: the reference for what the pipeline
// hands its own spm_encode child.
std::vector<std::vector<int32_t>> spm_encode_lines(const std::string& model, const std::vector<std::string>& lines,
                                                   const TempDir& dir) {
  const std::string input = dir / "spm-input.txt";
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  write_file(input, text);
  const std::string command = "spm_encode --model=" + model + " --output_format=id < " + input;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  std::vector<std::vector<int32_t>> ids;
  char* line = nullptr;
  size_t capacity = 0;
  while (::getline(&line, &capacity, pipe.get()) > 0) {
    std::istringstream in(line);
    ids.emplace_back();
    for (int32_t id; in >> id;) ids.back().push_back(id);
  }
  std::free(line);
  return ids;
}

std::vector<std::vector<int32_t>> dataset_documents(const std::string& prefix) {
  const IndexedDataset dataset(prefix);
  std::vector<std::vector<int32_t>> documents;
  for (int64_t sequence = 0; sequence < dataset.num_sequences(); ++sequence)
    documents.push_back(dataset.read(sequence));
  return documents;
}

std::string json_line(const std::string& text) { return nlohmann::json{{"text", text}, {"url", "x"}}.dump() + "\n"; }

std::vector<uint8_t> gzip_member(const std::string& text, const std::string& scratch) {
  gzFile file = ::gzopen(scratch.c_str(), "wb");
  ::gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  ::gzclose(file);
  return read_bytes(scratch);
}

// A tiny model trained once for the suite, through the corpus maker itself.
class Gpt3TextTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TempDir();
    write_file(*directory_ / "book.txt", generated_book(120));
    Gpt3CorpusOptions options;
    options.sources = {*directory_ / "book.txt"};
    options.source_package = "";
    options.vocab_size = kTinyVocab;
    options.document_chars = 600;
    summary_ = new Gpt3CorpusSummary(make_gpt3_corpus(options, *directory_ / "corpus"));
  }
  static void TearDownTestSuite() {
    delete summary_;
    delete directory_;
  }
  static const std::string& model() { return summary_->model_path; }

  static TempDir* directory_;
  static Gpt3CorpusSummary* summary_;
  TempDir dir_;
};
TempDir* Gpt3TextTest::directory_ = nullptr;
Gpt3CorpusSummary* Gpt3TextTest::summary_ = nullptr;

TEST_F(Gpt3TextTest, ReadsTheModelsVocabularyAndNormalizer) {
  const SentencePieceModelInfo info = read_sentencepiece_model_info(model());
  EXPECT_EQ(info.vocab_size, kTinyVocab);
  EXPECT_EQ(info.normalizer, "nmt_nfkc");
  EXPECT_TRUE(info.newline_is_space());
  write_file(dir_ / "not-a-model", std::string("hello"));
  EXPECT_THROW(read_sentencepiece_model_info(dir_ / "not-a-model"), Error);
  EXPECT_THROW(read_sentencepiece_model_info(dir_ / "missing.model"), Error);
}

TEST_F(Gpt3TextTest, OutputNamesAreTheOnesRunGpt3Reads) {
  EXPECT_EQ(gpt3_output_prefix("/c4/en_merge/c4-train.en_6.json.gz"), "c4_en_6_c4_spm_text_document");
  EXPECT_EQ(gpt3_output_prefix("c4-train.en_7.json.gz"), "c4_en_7_c4_spm_text_document");
  EXPECT_EQ(gpt3_output_prefix("/c4/c4-validation_24567exp.json"), "c4_en_validation_subset_c4_spm_text_document");
  EXPECT_EQ(gpt3_output_prefix("my-shard.jsonl"), "my_shard_c4_spm_text_document");
}

TEST_F(Gpt3TextTest, PreparedIdsAreSpmEncodesOverConcatenatedGzipMembers) {
  const std::vector<std::string> texts = {
      "The river went down to the old house.",
      "First line of a page.\nSecond line, after a newline.\n\nA paragraph after a blank line.",
      "",  // no tokens: skipped, as the reference's script skips it
      "Unicode: caf\xC3\xA9, na\xC3\xAFve \xE2\x80\x94 \xE6\x9D\xB1\xE4\xBA\xAC and \xF0\x9F\x98\x80 in 2024.",
      "   \t  ",
      "The last document\r\nends with a carriage return and a newline."};
  std::string first, second;
  for (size_t i = 0; i < texts.size(); ++i) (i < 3 ? first : second) += json_line(texts[i]);
  std::vector<uint8_t> bytes = gzip_member(first, dir_ / "a.gz");
  const std::vector<uint8_t> more = gzip_member(second, dir_ / "b.gz");
  bytes.insert(bytes.end(), more.begin(), more.end());  // as `cat a.gz b.gz` makes it
  const std::string input = dir_ / "c4-train.en_6.json.gz";
  write_file(input, bytes);

  const auto files = prepare_gpt3_dataset({input}, model(), dir_ / "out");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].prefix, dir_ / "out/c4_en_6_c4_spm_text_document");
  EXPECT_EQ(files[0].lines, 6);
  EXPECT_EQ(files[0].documents, 4);
  EXPECT_EQ(files[0].empty_documents, 2);

  std::vector<std::string> lines;
  for (const std::string& text : texts) {
    std::string line = text;
    std::replace(line.begin(), line.end(), '\n', ' ');
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  const auto expected = spm_encode_lines(model(), lines, dir_);
  const IndexedDataset dataset(files[0].prefix);
  EXPECT_EQ(dataset.token_type(), TokenType::kUint16);
  EXPECT_EQ(dataset.num_documents(), 4);
  EXPECT_EQ(dataset_documents(files[0].prefix), expected);
  int64_t tokens = 0;
  for (const auto& ids : expected) tokens += static_cast<int64_t>(ids.size());
  EXPECT_EQ(files[0].tokens, tokens);

  // A newline is a word boundary like a space: the document is its lines encoded one after the other.
  const auto separately = spm_encode_lines(
      model(), {"First line of a page.", "Second line, after a newline.", "", "A paragraph after a blank line."}, dir_);
  std::vector<int32_t> joined;
  for (const auto& ids : separately) joined.insert(joined.end(), ids.begin(), ids.end());
  EXPECT_EQ(dataset.read(1), joined);
}

TEST_F(Gpt3TextTest, PlainJsonValidationFileIsPreparedToo) {
  const std::string input = dir_ / "c4-validation_24567exp.json";
  write_file(input, json_line("One validation text.") + json_line("Another one."));
  const auto files = prepare_gpt3_dataset({input}, model(), dir_ / "out");
  EXPECT_EQ(files[0].prefix, dir_ / "out/c4_en_validation_subset_c4_spm_text_document");
  EXPECT_EQ(dataset_documents(files[0].prefix),
            spm_encode_lines(model(), {"One validation text.", "Another one."}, dir_));
}

// The message of the Error `prepare` throws, and that nothing was left in the output folder.
std::string refusal(const std::vector<std::string>& inputs, const std::string& model, const std::string& out) {
  std::string message;
  try {
    prepare_gpt3_dataset(inputs, model, out);
  } catch (const Error& error) {
    message = error.what();
  }
  const bool nothing_left = !fs::exists(out) || fs::is_empty(out);
  EXPECT_TRUE(nothing_left) << out << " after: " << message;
  return message;
}

TEST_F(Gpt3TextTest, BadInputIsRefusedByNameWithNothingCommitted) {
  const std::string good = dir_ / "c4-train.en_6.json.gz";
  write_file(good, gzip_member(json_line("A good text.") + json_line("Another good text."), dir_ / "scratch.gz"));
  const std::string not_json = dir_ / "c4-train.en_7.json";
  write_file(not_json, json_line("fine") + "{\"text\": \"unterminated\n" + json_line("fine"));
  EXPECT_NE(refusal({good, not_json}, model(), dir_ / "out1").find(not_json + ":2: not a JSON line"),
            std::string::npos);

  const std::string no_text = dir_ / "no-text.json";
  write_file(no_text, json_line("fine") + json_line("fine") + "{\"url\": \"x\"}\n");
  EXPECT_NE(refusal({no_text}, model(), dir_ / "out2").find(no_text + ":3: no \"text\" field"), std::string::npos);

  const std::string not_gzip = dir_ / "plain.json.gz";
  write_file(not_gzip, json_line("not compressed"));
  EXPECT_NE(refusal({not_gzip}, model(), dir_ / "out3").find(not_gzip + ": not a gzip file"), std::string::npos);

  std::vector<uint8_t> truncated = read_bytes(good);
  truncated.resize(truncated.size() - 12);
  const std::string cut = dir_ / "cut.json.gz";
  write_file(cut, truncated);
  EXPECT_NE(refusal({cut}, model(), dir_ / "out4").find(cut + ": truncated"), std::string::npos);

  EXPECT_NE(refusal({good}, dir_ / "missing.model", dir_ / "out5").find(dir_ / "missing.model"), std::string::npos);
  EXPECT_NE(refusal({dir_ / "missing.json.gz"}, model(), dir_ / "out6").find(dir_ / "missing.json.gz"),
            std::string::npos);
  EXPECT_NE(refusal({good, good}, model(), dir_ / "out7").find("same dataset"), std::string::npos);
}

TEST_F(Gpt3TextTest, EncoderStopsWhenItsInputFails) {
  int64_t produced = 0, received = 0;
  const auto next_line = [&](std::string& line) {
    if (produced == 20000) throw Error("input: refused at line 20000");
    line = "line " + std::to_string(produced++);
    return true;
  };
  try {
    encode_lines_with_spm(model(), next_line, [&](std::vector<int32_t>&) { ++received; });
    ADD_FAILURE() << "the input's error was lost";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "input: refused at line 20000");  // the input's own error, not spm_encode's
  }
  EXPECT_LE(received, produced);

  write_file(dir_ / "not-a-model", std::string("hello"));
  try {
    encode_lines_with_spm(
        dir_ / "not-a-model", [](std::string&) { return false; }, [](std::vector<int32_t>&) {});
    ADD_FAILURE() << "spm_encode accepted a file that is not a model";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("spm_encode"), std::string::npos) << error.what();
  }
}

TEST_F(Gpt3TextTest, GutenbergBoilerplateIsStripped) {
  const std::string book = strip_gutenberg_boilerplate(generated_book(3));
  EXPECT_EQ(book.rfind("Paragraph 0 begins.", 0), 0u) << book.substr(0, 80);
  EXPECT_EQ(book.find("Gutenberg"), std::string::npos);
  EXPECT_EQ(book.find("Produced by"), std::string::npos);
  EXPECT_EQ(book.find('\r'), std::string::npos);
  EXPECT_EQ(strip_gutenberg_boilerplate("No header at all.\n"), "No header at all.\n");
}

TEST_F(Gpt3TextTest, ParagraphsAreGroupedIntoDocuments) {
  const auto documents = split_into_documents("One\nparagraph.\n\n\nTwo.\n  \nThree is longer.\n\nFour.\n", 12);
  ASSERT_EQ(documents.size(), 3u);
  EXPECT_EQ(documents[0], "One paragraph.");
  EXPECT_EQ(documents[1], "Two.\nThree is longer.");
  EXPECT_EQ(documents[2], "Four.");  // the end of a book is a document of its own
  EXPECT_EQ(split_into_documents("a\n\nb\n", 100), std::vector<std::string>{"a\nb"});
}

TEST_F(Gpt3TextTest, CorpusIsDeterministicAndHoldsOutDisjointValidation) {
  Gpt3CorpusOptions options;
  options.sources = {*directory_ / "book.txt"};
  options.source_package = "";
  options.vocab_size = kTinyVocab;
  options.document_chars = 600;
  const Gpt3CorpusSummary again = make_gpt3_corpus(options, dir_ / "again");
  const fs::path first = fs::path(summary_->model_path).parent_path();
  for (const char* file :
       {"spm.model", "gutenberg_en_train_text_document.bin", "gutenberg_en_train_text_document.idx",
        "gutenberg_en_validation_text_document.bin", "gutenberg_en_validation_text_document.idx", "manifest.json"})
    EXPECT_EQ(read_bytes((first / file).string()), read_bytes(dir_ / ("again/" + std::string(file)))) << file;
  EXPECT_FALSE(fs::exists(dir_ / "again/spm.partial.model"));

  // Every 10th document (from the seed's offset) is validation, encoded as spm_encode encodes it.
  const auto documents = split_into_documents(strip_gutenberg_boilerplate(generated_book(120)), 600);
  std::vector<std::string> train, validation;
  for (size_t i = 0; i < documents.size(); ++i) {
    std::string line = documents[i];
    std::replace(line.begin(), line.end(), '\n', ' ');
    (i % 10 == options.seed % 10 ? validation : train).push_back(line);
  }
  const auto validation_ids = dataset_documents(again.validation_prefix);
  const auto train_ids = dataset_documents(again.train_prefix);
  EXPECT_EQ(validation_ids, spm_encode_lines(again.model_path, validation, dir_));
  EXPECT_EQ(train_ids, spm_encode_lines(again.model_path, train, dir_));
  const std::set<std::vector<int32_t>> train_set(train_ids.begin(), train_ids.end());
  for (const auto& ids : validation_ids) EXPECT_EQ(train_set.count(ids), 0u);
  EXPECT_EQ(again.train_documents, static_cast<int64_t>(train.size()));
  EXPECT_EQ(again.validation_documents, static_cast<int64_t>(validation.size()));

  const auto manifest = nlohmann::json::parse(read_file(dir_ / "again/manifest.json"));
  EXPECT_EQ(manifest["train"]["tokens"], again.train_tokens);
  EXPECT_EQ(manifest["validation"]["documents"], again.validation_documents);
  EXPECT_EQ(manifest["sources"][0]["sha256"].get<std::string>().size(), 64u);
}

TEST_F(Gpt3TextTest, TooSmallOrMissingSourcesAreRefused) {
  Gpt3CorpusOptions options;
  options.sources = {dir_ / "missing.txt"};
  EXPECT_THROW(make_gpt3_corpus(options, dir_ / "corpus"), Error);
  write_file(dir_ / "short.txt", std::string("Just one paragraph.\n"));
  options.sources = {dir_ / "short.txt"};
  EXPECT_THROW(make_gpt3_corpus(options, dir_ / "corpus"), Error);
  EXPECT_FALSE(fs::exists(dir_ / "corpus/spm.model"));
}

TEST_F(Gpt3TextTest, DefaultBooksComeFromTheDebianPackage) {
  const auto sources = default_gpt3_corpus_sources();
  if (!fs::exists(sources[0])) GTEST_SKIP() << sources[0] << " is missing: install " << kGpt3CorpusPackage;
  const std::string holmes = strip_gutenberg_boilerplate(read_file(sources[0]));
  EXPECT_EQ(holmes.rfind("THE ADVENTURES OF SHERLOCK HOLMES", 0), 0u) << holmes.substr(0, 80);
  EXPECT_EQ(holmes.find("Gutenberg"), std::string::npos);
  const std::string sawyer = strip_gutenberg_boilerplate(read_file(sources[1]));
  EXPECT_NE(sawyer.find("TOM SAWYER"), std::string::npos);
  EXPECT_EQ(sawyer.find("Produced by"), std::string::npos);
  EXPECT_GT(split_into_documents(holmes + sawyer, 1500).size(), 500u);
}

}  // namespace
}  // namespace trainbench::data
