// Megatron's mmap indexed dataset: written by us and read by the reference's own indexed_dataset.py, written by
// the reference's builder and read by us, and every kind of damaged file refused by name.
#include "data/megatron_indexed.h"

#include <cstring>
#include <filesystem>
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

using Documents = std::vector<std::vector<int32_t>>;
namespace python = trainbench::testing;  // run_python_script; data::testing is the data tests' own
using testing::TempDir;

Documents random_documents(int count, int32_t max_token, uint64_t seed) {
  Rng random(seed);
  Documents documents(static_cast<size_t>(count));
  for (auto& document : documents) {
    document.resize(random.next_u64() % 40);  // some empty
    for (auto& token : document) token = static_cast<int32_t>(random.next_u64() % (uint64_t(max_token) + 1));
  }
  if (!documents.empty()) documents.back() = {0, max_token};  // both ends of the dtype
  return documents;
}

void write_dataset(const std::string& prefix, TokenType type, const Documents& documents) {
  IndexedDatasetWriter writer(prefix, type);
  for (const auto& document : documents) writer.add_document(document);
  writer.finish();
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename T>
void poke(std::vector<uint8_t>& bytes, size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

// The .idx's layout: header 34 bytes, sizes int32[N], pointers int64[N], doc_idx int64[D].
constexpr size_t kDtypeAt = 17;
constexpr size_t kSizesAt = 34;

// Expects IndexedDataset(prefix) to throw Error naming `file` and saying `what`.
void expect_refused(const std::string& prefix, const std::string& file, const std::string& what) {
  try {
    IndexedDataset dataset(prefix);
    ADD_FAILURE() << "opened " << prefix << "; expected a refusal naming " << file << " (" << what << ")";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(file), std::string::npos) << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  }
}

python::PythonRun run_megatron_data(const std::string& arguments) {
  return python::run_python_script(
      TRAINBENCH_MEGATRON_DATA_SCRIPT,
      std::string(TRAINBENCH_MEGATRON_LM_DIR) + " " + TRAINBENCH_MEGATRON_HELPERS_DIR + " " + arguments);
}

const std::vector<TokenType> kIntegerTypes{TokenType::kUint8, TokenType::kInt8,  TokenType::kInt16,
                                           TokenType::kInt32, TokenType::kInt64, TokenType::kUint16};

int32_t largest_token(TokenType type) {
  switch (type) {
    case TokenType::kUint8:
      return 255;
    case TokenType::kInt8:
      return 127;
    case TokenType::kInt16:
      return 32767;
    case TokenType::kUint16:
      return 65535;
    default:
      return 2147483647;
  }
}

TEST(MegatronIndexed, WriterAndReaderRoundTripEveryIntegerDtype) {
  TempDir dir;
  for (const TokenType type : kIntegerTypes) {
    const std::string prefix = dir / token_type_name(type);
    const Documents documents = random_documents(50, largest_token(type), 7);
    write_dataset(prefix, type, documents);
    const IndexedDataset dataset(prefix);
    EXPECT_EQ(dataset.token_type(), type);
    ASSERT_EQ(dataset.num_sequences(), 50);
    EXPECT_EQ(dataset.num_documents(), 50);
    for (int64_t i = 0; i < 50; ++i) {
      EXPECT_EQ(dataset.read(i), documents[static_cast<size_t>(i)]) << token_type_name(type) << " sequence " << i;
      EXPECT_EQ(dataset.sizes()[static_cast<size_t>(i)],
                static_cast<int32_t>(documents[static_cast<size_t>(i)].size()));
      EXPECT_EQ(dataset.document_index()[static_cast<size_t>(i)], i);
    }
    EXPECT_EQ(dataset.document_index().back(), 50);
    EXPECT_EQ(dataset.read(49, 1, 1), std::vector<int32_t>{largest_token(type)});
  }
}

TEST(MegatronIndexed, BestTokenTypeIsMegatronsChoice) {
  EXPECT_EQ(best_token_type(50257), TokenType::kUint16);  // GPT-2's BPE
  EXPECT_EQ(best_token_type(65499), TokenType::kUint16);
  EXPECT_EQ(best_token_type(65500), TokenType::kInt32);
  EXPECT_EQ(best_token_type(256000), TokenType::kInt32);
}

TEST(MegatronIndexed, OursReadEqualUnderTheReference) {
  TempDir dir;
  std::string prefixes;
  std::vector<Documents> written;
  for (const TokenType type : kIntegerTypes) {
    written.push_back(random_documents(60, largest_token(type), 11 + static_cast<int>(type)));
    write_dataset(dir / token_type_name(type), type, written.back());
    prefixes += " " + (dir / token_type_name(type));
  }
  const python::PythonRun run = run_megatron_data("read " + (dir / "read.json") + prefixes);
  if (run.missing_reference_code()) GTEST_SKIP() << run.errors;
  ASSERT_TRUE(python::succeeded(run));
  const auto read = nlohmann::json::parse(read_bytes(dir / "read.json"));
  for (size_t d = 0; d < kIntegerTypes.size(); ++d) {
    const auto& theirs = read[d];
    EXPECT_EQ(theirs["dtype_code"].get<int>(), static_cast<int>(kIntegerTypes[d]));
    EXPECT_EQ(theirs["sequences"].get<Documents>(), written[d]) << token_type_name(kIntegerTypes[d]);
    std::vector<int64_t> one_per_document(written[d].size() + 1);
    for (size_t i = 0; i < one_per_document.size(); ++i) one_per_document[i] = static_cast<int64_t>(i);
    EXPECT_EQ(theirs["doc_idx"].get<std::vector<int64_t>>(), one_per_document);
  }
}

TEST(MegatronIndexed, ReferenceWrittenReadEqualUnderOurs) {
  // Documents of several sequences (what the builder writes with sentence splitting), every dtype code the
  // reference's reader opens, float64 (code 7) included.
  TempDir dir;
  const std::vector<int> codes{1, 2, 3, 4, 5, 7, 8};
  nlohmann::json datasets = nlohmann::json::array();
  std::vector<std::vector<Documents>> written;
  for (const int code : codes) {
    const int32_t largest = code == 7 ? 1 << 30 : largest_token(static_cast<TokenType>(code));
    const Documents sequences = random_documents(45, largest, 100 + code);
    std::vector<Documents> documents;
    for (size_t i = 0; i < sequences.size(); i += 3)
      documents.push_back(
          Documents(sequences.begin() + static_cast<long>(i), sequences.begin() + static_cast<long>(i + 3)));
    documents.push_back({});  // a document without sequences: doc_idx repeats
    written.push_back(documents);
    datasets.push_back({{"prefix", dir / std::to_string(code)}, {"dtype_code", code}, {"documents", documents}});
  }
  std::ofstream(dir / "write.json") << datasets.dump();
  const python::PythonRun run = run_megatron_data("write " + (dir / "write.json"));
  if (run.missing_reference_code()) GTEST_SKIP() << run.errors;
  ASSERT_TRUE(python::succeeded(run));
  for (size_t c = 0; c < codes.size(); ++c) {
    const IndexedDataset dataset(dir / std::to_string(codes[c]));
    EXPECT_EQ(static_cast<int>(dataset.token_type()), codes[c]);
    ASSERT_EQ(dataset.num_documents(), static_cast<int64_t>(written[c].size()));
    int64_t sequence = 0;
    for (size_t d = 0; d < written[c].size(); ++d) {
      EXPECT_EQ(dataset.document_index()[d], sequence);
      for (const auto& tokens : written[c][d]) EXPECT_EQ(dataset.read(sequence++), tokens) << "code " << codes[c];
    }
    EXPECT_EQ(dataset.document_index().back(), sequence);
    EXPECT_EQ(dataset.num_sequences(), sequence);
  }
}

// A small valid dataset whose files the damage tests rewrite.
struct DamagedDataset {
  TempDir dir;
  std::string prefix = dir / "c4";
  std::string idx = prefix + ".idx";
  std::string bin = prefix + ".bin";
  std::vector<uint8_t> idx_bytes;
  std::vector<uint8_t> bin_bytes;
  DamagedDataset() {
    write_dataset(prefix, TokenType::kUint16, {{1, 2, 3}, {4, 5}, {6, 7, 8, 9}});
    idx_bytes = read_bytes(idx);
    bin_bytes = read_bytes(bin);
  }
  size_t pointers_at() const { return kSizesAt + 3 * 4; }
  size_t doc_idx_at() const { return kSizesAt + 3 * 12; }
  void save() {
    testing::write_file(idx, idx_bytes);
    testing::write_file(bin, bin_bytes);
  }
};

TEST(MegatronIndexed, TruncatedIndexIsRefused) {
  DamagedDataset data;
  data.idx_bytes.resize(data.idx_bytes.size() - 8);
  data.save();
  expect_refused(data.prefix, data.idx, "(truncated)");
  data.idx_bytes.resize(20);  // inside the header
  data.save();
  expect_refused(data.prefix, data.idx, "shorter than the 34-byte header");
}

TEST(MegatronIndexed, IndexWithTrailingBytesIsRefused) {
  DamagedDataset data;
  data.idx_bytes.push_back(0);
  data.save();
  expect_refused(data.prefix, data.idx, "(trailing bytes)");
}

TEST(MegatronIndexed, BinShorterThanItsIndexIsRefused) {
  DamagedDataset data;
  data.bin_bytes.resize(data.bin_bytes.size() - 2);
  data.save();
  expect_refused(data.prefix, data.bin, "the .bin is truncated");
  data.bin_bytes.clear();
  data.save();
  expect_refused(data.prefix, data.bin, "is 0 bytes");
}

TEST(MegatronIndexed, BinLongerThanItsIndexIsRefused) {
  DamagedDataset data;
  data.bin_bytes.resize(data.bin_bytes.size() + 2);
  data.save();
  expect_refused(data.prefix, data.bin, "they do not belong together");
}

TEST(MegatronIndexed, BadMagicIsRefused) {
  DamagedDataset data;
  std::memcpy(data.idx_bytes.data(), "TNTIDX\0\0", 8);  // the 'cached' format's index
  data.save();
  expect_refused(data.prefix, data.idx, "does not start with MMIDIDX");
  data.idx_bytes.resize(4);
  data.save();
  expect_refused(data.prefix, data.idx, "does not start with MMIDIDX");
}

TEST(MegatronIndexed, BadVersionIsRefused) {
  DamagedDataset data;
  poke<uint64_t>(data.idx_bytes, 9, 2);
  data.save();
  expect_refused(data.prefix, data.idx, "index version 2");
}

TEST(MegatronIndexed, BadDtypeCodeIsRefused) {
  for (const uint8_t code : {0, 6, 9, 255}) {
    DamagedDataset data;
    data.idx_bytes[kDtypeAt] = code;
    data.save();
    expect_refused(data.prefix, data.idx, "has dtype code " + std::to_string(code));
  }
}

TEST(MegatronIndexed, DtypeOfAnotherWidthDoesNotFitTheBin) {
  DamagedDataset data;
  data.idx_bytes[kDtypeAt] = 4;  // int32: the pointers and the .bin are laid out for uint16
  data.save();
  expect_refused(data.prefix, data.idx,
                 "sequence 1 starts at byte 6 of the .bin, but the sizes before it put it at byte 12");
}

TEST(MegatronIndexed, InconsistentSizesAndPointersAreRefused) {
  DamagedDataset data;
  poke<int64_t>(data.idx_bytes, data.pointers_at() + 8, 4);
  data.save();
  expect_refused(data.prefix, data.idx, "sequence 1 starts at byte 4");
  DamagedDataset negative;
  poke<int32_t>(negative.idx_bytes, kSizesAt + 4, -2);
  negative.save();
  expect_refused(negative.prefix, negative.idx, "sequence 1 has negative size -2");
}

TEST(MegatronIndexed, DocumentIndexMustRiseFromZeroToTheSequenceCount) {
  DamagedDataset data;
  poke<int64_t>(data.idx_bytes, data.doc_idx_at() + 3 * 8, 2);
  data.save();
  expect_refused(data.prefix, data.idx, "doc_idx must start at 0 and end at the sequence count 3");
  DamagedDataset falling;
  poke<int64_t>(falling.idx_bytes, falling.doc_idx_at() + 8, 2);
  poke<int64_t>(falling.idx_bytes, falling.doc_idx_at() + 16, 1);
  falling.save();
  expect_refused(falling.prefix, falling.idx, "doc_idx falls from 2 to 1 at document 2");
}

TEST(MegatronIndexed, MissingFilesAreNamed) {
  DamagedDataset data;
  std::filesystem::remove(data.bin);
  expect_refused(data.prefix, data.bin, "cannot open");
  std::filesystem::remove(data.idx);
  expect_refused(data.prefix, data.idx, "cannot open");
}

TEST(MegatronIndexed, ValuesThatAreNotTokenIdsAndRangesOutsideASequenceAreRefusedOnRead) {
  TempDir dir;
  write_dataset(dir / "ints", TokenType::kInt32, {{1, 2}, {3, 4, 5}});
  auto bin = read_bytes(dir / "ints.bin");
  poke<int32_t>(bin, 3 * 4, -7);  // sequence 1, token 1
  testing::write_file(dir / "ints.bin", bin);
  const IndexedDataset dataset(dir / "ints");
  EXPECT_EQ(dataset.read(1, 0, 1), std::vector<int32_t>{3});
  const auto message_of = [&](int64_t sequence, int64_t offset, int64_t length) -> std::string {
    try {
      dataset.read(sequence, offset, length);
    } catch (const Error& error) {
      return error.what();
    }
    return "no error";
  };
  EXPECT_NE(message_of(1, 0, 3).find(dir / "ints.bin"), std::string::npos);
  EXPECT_NE(message_of(1, 0, 3).find("sequence 1 holds -7 at token 1"), std::string::npos) << message_of(1, 0, 3);
  EXPECT_NE(message_of(0, 1, 2).find("tokens [1, 3) are outside sequence 0 of 2 tokens"), std::string::npos);
  EXPECT_NE(message_of(2, 0, 0).find("has no sequence 2"), std::string::npos);
  EXPECT_NE(message_of(0, -1, 1).find("outside sequence 0"), std::string::npos);
}

TEST(MegatronIndexed, WriterRefusesATokenThatDoesNotFitAndLeavesNothing) {
  TempDir dir;
  {
    IndexedDatasetWriter writer(dir / "c4", TokenType::kUint16);
    writer.add_document({1, 2, 3});
    try {
      writer.add_document({5, 65536});
      ADD_FAILURE() << "65536 was written as uint16";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(dir / "c4.bin"), std::string::npos) << message;
      EXPECT_NE(message.find("document 1 has token 65536 at position 1, which does not fit uint16"), std::string::npos)
          << message;
    }
    EXPECT_THROW(writer.add_document({-1}), Error);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "the abandoned writer left files";
}

TEST(MegatronIndexed, WriterWhoseCommitFailsLeavesNothing) {
  TempDir dir;
  std::filesystem::create_directories(dir / "c4.idx/occupied");  // the index cannot be moved into place
  {
    IndexedDatasetWriter writer(dir / "c4", TokenType::kInt32);
    writer.add_document({1, 2, 3});
    EXPECT_THROW(writer.finish(), Error);
  }
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left.push_back(entry.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"c4.idx"}) << "only the directory that was in the way remains";
}

TEST(MegatronIndexed, WriterReplacesAnEarlierDatasetWhole) {
  TempDir dir;
  write_dataset(dir / "c4", TokenType::kUint16, {{1, 2, 3}, {4}});
  write_dataset(dir / "c4", TokenType::kInt32, {{70000}});
  const IndexedDataset dataset(dir / "c4");
  EXPECT_EQ(dataset.token_type(), TokenType::kInt32);
  EXPECT_EQ(dataset.num_sequences(), 1);
  EXPECT_EQ(dataset.read(0), std::vector<int32_t>{70000});
  IndexedDatasetWriter abandoned(dir / "other", TokenType::kUint16);
  EXPECT_THROW(IndexedDatasetWriter(dir / "float", TokenType::kFloat64), Error);
}

}  // namespace
}  // namespace trainbench::data
