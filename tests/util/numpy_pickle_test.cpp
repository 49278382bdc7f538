// The numpy pickle reader (util/numpy_pickle.h) on pickles that numpy_pickle_reference.py writes with Python 3
// (protocols 2 to 4) and on a Python 2 pickle written here byte for byte, which the reference's own loading
// (pickle.load(f, encoding="latin1"), utils/c2_model_loading.py) reads the same; and what it refuses.
#include "util/numpy_pickle.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/test_files.h"
#include "support/error_message.h"
#include "support/python_script.h"
#include "util/error.h"

namespace trainbench {
namespace {

using testing::error_message;

// A string of the literal's bytes, NULs included.
template <size_t N>
std::string raw(const char (&text)[N]) {
  return std::string(text, N - 1);
}

bool python_has_numpy() { return testing::python_has("numpy"); }

// stdout of `numpy_pickle_reference.py <arguments>`; fails and stops the test when the script fails.
std::string run_reference(const std::string& arguments) {
  return testing::or_throw(testing::run_python_script(TRAINBENCH_NUMPY_PICKLE_REFERENCE_SCRIPT, arguments)).output;
}

// The script's values: (k % 17 - 8) / 8 + index for the k-th element of the index-th array.
std::vector<float> expected_values(int64_t count, int index) {
  std::vector<float> values;
  for (int64_t k = 0; k < count; ++k) values.push_back(static_cast<float>((k % 17 - 8) * 0.125 + index));
  return values;
}

// The script's "arrays" case: its names (sorted) and shapes, then the float64 "double" (2, 3).
const std::vector<std::pair<std::string, std::vector<int64_t>>> kArrays = {
    {"conv1_w", {4, 3, 7, 7}}, {"empty", {0, 3}},        {"fc1000_b", {10}}, {"res2_0_branch1_w", {8, 4, 1, 1}},
    {"res_conv1_bn_b", {4}},   {"res_conv1_bn_s", {4}}, {"scalar", {}},     {"double", {2, 3}}};

void expect_script_arrays(const std::map<std::string, PickledArray>& arrays) {
  ASSERT_EQ(arrays.size(), kArrays.size());
  for (size_t i = 0; i < kArrays.size(); ++i) {
    const auto& [name, shape] = kArrays[i];
    SCOPED_TRACE(name);
    ASSERT_EQ(arrays.count(name), 1u);
    const PickledArray& array = arrays.at(name);
    EXPECT_EQ(array.shape, shape);
    EXPECT_EQ(array.values, expected_values(array.element_count(), static_cast<int>(i)));
  }
}

// A dict of float32 arrays as Python 2's cPickle writes it with protocol 2, as Detectron's R-50.pkl was written:
// str keys and raw data as SHORT_BINSTRING / BINSTRING, the numpy globals written once and recalled from the memo,
// the dtype's state with BININT -1, shapes as BININT (a dimension past 2^31 as a Python 2 long, LONG1), the items
// in SETITEMS.
class Python2Pickle {
 public:
  void add(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values) {
    const auto* bytes = reinterpret_cast<const char*>(values.data());
    add_raw(name, shape, std::string(bytes, bytes + values.size() * sizeof(float)));
  }
  // `data` as the array's raw bytes, whatever its shape says.
  void add_raw(const std::string& name, const std::vector<int64_t>& shape, const std::string& data) {
    short_binstring(name);
    global("numpy.core.multiarray\n_reconstruct\n", reconstruct_memo_);
    global("numpy\nndarray\n", ndarray_memo_);
    items_ += raw("K\x00\x85");
    short_binstring("b");
    items_ += "\x87R";
    put();
    items_ += "(K\x01(";
    for (const int64_t dim : shape) {
      const bool long_int = dim >= (int64_t{1} << 31);
      items_ += long_int ? raw("\x8a\x08") : "J";  // LONG1 of 8 bytes or BININT
      for (int byte = 0; byte < (long_int ? 8 : 4); ++byte) items_.push_back(static_cast<char>((uint64_t(dim) >> (8 * byte)) & 0xff));
    }
    items_ += "t";
    global("numpy\ndtype\n", dtype_memo_);
    short_binstring("f4");
    items_ += raw("K\x00K\x01\x87R");
    put();
    items_ += "(K\x03";
    short_binstring("<");
    items_ += raw("NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89T");
    for (int byte = 0; byte < 4; ++byte) items_.push_back(static_cast<char>((data.size() >> (8 * byte)) & 0xff));
    items_ += data + "tb";
  }
  std::string bytes() const { return raw("\x80\x02}q\x00(") + items_ + "u."; }

 private:
  void short_binstring(const std::string& text) {
    items_ += "U";
    items_.push_back(static_cast<char>(text.size()));
    items_ += text;
    put();
  }
  void put() {
    items_ += "q";
    items_.push_back(static_cast<char>(++memo_));
  }
  void global(const std::string& name, int& memo) {
    if (memo) {
      items_ += "h";
      items_.push_back(static_cast<char>(memo));
      return;
    }
    items_ += "c" + name;
    put();
    memo = memo_;
  }

  std::string items_;
  int memo_ = 0, reconstruct_memo_ = 0, ndarray_memo_ = 0, dtype_memo_ = 0;
};

class NumpyPickle : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string python_pickle(const std::string& name, int protocol, const std::string& which) const {
    const std::string path = dir_ / name;
    run_reference("write " + path + " " + std::to_string(protocol) + " " + which);
    return path;
  }
  // The error for the pickle at `path`, which must name the file first.
  static std::string refusal(const std::string& path) {
    const std::string message = error_message([&] { read_pickled_arrays(path); });
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    return message;
  }

