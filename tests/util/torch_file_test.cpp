// The torch file reader (util/torch_file.h): state dicts python3-torch writes (zip and legacy formats, pickle
// protocols 2 and 4, an OrderedDict with every dtype, a Parameter, views of one storage, a module's state_dict
// with its _metadata) read to the bytes Python holds; and the files crafted here byte by byte that LibTorch's
// unpickler crashed on or read heap memory from, each refused naming the file and the cause.
#include "util/torch_file.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/test_files.h"
#include "support/crafted_torch_file.h"
#include "support/error_message.h"
#include "support/python_script.h"
#include "util/atomic_file.h"
#include "util/torch_format.h"

namespace trainbench {
namespace {

using data::testing::TempDir;
using testing::archive;
using testing::CraftedTensor;
using testing::error_message;
using testing::floats;
using testing::int_tuple;
using testing::integer;
using testing::state_dict_pickle;
using testing::str;

class TorchFileTest : public ::testing::Test {
 protected:
  // The error reading `bytes` as a file named `name` gives; the test fails unless it names the file.
  std::string refusal(const std::string& name, const std::string& bytes) {
    const std::string path = directory_ / name;
    data::testing::write_file(path, bytes);
    const std::string error = error_message([&] { read_torch_state_dict(path); });
    EXPECT_EQ(error.rfind(path, 0), 0u) << error;
    return error;
  }

