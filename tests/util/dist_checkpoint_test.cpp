// Megatron's distributed checkpoint (util/dist_checkpoint.h) and its common.pt (util/plain_pickle.h): common.pt
// files written here load under python3-torch's torch.load as the same dict, torch.save's files and the GPT-3
// reference's own common.pt read here as python gives them, a checkpoint written shard by shard reads back in
// python3-zarr and rank slice by rank slice here; and what is refused (truncated or damaged zips, unknown or
// unsafe pickle opcodes, bad metadata.json), with nothing half-written.
#include "util/dist_checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/error_message.h"
#include "support/python_script.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench {
namespace {

using testing::error_message;
namespace fs = std::filesystem;

class DistCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = fs::temp_directory_path() /
                 ("trainbench_dist_checkpoint_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  std::string path(const std::string& name) const { return (directory_ / name).string(); }

  fs::path directory_;
};

// Importing torch takes seconds on 2 cores: ask once.
bool python_has_torch() {
  static const bool has_torch = testing::python_has("torch");
  return has_torch;
}

nlohmann::json run_reference(const std::string& command, const std::string& argument) {
  const auto run =
      testing::or_throw(testing::run_python_script(TRAINBENCH_ZARR_REFERENCE_SCRIPT, command + " " + argument));
  return nlohmann::json::parse(run.output);
}

// zarr_reference.py's tagged form back into a value (floats from float.hex(), which strtod reads).
PlainValue from_tagged(const nlohmann::json& tagged) {
  const std::string type = tagged.at(0);
  if (type == "None") return PlainValue();
  if (type == "bool") return PlainValue::boolean(tagged.at(1).get<bool>());
  if (type == "int") return PlainValue::integer(std::stoll(tagged.at(1).get<std::string>()));
  if (type == "float") return PlainValue::real(std::strtod(tagged.at(1).get<std::string>().c_str(), nullptr));
  if (type == "str") return PlainValue::string(tagged.at(1).get<std::string>());
  if (type == "dict") {
    std::vector<std::pair<PlainValue, PlainValue>> entries;
    for (const auto& entry : tagged.at(1)) entries.emplace_back(from_tagged(entry.at(0)), from_tagged(entry.at(1)));
    return PlainValue::dict(std::move(entries));
  }
  std::vector<PlainValue> items;
  for (const auto& item : tagged.at(1)) items.push_back(from_tagged(item));
  return type == "list" ? PlainValue::list(std::move(items)) : PlainValue::tuple(std::move(items));
}

// Megatron's common state as the reference's scripts/common_fp32.json has it, betas a tuple as in its common.pt.
PlainValue megatron_common() {
  PlainValue group = PlainValue::dict();
  group.set("wd_mult", PlainValue::real(1.0));
  group.set("lr_mult", PlainValue::real(1.0));
  group.set("lr", PlainValue::real(5.984178321979609e-05));
  group.set("bias_correction", PlainValue::boolean(true));
  group.set("betas", PlainValue::tuple({PlainValue::real(0.9), PlainValue::real(0.95)}));
  group.set("eps", PlainValue::real(1e-08));
  group.set("weight_decay", PlainValue::real(0.1));
  group.set("step", PlainValue::integer(4000));
  PlainValue optimizer = PlainValue::dict();
  optimizer.set("param_groups", PlainValue::list({group}));
  PlainValue common = PlainValue::dict();
  common.set("optimizer", optimizer);
  return common;
}

PlainValue every_plain_type() {
  PlainValue value = megatron_common();
  value.set("ints", PlainValue::list({PlainValue::integer(-1), PlainValue::integer(300), PlainValue::integer(70000),
                                      PlainValue::integer(-(int64_t{1} << 40)), PlainValue::integer(INT64_MIN)}));
  value.set("text", PlainValue::list({PlainValue::string(""), PlainValue::string("ünïcödé €"),
                                      PlainValue::string(std::string(300, 'x'))}));
  value.set("tuples", PlainValue::list({PlainValue::tuple(), PlainValue::tuple({PlainValue()}),
                                        PlainValue::tuple(std::vector<PlainValue>(5, PlainValue::boolean(false)))}));
  value.set("floats", PlainValue::list({PlainValue::real(-0.0), PlainValue::real(1e300), PlainValue::real(1e-310)}));
  value.entries().emplace_back(PlainValue::integer(7), PlainValue::string("int key"));
  value.entries().emplace_back(PlainValue::tuple({PlainValue::integer(1), PlainValue::string("a")}), PlainValue());
  return value;
}

TEST_F(DistCheckpointTest, CommonFileWrittenHereLoadsInTorch) {
  if (!python_has_torch()) GTEST_SKIP() << "python3-torch is not installed";
  const PlainValue value = every_plain_type();
  save_torch_plain(path("common.pt"), value);
  EXPECT_EQ(from_tagged(run_reference("torch_load", path("common.pt"))), value);
  EXPECT_EQ(load_torch_plain(path("common.pt")), value);
}

TEST_F(DistCheckpointTest, ReadsWhatTorchSaveWrites) {
  if (!python_has_torch()) GTEST_SKIP() << "python3-torch is not installed";
  const PlainValue expected = from_tagged(run_reference("torch_save", path("saved.pt")));
  const PlainValue read = load_torch_plain(path("saved.pt"));
  EXPECT_EQ(read, expected);
  EXPECT_EQ(read.at("shared_twice").items().at(1), read.at("shared_twice").items().at(0));  // through the memo
  EXPECT_EQ(read.at("ints").items().back().as_int(), INT64_MAX);
}

TEST_F(DistCheckpointTest, ReadsTheReferencesCommonFileAsPythonDoes) {
  const std::string reference = TRAINBENCH_GPT3_REFERENCE_DIR "/checksums/additional_checkpoint_files";
  if (!fs::exists(reference)) GTEST_SKIP() << reference << " is missing (shared/reference not mounted)";
  const PlainValue common = dist_checkpoint::read_common(reference);
  EXPECT_EQ(common, megatron_common());  // scripts/common_fp32.json's values, with the tuple the file holds
  const PlainValue& group = common.at("optimizer").at("param_groups").items().at(0);
  EXPECT_EQ(group.at("step").as_int(), 4000);
  EXPECT_EQ(group.at("betas").kind(), PlainValue::Kind::kTuple);
  EXPECT_EQ(dist_checkpoint::read_config(reference).sharded_backend, "zarr");
  if (python_has_torch()) {
    EXPECT_EQ(from_tagged(run_reference("torch_load", reference + "/common.pt")), common);
  }
}

// A [4 layers, 6, 8] parameter at pipeline 2 x tensor 2 (split along axis 1), each of the 4 shards written by
// its own "rank" as Megatron's save does, then metadata.json last.
TEST_F(DistCheckpointTest, ShardedCheckpointReadsBackPerRankAndInPythonZarr) {
  const std::string checkpoint = path("ckpt");
  const std::string key = "language_model.encoder.layers.self_attention.query_key_value.weight";
  dist_checkpoint::prepare_new_checkpoint(checkpoint);
  dist_checkpoint::write_common(checkpoint, megatron_common());
  const zarr::ArrayMetadata metadata =
      dist_checkpoint::megatron_array_metadata({4, 6, 8}, {2, 2, 1}, zarr::DataType::kFloat32);
  EXPECT_EQ(metadata.chunks, (std::vector<int64_t>{2, 3, 8}));
  dist_checkpoint::create_array(checkpoint, key, metadata);
  dist_checkpoint::create_array(checkpoint, dist_checkpoint::exp_avg_key(key), metadata);
  std::vector<float> full(4 * 6 * 8);
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i) / 4;
  for (int stage = 0; stage < 2; ++stage) {
    for (int rank = 0; rank < 2; ++rank) {
      const zarr::Region shard{{2 * stage, 3 * rank, 0}, {2, 3, 8}};
      std::vector<float> local;
      for (int layer = 0; layer < 2; ++layer)
        for (int row = 0; row < 3; ++row)
          for (int column = 0; column < 8; ++column)
            local.push_back(full[((2 * stage + layer) * 6 + 3 * rank + row) * 8 + column]);
      dist_checkpoint::open_array(checkpoint, key).write_float32(shard, local.data());
      dist_checkpoint::open_array(checkpoint, dist_checkpoint::exp_avg_key(key)).write_float32(shard, local.data());
    }
  }
  EXPECT_FALSE(dist_checkpoint::is_distributed_checkpoint(checkpoint));
  dist_checkpoint::write_config(checkpoint);
  EXPECT_TRUE(dist_checkpoint::is_distributed_checkpoint(checkpoint));
  EXPECT_EQ(dist_checkpoint::read_config(checkpoint).common_backend, "torch");
  EXPECT_EQ(dist_checkpoint::array_keys(checkpoint), (std::vector<std::string>{key, "optimizer.state.exp_avg." + key}));
  EXPECT_EQ(dist_checkpoint::read_common(checkpoint), megatron_common());
  // Stage 1, tensor rank 0: layers 2-3, rows 0-2.
  const std::vector<float> slice = dist_checkpoint::open_array(checkpoint, key).read_float32({{2, 0, 0}, {2, 3, 8}});
  EXPECT_EQ(slice.front(), full[2 * 6 * 8]);
  EXPECT_EQ(slice.back(), full[(3 * 6 + 2) * 8 + 7]);
  if (!testing::python_has("zarr")) GTEST_SKIP() << "python3-zarr is not installed";
  const nlohmann::json read = run_reference("read", checkpoint);
  EXPECT_EQ(read.at(key).at("values").get<std::vector<float>>(), full);
}