  const data::testing::TempDir dir_;
};

TEST_F(NumpyPickle, ReadsPython3PicklesOfProtocols2To4Exactly) {
  if (!python_has_numpy()) GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  for (int protocol : {2, 3, 4})
    for (const char* which : {"arrays", "blobs", "ordered"}) {
      SCOPED_TRACE(std::string(which) + " protocol " + std::to_string(protocol));
      expect_script_arrays(read_pickled_arrays(python_pickle("p.pkl", protocol, which)));
    }
}

TEST_F(NumpyPickle, ReadsAPython2PickleAsTheReferenceLoadsIt) {
  Python2Pickle pickle;
  pickle.add("res_conv1_bn_s", {4}, expected_values(4, 0));
  pickle.add("conv1_w", {4, 3, 7, 7}, expected_values(588, 1));
  pickle.add("res2_0_branch1_w", {8, 4, 1, 1}, expected_values(32, 2));
  pickle.add("empty", {0, 5}, {});
  const std::string path = write("py2.pkl", pickle.bytes());
  const auto arrays = read_pickled_arrays(path);
  ASSERT_EQ(arrays.size(), 4u);
  EXPECT_EQ(arrays.at("res_conv1_bn_s").shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(arrays.at("res_conv1_bn_s").values, expected_values(4, 0));
  EXPECT_EQ(arrays.at("conv1_w").shape, (std::vector<int64_t>{4, 3, 7, 7}));
  EXPECT_EQ(arrays.at("conv1_w").values, expected_values(588, 1));
  EXPECT_EQ(arrays.at("res2_0_branch1_w").values, expected_values(32, 2));
  EXPECT_EQ(arrays.at("empty").shape, (std::vector<int64_t>{0, 5}));
  if (!python_has_numpy()) GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  const auto loaded = nlohmann::json::parse(run_reference("read " + path));
  ASSERT_EQ(loaded.size(), arrays.size());
  for (const auto& [name, array] : arrays) {
    EXPECT_EQ(loaded.at(name)[0].get<std::vector<int64_t>>(), array.shape) << name;
    EXPECT_EQ(loaded.at(name)[1].get<std::vector<float>>(), array.values) << name;
  }
}

TEST_F(NumpyPickle, RefusesOtherGlobalsAndMalformedArraysByName) {
  // pickle.dumps({"a": os.system("ls")}) would call os.system on loading.
  const std::string system = write("system.pkl", raw("\x80\x02}q\x00X\x01\x00\x00\x00" "acos\nsystem\nq\x01X\x02\x00\x00\x00lsq\x02\x85R."));
  EXPECT_NE(refusal(system).find("the global os.system is not one that rebuilds a numpy array"), std::string::npos);

  // Shapes of 2^60 and 2^80 elements over 8 bytes of data: refused before anything is allocated.
  Python2Pickle huge, overflowing;
  huge.add_raw("conv1_w", {int64_t{1} << 40, int64_t{1} << 20}, std::string(8, '\0'));
  EXPECT_NE(refusal(write("huge.pkl", huge.bytes())).find("8 data bytes, which its shape and dtype 'f4' do not fill"),
            std::string::npos);
  overflowing.add_raw("conv1_w", {0, int64_t{1} << 40, int64_t{1} << 40}, "");
  EXPECT_NE(refusal(write("overflowing.pkl", overflowing.bytes())).find("shape of more than 2^63 elements"),
            std::string::npos);
  Python2Pickle short_data;
  short_data.add_raw("conv1_w", {3}, std::string(8, '\0'));
  EXPECT_NE(refusal(write("short.pkl", short_data.bytes())).find("8 data bytes, which its shape and dtype 'f4' do not fill"),
            std::string::npos);
  // A BINSTRING that claims 2 GB in a file of a few bytes.
  const std::string claim = write("claim.pkl", raw("\x80\x02T\xff\xff\xff\x7f" "abc"));
  EXPECT_NE(refusal(claim).find("truncated pickle: the opcode at byte 2 needs 2147483647 more bytes, the file has 3"),
            std::string::npos);
  EXPECT_NE(refusal(write("list.pkl", raw("\x80\x02]q\x00."))).find("holds a pickled list, not a dict of arrays"), std::string::npos);
  EXPECT_NE(refusal(write("text.pkl", "(dp0\nS'a'\np1\n.")).find("opcode 0x70 is not one this reader runs"), std::string::npos);
  EXPECT_EQ(error_message([&] { read_pickled_arrays(dir_ / "missing.pkl"); }), (dir_ / "missing.pkl") + ": cannot open the pickle");

  if (!python_has_numpy()) GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  EXPECT_NE(refusal(python_pickle("int64.pkl", 2, "int64")).find("numpy dtype 'i8' (expected float32 'f4' or float64 'f8')"),
            std::string::npos);
  EXPECT_NE(refusal(python_pickle("fortran.pkl", 4, "fortran")).find("a numpy array in Fortran order (expected C order)"),
            std::string::npos);
  EXPECT_NE(refusal(python_pickle("big.pkl", 3, "big_endian")).find("byte order '>' (expected little-endian '<')"),
            std::string::npos);
  const std::string whole = python_pickle("whole.pkl", 2, "arrays");
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut : {bytes.size() / 2, bytes.size() - 1})
    EXPECT_NE(refusal(write("cut.pkl", bytes.substr(0, cut))).find("truncated pickle"), std::string::npos) << cut;
}

}  // namespace
}  // namespace trainbench