  TempDir directory_;
};

// Importing torch takes seconds on 2 cores: ask once.
bool python_has_torch() {
  static const bool has_torch = testing::python_has("torch");
  return has_torch;
}

// torch_file_reference.py's files and its description of them, written once: importing torch takes seconds.
struct PythonFiles {
  PythonFiles()
      : tensors(
            nlohmann::json::parse(testing::or_throw(testing::run_python_script(TRAINBENCH_TORCH_FILE_REFERENCE_SCRIPT,
                                                                               "write " + directory.path().string()))
                                      .output)) {}
  TempDir directory;
  nlohmann::json tensors;
};
const PythonFiles& python_files() {
  static const PythonFiles files;
  return files;
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// ---- the attacks of issue 45 ----

TEST_F(TorchFileTest, RefusesAStrideThatReachesPastItsStorage) {
  // Six floats viewed as 2 x 3 with strides (3, 2): the last element would be element 7.
  const std::string error = refusal(
      "stride.pt", archive(state_dict_pickle({{"w", "0", 6, 0, {2, 3}, {3, 2}}}), {{"0", floats({1, 2, 3, 4, 5, 6})}}));
  EXPECT_CONTAINS(error, "stride.pt: w: reaches element 7 of a storage of 6");
}

TEST_F(TorchFileTest, RefusesAStorageOffsetNearItsEnd) {
  const std::string error = refusal(
      "offset.pt", archive(state_dict_pickle({{"w", "0", 6, 5, {2}, {1}}}), {{"0", floats({1, 2, 3, 4, 5, 6})}}));
  EXPECT_CONTAINS(error, "offset.pt: w: reaches element 6 of a storage of 6 (storage offset 5");
  EXPECT_CONTAINS(refusal("negative.pt", archive(state_dict_pickle({{"w", "0", 6, -1, {2}, {1}}}),
                                                 {{"0", floats({1, 2, 3, 4, 5, 6})}})),
                  "storage offset -1 is negative");
  EXPECT_CONTAINS(refusal("overflow.pt", archive(state_dict_pickle({{"w", "0", 6, 0, {3, 2}, {INT64_MAX / 2 + 1, 1}}}),
                                                 {{"0", floats({1, 2, 3, 4, 5, 6})}})),
                  "overflow 64-bit arithmetic");
}

TEST_F(TorchFileTest, RefusesAStorageRecordShorterThanItsElements) {
  const std::string error =
      refusal("short.pt", archive(state_dict_pickle({{"w", "0", 6, 0, {6}, {1}}}), {{"0", floats({1, 2, 3, 4, 5})}}));
  EXPECT_CONTAINS(error, "short.pt: storage 0: holds 20 bytes, its 6 float32 elements need 24");
  EXPECT_CONTAINS(refusal("missing.pt", archive(state_dict_pickle({{"w", "0", 6, 0, {6}, {1}}}), {})),
                  "has no record archive/data/0");
}

TEST_F(TorchFileTest, RefusesAPickleNested150000Deep) {
  // Lists in lists, and dicts in dicts: the machine loops rather than recurses, so neither reaches the stack.
  std::string lists = "\x80\x02";
  for (int i = 0; i < 150000; ++i) lists += "]";
  for (int i = 0; i < 149999; ++i) lists += "a";
  EXPECT_CONTAINS(refusal("lists.pt", archive(lists + ".", {})), "holds a list, not a dict of tensors");
  std::string dicts = "\x80\x02";
  for (int i = 0; i < 150000; ++i) dicts += "}" + str("k");
  dicts += "}";
  for (int i = 0; i < 150000; ++i) dicts += "s";
  EXPECT_CONTAINS(refusal("dicts.pt", archive(dicts + ".", {})), "dicts.pt: k: is a dict, not a tensor");
  std::string marks = "\x80\x02";
  for (int i = 0; i < 150000; ++i) marks += "(";
  EXPECT_CONTAINS(refusal("marks.pt", archive(marks + "}.", {})), "STOP with 1 values on the stack");
}

TEST_F(TorchFileTest, RefusesAMemoEntryNeverStored) {
  const std::string error = refusal("memo.pt", archive(std::string("\x80\x02}q\x00j\xff\xff\xff\x7f.", 10), {}));
  EXPECT_CONTAINS(error, "memo.pt: data.pkl: pickle offset 5: memo entry 2147483647 was never stored");
}

TEST_F(TorchFileTest, CopiesTensorsThatShareAStorageEachWithinItsBounds) {
  // A matrix, its transpose and its second row, all on one storage: each reads its own values.
  const std::string file = archive(state_dict_pickle({{"matrix", "0", 6, 0, {2, 3}, {3, 1}},
                                                      {"transposed", "0", 6, 0, {3, 2}, {1, 3}},
                                                      {"row", "0", 6, 3, {3}, {1}}}),
                                   {{"0", floats({1, 2, 3, 4, 5, 6})}});
  const std::string path = directory_ / "shared.pt";
  data::testing::write_file(path, file);
  const std::vector<StoredTensor> tensors = read_torch_state_dict(path);
  ASSERT_EQ(tensors.size(), 3u);
  EXPECT_EQ(tensors[0].bytes, floats({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tensors[1].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(tensors[1].bytes, floats({1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(tensors[2].bytes, floats({4, 5, 6}));
}

TEST_F(TorchFileTest, ReadsAnyStrideOfASizeOneDimension) {
  // torch leaves a size-1 dimension's stride as it likes; it never moves, so even INT64_MAX reads no other byte.
  const std::string path = directory_ / "size_one.pt";
  data::testing::write_file(path, archive(state_dict_pickle({{"w", "0", 6, 1, {1, 3, 1}, {INT64_MAX, 2, INT64_MAX}}}),
                                          {{"0", floats({1, 2, 3, 4, 5, 6})}}));
  const std::vector<StoredTensor> tensors = read_torch_state_dict(path);
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].bytes, floats({2, 4, 6}));
}

TEST_F(TorchFileTest, RefusesViewsThatWouldMultiplyTheFileInMemory) {
  // One float seen 2^26 times through a zero stride: 256 MiB from a file of a few hundred bytes.
  const std::string error = refusal(
      "expand.pt", archive(state_dict_pickle({{"w", "0", 1, 0, {int64_t{1} << 26}, {0}}}), {{"0", floats({1})}}));
  EXPECT_CONTAINS(error, "expand.pt: w: its views of shared storages add up to more than twice");
}

TEST_F(TorchFileTest, RefusesGlobalsOutsideTheAllowList) {
  EXPECT_CONTAINS(refusal("system.pt", archive("\x80\x02\x63os\nsystem\n" + str("true") + "\x85R.", {})),
                  "system.pt: data.pkl: pickle offset 2: global os.system is not one a state dict names");
  // An allowed storage class called rather than named in a persistent id.
  EXPECT_CONTAINS(refusal("call.pt", archive("\x80\x02\x63torch\nFloatStorage\n)R.", {})),
                  "torch.FloatStorage is called");
  CraftedTensor typed{"w", "0", 1, 0, {1}, {1}, "QUInt8Storage"};
  EXPECT_CONTAINS(refusal("quantized.pt", archive(state_dict_pickle({typed}), {{"0", "x"}})),
                  "global torch.QUInt8Storage is not one a state dict names");
}

TEST_F(TorchFileTest, RefusesWhatIsNotAStateDict) {
  EXPECT_CONTAINS(refusal("list.pt", archive("\x80\x02](K\x01\x65.", {})), "holds a list, not a dict of tensors");
  EXPECT_CONTAINS(refusal("int.pt", archive("\x80\x02}(" + str("epoch") + "K\x03u.", {})),
                  "int.pt: epoch: is a int, not a tensor");
  EXPECT_CONTAINS(refusal("text.pt", "weights\n"), "neither a zip archive nor legacy");
  EXPECT_CONTAINS(
      refusal("twice.pt", archive(state_dict_pickle({{"w", "0", 1, 0, {1}, {1}}, {"w", "0", 1, 0, {1}, {1}}}),
                                  {{"0", floats({1})}})),
      "twice.pt: w: is set twice");
  const std::string shapes =
      refusal("shapes.pt", archive("\x80\x02}(" + str("w") + "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") +
                                       "ctorch\nFloatStorage\n" + str("0") + str("cpu") + integer(2) + "tQ" +
                                       integer(0) + int_tuple({2}) + int_tuple({1, 1}) + "\x89}tRu.",
                                   {{"0", floats({1, 2})}}));
  EXPECT_CONTAINS(shapes, "a tensor of 1 sizes and 2 strides");
  EXPECT_CONTAINS(refusal("view.pt", archive(state_dict_pickle({{"w", "0", 2, 0, {3}, {1}}}), {{"0", floats({1, 2})}})),
                  "view.pt: w: reaches element 2 of a storage of 2");
}

TEST_F(TorchFileTest, RefusesADamagedOrTruncatedLegacyFile) {
  if (!python_has_torch()) GTEST_SKIP() << "python3-torch is not installed";
  const std::string legacy = read_file(python_files().directory / "legacy.pt");
  EXPECT_CONTAINS(refusal("cut.pt", legacy.substr(0, legacy.size() - 3)), "runs past the end of the file (truncated?)");
  EXPECT_CONTAINS(refusal("longer.pt", legacy + "x"), "longer.pt: 1 bytes after the last storage");
  std::string big_endian = legacy;
  big_endian[big_endian.find('\x88', big_endian.find("little_endian"))] = '\x89';  // NEWTRUE -> NEWFALSE
  EXPECT_CONTAINS(refusal("big.pt", big_endian), "only little-endian files are read");
}

// ---- files Python writes ----

void expect_tensors_as_python_wrote(const std::string& path, const nlohmann::json& expected) {
  SCOPED_TRACE(path);
  const std::vector<StoredTensor> tensors = read_torch_state_dict(path);
  ASSERT_EQ(tensors.size(), expected.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(tensors[i].name, expected[i].at("name").get<std::string>());
    EXPECT_EQ(dtype_name(tensors[i].dtype), expected[i].at("dtype").get<std::string>());
    EXPECT_EQ(tensors[i].shape, expected[i].at("shape").get<std::vector<int64_t>>());
    std::string hex;
    for (const unsigned char byte : tensors[i].bytes) {
      const char digits[] = "0123456789abcdef";
      hex += {digits[byte >> 4], digits[byte & 15]};
    }
    EXPECT_EQ(hex, expected[i].at("hex").get<std::string>());
  }
}

TEST_F(TorchFileTest, ReadsWhatPythonWritesInEveryFormatAndDtype) {
  if (!python_has_torch()) GTEST_SKIP() << "python3-torch is not installed";
  const PythonFiles& files = python_files();
  ASSERT_EQ(files.tensors.size(), 17u);
  for (const char* file : {"zip.pt", "legacy.pt", "protocol4.pt"})
    expect_tensors_as_python_wrote(files.directory / file, files.tensors);
}

TEST_F(TorchFileTest, ReadsAModulesStateDictWithItsMetadata) {
  if (!python_has_torch()) GTEST_SKIP() << "python3-torch is not installed";
  const auto run =
      testing::run_python_script(TRAINBENCH_TORCH_FILE_REFERENCE_SCRIPT, "model " + directory_.path().string());
  ASSERT_TRUE(testing::succeeded(run));
  expect_tensors_as_python_wrote(directory_ / "model.pt", nlohmann::json::parse(run.output));
}

TEST_F(TorchFileTest, UnwrapsAStateDictUnderModel) {
  const std::string pickle = state_dict_pickle({{"w", "0", 2, 0, {2}, {1}}});
  const std::string wrapped = "\x80\x02}(" + str("model") + pickle.substr(2, pickle.size() - 3) + "u.";
  const std::string path = directory_ / "wrapped.pt";
  data::testing::write_file(path, archive(wrapped, {{"0", floats({3, 4})}}));
  const std::vector<StoredTensor> tensors = read_torch_state_dict(path);
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].name, "w");
  EXPECT_EQ(tensors[0].bytes, floats({3, 4}));
}

// ---- non-finite values ----

TEST(TorchFileValues, FindsTheFirstNonFiniteElementOfEachFloatingType) {
  const auto tensor = [](TorchDtype dtype, const std::vector<uint64_t>& elements) {
    StoredTensor result{"t", dtype, {static_cast<int64_t>(elements.size())}, ""};
    for (const uint64_t element : elements) append_little_endian(result.bytes, element, element_size(dtype));
    return result;
  };
  EXPECT_EQ(first_non_finite(tensor(TorchDtype::kFloat32, {0x3f800000, 0x7f800000})), 1);   // 1, inf
  EXPECT_EQ(first_non_finite(tensor(TorchDtype::kFloat32, {0x3f800000, 0x7f7fffff})), -1);  // 1, max
  EXPECT_EQ(first_non_finite(tensor(TorchDtype::kFloat64, {0x7ff8000000000000})), 0);       // NaN
  EXPECT_EQ(first_non_finite(tensor(TorchDtype::kFloat16, {0x3c00, 0x7bff, 0xfc00})), 2);   // 1, max, -inf
  EXPECT_EQ(first_non_finite(tensor(TorchDtype::kBFloat16, {0x3f80, 0x7fc0})), 1);          // 1, NaN
  EXPECT_EQ(first_non_finite(tensor(TorchDtype::kInt32, {0x7f800000, 0xffffffff})), -1);    // integers
}

}  // namespace
}  // namespace trainbench