// ---- refusals ----

TEST_F(DistCheckpointTest, RefusesTruncatedAndDamagedZips) {
  save_torch_plain(path("common.pt"), megatron_common());
  const std::string bytes = read_file(path("common.pt"));
  write_file_atomically(path("truncated.pt"), bytes.substr(0, bytes.size() - 30));
  std::string error = error_message([&] { load_torch_plain(path("truncated.pt")); });
  EXPECT_NE(error.find("truncated.pt: not a zip archive: no end-of-central-directory record"), std::string::npos)
      << error;
  write_file_atomically(path("short.pt"), bytes.substr(0, 100));
  error = error_message([&] { load_torch_plain(path("short.pt")); });
  EXPECT_NE(error.find("short.pt"), std::string::npos) << error;
  std::string damaged = bytes;
  damaged[damaged.find("optimizer")] = 'O';
  write_file_atomically(path("damaged.pt"), damaged);
  error = error_message([&] { load_torch_plain(path("damaged.pt")); });
  EXPECT_NE(error.find("zip entry common/data.pkl: fails its CRC-32 check"), std::string::npos) << error;
}

std::string pickle_bytes(const std::string& body) { return std::string("\x80\x02", 2) + body; }

TEST_F(DistCheckpointTest, RefusesUnknownAndUnsafePickleOpcodesByName) {
  EXPECT_NE(error_message([] { unpickle_plain(pickle_bytes("\xff."), "p"); }).find("unknown pickle opcode 0xff"),
            std::string::npos);
  const std::string global = pickle_bytes("cos\nsystem\n(S'true'\ntR.");
  EXPECT_NE(error_message([&] { unpickle_plain(global, "p"); }).find("p: pickle offset 2: opcode GLOBAL (0x63)"),
            std::string::npos);
  EXPECT_NE(error_message([] { unpickle_plain(pickle_bytes("C\x01x."), "p"); }).find("opcode SHORT_BINBYTES"),
            std::string::npos);
  EXPECT_NE(error_message([] { unpickle_plain(pickle_bytes("Q."), "p"); }).find("opcode BINPERSID"), std::string::npos);
  EXPECT_NE(error_message([] { unpickle_plain(pickle_bytes("X\x10\0\0\0ab."), "p"); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              unpickle_plain(pickle_bytes("\x8a\x09" + std::string(9, '\1') + "."), "p");
            }).find("wider than 64 bits"),
            std::string::npos);
  // A list that holds itself, through the memo, and a list nested 100 deep.
  const std::string self = error_message([] { unpickle_plain(pickle_bytes(std::string("]q\0h\0a.", 7)), "p"); });
  EXPECT_NE(self.find("nested deeper than 64"), std::string::npos) << self;
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "]";
  for (int i = 0; i < 99; ++i) deep += "a";
  EXPECT_NE(error_message([&] { unpickle_plain(pickle_bytes(deep + "."), "p"); }).find("nested deeper than 64"),
            std::string::npos);
  EXPECT_EQ(unpickle_plain(pickle_bytes("}(K\x01K\x02K\x01K\x03u."), "p"),  // a key set twice keeps the last value
            PlainValue::dict({{PlainValue::integer(1), PlainValue::integer(3)}}));
}

TEST_F(DistCheckpointTest, RefusedValuesLeaveNoFile) {
  PlainValue bad = megatron_common();
  bad.set("text", PlainValue::string("\xff\xfe"));
  EXPECT_NE(error_message([&] { save_torch_plain(path("common.pt"), bad); }).find("not UTF-8"), std::string::npos);
  EXPECT_FALSE(fs::exists(path("common.pt")));
  EXPECT_FALSE(fs::exists(path("common.pt.partial")));
  PlainValue list_key = PlainValue::dict({{PlainValue::list(), PlainValue()}});
  EXPECT_NE(error_message([&] { save_torch_plain(path("common.pt"), list_key); }).find("cannot hash"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              dist_checkpoint::write_common(directory_.string(), PlainValue::list());
            }).find("must be a dict"),
            std::string::npos);
  EXPECT_TRUE(fs::is_empty(directory_));
}

TEST_F(DistCheckpointTest, RefusesBadMetadataAndKeys) {
  const std::string checkpoint = directory_.string();
  EXPECT_NE(error_message([&] { dist_checkpoint::read_config(checkpoint); }).find("metadata.json: missing"),
            std::string::npos);
  write_file_atomically(path("metadata.json"), R"({"sharded_backend": "torch_dist"})");
  EXPECT_NE(error_message([&] { dist_checkpoint::read_config(checkpoint); }).find("sharded backend \"torch_dist\""),
            std::string::npos);
  write_file_atomically(path("metadata.json"), R"({"sharded_backend": "zarr", "extra": 1})");
  EXPECT_NE(error_message([&] { dist_checkpoint::read_config(checkpoint); }).find("unknown field \"extra\""),
            std::string::npos);
  write_file_atomically(path("metadata.json"), R"({"sharded_backend": "zarr", "sharded_backend_version": "1"})");
  EXPECT_NE(error_message([&] { dist_checkpoint::read_config(checkpoint); }).find("field \"sharded_backend_version\""),
            std::string::npos);
  for (const std::string key : {"", "..", ".zarray", "a/b"})
    EXPECT_NE(error_message([&] { dist_checkpoint::array_directory(checkpoint, key); }).find("not a single directory"),
              std::string::npos)
        << key;
  EXPECT_NE(error_message([&] { dist_checkpoint::prepare_new_checkpoint(checkpoint); }).find("not empty"),
            std::string::npos);
  EXPECT_NE(error_message([&] { dist_checkpoint::open_array(checkpoint, "missing.weight"); }).find("has no array"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              dist_checkpoint::megatron_array_metadata({6}, {4}, zarr::DataType::kFloat32);
            }).find("not divisible"),
            std::string::npos);
}

}  // namespace
}  // namespace trainbench
