#include "workloads/minigo/model_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::minigo {

namespace {

namespace pb = google::protobuf;
using Wire = pb::internal::WireFormatLite;

// The `.minigo` header (cc/model/loader.cc's ModelHeader), little-endian.
constexpr char kMagic[] = "<minigo>";
constexpr size_t kHeaderBytes = 32;

// TensorFlow's DataType values (types.proto) that a MiniGo graph holds.
constexpr int kDtFloat = 1, kDtInt32 = 3, kDtBool = 10;

// A GraphDef read as far as a MiniGo network needs it: the field numbers are TensorFlow's (graph.proto,
// node_def.proto, attr_value.proto, tensor.proto, tensor_shape.proto). Debian has protobuf's runtime but not
// TensorFlow's schemas, so the messages are walked field by field on protobuf's own wire decoder.
struct TfAttr {
  std::string text;             // s
  float real = 0;               // f
  int type = 0;                 // type (a DataType)
  std::vector<int64_t> shape;   // shape; -1 for an unknown dimension
  torch::Tensor tensor;         // tensor (float constants only)
};

struct TfNode {
  std::string name, op;
  std::vector<std::string> inputs;
  std::map<std::string, TfAttr> attrs;
};

struct GraphError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Calls on_field(field, wire type, stream) for each field of `bytes`; on_field reads the value it knows and
// returns true, or returns false to have it skipped.
template <typename OnField>
void for_each_field(const std::string& bytes, const char* message, OnField&& on_field) {
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    if (!on_field(Wire::GetTagFieldNumber(tag), Wire::GetTagWireType(tag), in) && !Wire::SkipField(&in, tag))
      throw GraphError(std::string("a ") + message + " field is cut short");
  }
  if (in.CurrentPosition() != static_cast<int>(bytes.size()))
    throw GraphError(std::string("a ") + message + " is not valid protobuf wire format");
}

std::string read_bytes(pb::io::CodedInputStream& in, const char* message) {
  uint32_t length = 0;
  std::string value;
  if (!in.ReadVarint32(&length) || !in.ReadString(&value, static_cast<int>(length)))
    throw GraphError(std::string("a ") + message + " string is cut short");
  return value;
}

uint64_t read_varint(pb::io::CodedInputStream& in) {
  uint64_t value = 0;
  if (!in.ReadVarint64(&value)) throw GraphError("a varint is cut short");
  return value;
}

float read_float(pb::io::CodedInputStream& in) {
  uint32_t bits = 0;
  if (!in.ReadLittleEndian32(&bits)) throw GraphError("a float is cut short");
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

std::vector<int64_t> parse_shape(const std::string& bytes) {
  std::vector<int64_t> dims;
  for_each_field(bytes, "TensorShapeProto", [&](int field, Wire::WireType wire, pb::io::CodedInputStream& in) {
    if (field != 2 || wire != Wire::WIRETYPE_LENGTH_DELIMITED) return false;
    int64_t size = 0;
    for_each_field(read_bytes(in, "Dim"), "Dim", [&](int dim_field, Wire::WireType dim_wire, pb::io::CodedInputStream& dim_in) {
      if (dim_field != 1 || dim_wire != Wire::WIRETYPE_VARINT) return false;
      size = static_cast<int64_t>(read_varint(dim_in));
      return true;
    });
    dims.push_back(size);
    return true;
  });
  return dims;
}

// A float TensorProto as a tensor: its tensor_content, or its float_val (TensorFlow stores a constant whose
// values are all equal as the one value, broadcast to the shape). Other dtypes stay undefined.
torch::Tensor parse_tensor(const std::string& bytes) {
  int dtype = 0;
  std::vector<int64_t> shape;
  std::string content;
  std::vector<float> values;
  for_each_field(bytes, "TensorProto", [&](int field, Wire::WireType wire, pb::io::CodedInputStream& in) {
    if (field == 1 && wire == Wire::WIRETYPE_VARINT) {
      dtype = static_cast<int>(read_varint(in));
    } else if (field == 2 && wire == Wire::WIRETYPE_LENGTH_DELIMITED) {
      shape = parse_shape(read_bytes(in, "tensor_shape"));
    } else if (field == 4 && wire == Wire::WIRETYPE_LENGTH_DELIMITED) {
      content = read_bytes(in, "tensor_content");
    } else if (field == 5 && wire == Wire::WIRETYPE_FIXED32) {
      values.push_back(read_float(in));
    } else if (field == 5 && wire == Wire::WIRETYPE_LENGTH_DELIMITED) {  // packed
      const std::string packed = read_bytes(in, "float_val");
      if (packed.size() % 4) throw GraphError("a packed float_val is not a whole number of floats");
      for (size_t i = 0; i < packed.size(); i += 4) {
        float value;
        std::memcpy(&value, packed.data() + i, sizeof value);
        values.push_back(value);
      }
    } else {
      return false;
    }
    return true;
  });
  if (dtype != kDtFloat) return {};
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;
  if (!content.empty()) {
    if (content.size() != static_cast<size_t>(count) * sizeof(float))
      throw GraphError("a float constant's tensor_content holds " + std::to_string(content.size()) + " bytes, not " +
                       std::to_string(count) + " floats");
    return torch::from_blob(content.data(), shape, torch::kFloat32).clone();
  }
  if (values.size() == 1) return torch::full(shape, values[0]);
  if (values.size() != static_cast<size_t>(count))
    throw GraphError("a float constant has " + std::to_string(values.size()) + " values for " + std::to_string(count) + " elements");
  return torch::tensor(values).view(shape);
}

TfAttr parse_attr(const std::string& bytes) {
  TfAttr attr;
  for_each_field(bytes, "AttrValue", [&](int field, Wire::WireType wire, pb::io::CodedInputStream& in) {
    if (field == 2 && wire == Wire::WIRETYPE_LENGTH_DELIMITED) attr.text = read_bytes(in, "s");
    else if (field == 4 && wire == Wire::WIRETYPE_FIXED32) attr.real = read_float(in);
    else if (field == 6 && wire == Wire::WIRETYPE_VARINT) attr.type = static_cast<int>(read_varint(in));
    else if (field == 7 && wire == Wire::WIRETYPE_LENGTH_DELIMITED) attr.shape = parse_shape(read_bytes(in, "shape"));
    else if (field == 8 && wire == Wire::WIRETYPE_LENGTH_DELIMITED) attr.tensor = parse_tensor(read_bytes(in, "tensor"));
    else return false;
    return true;
  });
  return attr;
}

std::map<std::string, TfNode> parse_graph(const std::string& bytes) {
  std::map<std::string, TfNode> nodes;
  for_each_field(bytes, "GraphDef", [&](int field, Wire::WireType wire, pb::io::CodedInputStream& in) {
    if (field != 1 || wire != Wire::WIRETYPE_LENGTH_DELIMITED) return false;
    std::string name;
    TfNode node;
    for_each_field(read_bytes(in, "NodeDef"), "NodeDef", [&](int node_field, Wire::WireType node_wire, pb::io::CodedInputStream& node_in) {
      if (node_wire != Wire::WIRETYPE_LENGTH_DELIMITED) return false;
      if (node_field == 1) {
        name = read_bytes(node_in, "name");
      } else if (node_field == 2) {
        node.op = read_bytes(node_in, "op");
      } else if (node_field == 3) {
        node.inputs.push_back(read_bytes(node_in, "input"));
      } else if (node_field == 5) {  // map<string, AttrValue> entry
        std::string key, value;
        for_each_field(read_bytes(node_in, "attr"), "attr entry", [&](int entry_field, Wire::WireType, pb::io::CodedInputStream& entry_in) {
          if (entry_field == 1) key = read_bytes(entry_in, "attr key");
          else if (entry_field == 2) value = read_bytes(entry_in, "attr value");
          else return false;
          return true;
        });
        node.attrs[key] = parse_attr(value);
      } else {
        return false;
      }
      return true;
    });
    if (name.empty()) throw GraphError("a node has no name");
    node.name = name;
    nodes[name] = std::move(node);
    return true;
  });
  return nodes;
}

// The layers of dual_net.py's network found in a graph, walking back from its outputs.
class GraphWalk {
 public:
  explicit GraphWalk(std::map<std::string, TfNode> nodes) : nodes_(std::move(nodes)) {}

  struct ConvBatchNorm {
    torch::Tensor kernel;  // as the graph holds it: HWIO
    torch::Tensor gamma, beta, mean, variance;  // a BN without scale and offset holds ones and zeros
    float epsilon = 0;
    bool channels_first = false;
  };
  struct Dense {
    torch::Tensor kernel, bias;  // kernel (in, out)
  };

  // The node `name` refers to, past Identity nodes (the `/read` of each frozen variable).
  const TfNode& node(std::string name) const {
    if (!name.empty() && name[0] == '^') name.erase(0, 1);
    if (const auto colon = name.find(':'); colon != std::string::npos) name.erase(colon);
    const auto found = nodes_.find(name);
    if (found == nodes_.end()) throw GraphError("node " + name + " is referred to but not in the graph");
    if (found->second.op == "Identity" && !found->second.inputs.empty()) return node(found->second.inputs[0]);
    return found->second;
  }

  // Input `index` of `of`, which must be one of `ops`.
  const TfNode& input(const TfNode& of, size_t index, std::initializer_list<const char*> ops) const {
    if (of.inputs.size() <= index) throw GraphError(of.name + " (" + of.op + ") has no input " + std::to_string(index));
    const TfNode& found = node(of.inputs[index]);
    for (const char* op : ops)
      if (found.op == op) return found;
    std::string expected;
    for (const char* op : ops) expected += std::string(expected.empty() ? "" : " or ") + op;
    throw GraphError(of.inputs[index] + " is a " + found.op + " where dual_net.py's network has " + expected +
                     " (only the reference architecture, without squeeze-excitation or swish, is read)");
  }

  torch::Tensor constant(const TfNode& of, size_t index) const {
    const TfNode& found = input(of, index, {"Const"});
    const auto value = found.attrs.find("value");
    if (value == found.attrs.end() || !value->second.tensor.defined()) throw GraphError(found.name + " is not a float constant");
    return value->second.tensor;
  }

  const TfNode& output(const std::string& name, const char* op) const {
    const TfNode& found = node(name);
    if (found.op != op) throw GraphError(name + " is a " + found.op + ", not the " + op + " dual_net.py ends with");
    return found;
  }

  // FusedBatchNorm(Conv2D(x, kernel), gamma, beta, mean, variance), inference mode; *source is x.
  ConvBatchNorm conv_batch_norm(const TfNode& norm, const std::string& name, const TfNode** source) const {
    if (norm.op.rfind("FusedBatchNorm", 0) != 0) throw GraphError(name + " is a " + norm.op + ", not a FusedBatchNorm");
    const auto epsilon = norm.attrs.find("epsilon");
    if (epsilon == norm.attrs.end() || !(epsilon->second.real > 0)) throw GraphError(name + " has no positive epsilon");
    const TfNode& conv = input(norm, 0, {"Conv2D"});
    ConvBatchNorm layer;
    layer.epsilon = epsilon->second.real;
    layer.kernel = constant(conv, 1);
    const auto format = conv.attrs.find("data_format");
    layer.channels_first = format != conv.attrs.end() && format->second.text == "NCHW";
    layer.gamma = constant(norm, 1);
    layer.beta = constant(norm, 2);
    layer.mean = constant(norm, 3);
    layer.variance = constant(norm, 4);
    *source = &node(conv.inputs.at(0));
    return layer;
  }

  // BiasAdd(MatMul(x, kernel), bias); *source is x.
  Dense dense(const TfNode& bias_add, const std::string& name, const TfNode** source) const {
    if (bias_add.op != "BiasAdd") throw GraphError(name + " is a " + bias_add.op + ", not a dense layer's BiasAdd");
    const TfNode& matmul = input(bias_add, 0, {"MatMul"});
    Dense layer{constant(matmul, 1), constant(bias_add, 1)};
    *source = &node(matmul.inputs.at(0));
    return layer;
  }

  const TfNode* by_name(const std::string& name) const {
    const auto found = nodes_.find(name);
    return found == nodes_.end() ? nullptr : &found->second;
  }

 private:
  std::map<std::string, TfNode> nodes_;
};

// The input of `relu`, which must be a Relu (`what` names the place for the error).
const TfNode& through_relu(const GraphWalk& graph, const TfNode& relu, const std::string& what) {
  if (relu.op != "Relu") throw GraphError(what + " is a " + relu.op + ", not the Relu dual_net.py has there");
  return graph.node(relu.inputs.at(0));
}

struct ReadNetwork {
  GraphWalk::ConvBatchNorm initial;
  std::vector<GraphWalk::ConvBatchNorm> trunk;  // two per residual block, in order
  GraphWalk::ConvBatchNorm policy_conv, value_conv;
  GraphWalk::Dense policy_dense, value_dense1, value_dense2;
  std::vector<int64_t> input_shape;  // pos_tensor's
};

ReadNetwork walk_network(const GraphWalk& graph) {
  ReadNetwork network;
  const TfNode* source = nullptr;
  // Policy: softmax(dense(reshape(relu(bn(conv(trunk)))))).
  const TfNode& policy_output = graph.output("policy_output", "Softmax");
  network.policy_dense = graph.dense(graph.node(policy_output.inputs.at(0)), "policy_output's input", &source);
  if (source->op != "Reshape") throw GraphError("the policy dense layer's input is a " + source->op + ", not a Reshape");
  const TfNode& policy_norm = through_relu(graph, graph.node(source->inputs.at(0)), "the policy head's activation");
  network.policy_conv = graph.conv_batch_norm(policy_norm, "the policy head's batch norm", &source);
  const TfNode* trunk_end = source;
  // Value: tanh(reshape(dense(relu(dense(reshape(relu(bn(conv(trunk)))))))).
  const TfNode& value_output = graph.output("value_output", "Tanh");
  const TfNode* value = &graph.node(value_output.inputs.at(0));
  if (value->op == "Reshape") value = &graph.node(value->inputs.at(0));
  network.value_dense2 = graph.dense(*value, "value_output's dense layer", &source);
  network.value_dense1 = graph.dense(through_relu(graph, *source, "the value head's hidden activation"), "the value head's hidden layer", &source);
  if (source->op != "Reshape") throw GraphError("the value head's hidden layer reads a " + source->op + ", not a Reshape");
  const TfNode& value_norm = through_relu(graph, graph.node(source->inputs.at(0)), "the value head's activation");
  network.value_conv = graph.conv_batch_norm(value_norm, "the value head's batch norm", &source);
  if (source != trunk_end) throw GraphError("the policy and value heads do not read the same trunk output");
  // Trunk, from its end back: relu(x + bn(conv(relu(bn(conv(x)))))) per block, then relu(bn(conv(input))).
  std::vector<GraphWalk::ConvBatchNorm> blocks_backwards;
  const TfNode* x = trunk_end;
  while (true) {
    const TfNode& inner = through_relu(graph, *x, "the trunk's activation");
    if (inner.op != "Add" && inner.op != "AddV2") {
      network.initial = graph.conv_batch_norm(inner, "the initial block's batch norm", &source);
      break;
    }
    const TfNode* skip = &graph.node(inner.inputs.at(0));
    const TfNode* residual = &graph.node(inner.inputs.at(1));
    if (skip->op.rfind("FusedBatchNorm", 0) == 0) std::swap(skip, residual);
    const TfNode* middle = nullptr;
    auto second = graph.conv_batch_norm(*residual, "a residual block's second batch norm", &middle);
    auto first = graph.conv_batch_norm(through_relu(graph, *middle, "a residual block's inner activation"),
                                       "a residual block's first batch norm", &source);
    if (source != skip) throw GraphError("a residual block's skip connection does not add the block's own input");
    blocks_backwards.push_back(std::move(second));
    blocks_backwards.push_back(std::move(first));
    x = skip;
  }
  network.trunk.assign(blocks_backwards.rbegin(), blocks_backwards.rend());
  // The input, past the bool features' Cast.
  const TfNode* input = source;
  if (input->op == "Cast") input = &graph.node(input->inputs.at(0));
  if (input->op != "Placeholder" || graph.by_name("pos_tensor") != input)
    throw GraphError("the first convolution does not read the pos_tensor Placeholder");
  network.input_shape = input->attrs.count("shape") ? input->attrs.at("shape").shape : std::vector<int64_t>{};
  return network;
}

// A conv's HWIO kernel as the OIHW weight LibTorch's conv takes.
torch::Tensor conv_weight(const torch::Tensor& kernel) { return kernel.permute({3, 2, 0, 1}).contiguous(); }

// A dense kernel (in, out) as a Linear weight (out, in). `head_channels` > 0: the dense layer reads a
// flattened channels-last head output (in = (h, w, c)), reordered to the channels-first flattening forward()
// uses (in = (c, h, w)).
torch::Tensor dense_weight(const torch::Tensor& kernel, int64_t size, int64_t head_channels) {
  torch::Tensor in_out = kernel;
  if (head_channels > 0) in_out = kernel.view({size, size, head_channels, -1}).permute({2, 0, 1, 3}).reshape({head_channels * size * size, -1});
  return in_out.t().contiguous();
}

uint64_t little_endian_u64(const std::string& bytes, size_t offset) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[offset + static_cast<size_t>(i)]);
  return value;
}

bool has_minigo_magic(const std::string& bytes) { return bytes.size() >= 8 && bytes.compare(0, 8, kMagic) == 0; }

}  // namespace

bool is_minigo_model_file(const std::string& path) {
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".pb") == 0) return true;
  std::ifstream in(path, std::ios::binary);
  std::string magic(8, '\0');
  return in.read(magic.data(), 8) && has_minigo_magic(magic);
}

MinigoModelFile read_minigo_model(const std::string& path) {
  const std::string bytes = read_file(path);
  MinigoModelFile file;
  file.metadata = nlohmann::json::object();
  std::string graph_bytes;
  if (has_minigo_magic(bytes)) {
    if (bytes.size() < kHeaderBytes) fail(path, "is cut short inside its <minigo> header");
    const uint64_t version = little_endian_u64(bytes, 8), file_size = little_endian_u64(bytes, 16);
    const uint64_t metadata_size = little_endian_u64(bytes, 24);
    if (version != 1) fail(path, "is a <minigo> file of version " + std::to_string(version) + "; version 1 is read");
    if (file_size != bytes.size())
      fail(path, "says it holds " + std::to_string(file_size) + " bytes but holds " + std::to_string(bytes.size()) + " (cut short?)");
    if (metadata_size > file_size - kHeaderBytes) fail(path, "has a metadata size past its end");
    try {
      file.metadata = nlohmann::json::parse(bytes.begin() + kHeaderBytes, bytes.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + metadata_size));
    } catch (const nlohmann::json::exception& error) {
      fail(path, std::string("its metadata is not JSON: ") + error.what());
    }
    if (!file.metadata.is_object()) fail(path, "its metadata is not a JSON object");
    if (file.metadata.value("engine", std::string("tf")) != "tf")
      fail(path, "metadata engine is " + file.metadata["engine"].dump() + "; only frozen TensorFlow graphs (\"tf\") are read");
    for (const char* key : {"use_SE", "use_SE_bias", "use_swish", "use_trt"})
      if (file.metadata.value(key, false)) fail(path, std::string("metadata ") + key + " is true; only the reference architecture is read");
    graph_bytes = bytes.substr(kHeaderBytes + metadata_size);
  } else {
    graph_bytes = bytes;
  }

  ReadNetwork network;
  try {
    network = walk_network(GraphWalk(parse_graph(graph_bytes)));
  } catch (const GraphError& error) {
    fail(path, std::string("is not a MiniGo frozen graph this reads: ") + error.what());
  } catch (const std::out_of_range&) {  // a node without the inputs its op has
    fail(path, "is not a MiniGo frozen graph this reads: a node lacks an input its op needs");
  }

  const int64_t filters = network.initial.kernel.size(3), planes = network.initial.kernel.size(2);
  const int64_t points = network.policy_dense.kernel.size(1) - 1;
  const auto size = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(points))));
  if (size * size != points) fail(path, "policy_output has " + std::to_string(points + 1) + " moves, not a square board's N*N + 1");
  if (file.metadata.contains("board_size") && file.metadata["board_size"] != size)
    fail(path, "metadata board_size " + file.metadata["board_size"].dump() + " disagrees with the policy's " + std::to_string(size));
  if (network.policy_conv.kernel.size(3) != 2 || network.value_conv.kernel.size(3) != 1)
    fail(path, "the heads' convolutions are not dual_net.py's 2 (policy) and 1 (value) filters wide");
  if (network.policy_dense.kernel.size(0) != 2 * points || network.value_dense1.kernel.size(0) != points ||
      network.value_dense2.kernel.size(0) != network.value_dense1.kernel.size(1) || network.value_dense2.kernel.size(1) != 1)
    fail(path, "the dense layers' sizes do not fit a " + std::to_string(size) + "x" + std::to_string(size) + " board's heads");
  const bool channels_first = network.initial.channels_first;
  const std::string layout = file.metadata.value("input_layout", std::string(channels_first ? "nchw" : "nhwc"));
  if (layout != (channels_first ? "nchw" : "nhwc"))
    fail(path, "metadata input_layout \"" + layout + "\" disagrees with the convolutions' data_format");
  file.input_features = file.metadata.value("input_features", std::string(planes == 17 ? "agz" : "mlperf07"));
  const int64_t expected_planes = file.input_features == "agz" ? 17 : file.input_features == "mlperf07" ? 13 : -1;
  if (expected_planes < 0) fail(path, "metadata input_features \"" + file.input_features + "\" is not agz or mlperf07");
  if (planes != expected_planes)
    fail(path, "the first convolution reads " + std::to_string(planes) + " planes; " + file.input_features + " features are " +
                   std::to_string(expected_planes));

  const float epsilon = network.initial.epsilon;
  const auto same_epsilon = [&](const GraphWalk::ConvBatchNorm& layer) { return layer.epsilon == epsilon; };
  if (!std::all_of(network.trunk.begin(), network.trunk.end(), same_epsilon) || !same_epsilon(network.policy_conv) ||
      !same_epsilon(network.value_conv))
    fail(path, "its batch norms do not share one epsilon, as dual_net.py's do");
  file.net = MinigoNet(MinigoNetOptions()
                           .batch_norm_epsilon(epsilon)
                           .board_size(size)
                           .filters(filters)
                           .trunk_blocks(static_cast<int64_t>(network.trunk.size() / 2))
                           .fc_width(network.value_dense1.kernel.size(1))
                           .input_planes(planes));
  std::map<std::string, torch::Tensor> values;
  const auto add_conv = [&](const std::string& name, const GraphWalk::ConvBatchNorm& layer) {
    values[name + "_conv.weight"] = conv_weight(layer.kernel);
    values[name + "_bn.running_mean"] = layer.mean;
    values[name + "_bn.running_var"] = layer.variance;
    const bool affine = name != "policy" && name != "value";
    if (affine) {
      values[name + "_bn.weight"] = layer.gamma;
      values[name + "_bn.bias"] = layer.beta;
    } else if (!torch::equal(layer.gamma, torch::ones_like(layer.gamma)) || !torch::equal(layer.beta, torch::zeros_like(layer.beta))) {
      fail(path, "the " + name + " head's batch norm scales or shifts; dual_net.py's has neither");
    }
  };
  add_conv("initial", network.initial);
  for (size_t i = 0; i < network.trunk.size(); ++i)
    add_conv("block" + std::to_string(i / 2 + 1) + "_" + std::to_string(i % 2 + 1), network.trunk[i]);
  add_conv("policy", network.policy_conv);
  add_conv("value", network.value_conv);
  const int64_t head_order = channels_first ? 0 : 1;  // channels-last heads flatten as (h, w, c)
  values["policy_fc.weight"] = dense_weight(network.policy_dense.kernel, size, head_order * 2);
  values["policy_fc.bias"] = network.policy_dense.bias;
  values["value_fc1.weight"] = dense_weight(network.value_dense1.kernel, size, head_order * 1);
  values["value_fc1.bias"] = network.value_dense1.bias;
  values["value_fc2.weight"] = dense_weight(network.value_dense2.kernel, size, 0);
  values["value_fc2.bias"] = network.value_dense2.bias;

  torch::NoGradGuard no_grad;
  const auto assign = [&](const std::string& name, torch::Tensor& target) {
    const auto found = values.find(name);
    if (found == values.end()) fail(path, "has no tensor for " + name);
    if (found->second.sizes() != target.sizes())
      fail(path, name + " is " + c10::str(found->second.sizes()) + " in the file but " + c10::str(target.sizes()) + " in the network");
    target.copy_(found->second.view_as(target));
  };
  for (auto& item : file.net->named_parameters()) assign(item.key(), item.value());
  for (auto& item : file.net->named_buffers())
    if (item.key().find("num_batches_tracked") == std::string::npos) assign(item.key(), item.value());
  file.net->eval();
  return file;
}

namespace {

// Protobuf's encoder over a string, for the GraphDef the writer builds bottom-up (a message's bytes are
// written before the field that holds them, which needs their length).
class MessageBytes {
 public:
  MessageBytes& varint(int field, uint64_t value) {
    stream().WriteTag(Wire::MakeTag(field, Wire::WIRETYPE_VARINT));
    stream().WriteVarint64(value);
    return *this;
  }
  MessageBytes& bytes(int field, const std::string& value) {
    stream().WriteTag(Wire::MakeTag(field, Wire::WIRETYPE_LENGTH_DELIMITED));
    stream().WriteVarint32(static_cast<uint32_t>(value.size()));
    stream().WriteString(value);
    return *this;
  }
  MessageBytes& real(int field, float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    stream().WriteTag(Wire::MakeTag(field, Wire::WIRETYPE_FIXED32));
    stream().WriteLittleEndian32(bits);
    return *this;
  }
  std::string str() {
    coded_.reset();
    output_.reset();
    return text_;
  }

 private:
  pb::io::CodedOutputStream& stream() {
    if (!coded_) {
      output_ = std::make_unique<pb::io::StringOutputStream>(&text_);
      coded_ = std::make_unique<pb::io::CodedOutputStream>(output_.get());
    }
    return *coded_;
  }
  std::string text_;
  std::unique_ptr<pb::io::StringOutputStream> output_;
  std::unique_ptr<pb::io::CodedOutputStream> coded_;
};

std::string shape_proto(const std::vector<int64_t>& dims) {
  MessageBytes shape;
  for (const int64_t dim : dims) shape.bytes(2, MessageBytes().varint(1, static_cast<uint64_t>(dim)).str());
  return shape.str();
}

class GraphBuilder {
 public:
  // attrs: name -> serialized AttrValue.
  using Attrs = std::vector<std::pair<std::string, std::string>>;

  const std::string& add(const std::string& name, const std::string& op, const std::vector<std::string>& inputs, const Attrs& attrs) {
    MessageBytes node;
    node.bytes(1, name).bytes(2, op);
    for (const auto& input : inputs) node.bytes(3, input);
    for (const auto& [key, value] : attrs) node.bytes(5, MessageBytes().bytes(1, key).bytes(2, value).str());
    graph_.bytes(1, node.str());
    names_.push_back(name);
    return names_.back();
  }

  std::string constant(const std::string& name, const torch::Tensor& value) {
    const torch::Tensor data = value.to(torch::kCPU, torch::kFloat32).contiguous();
    const std::string content(static_cast<const char*>(data.data_ptr()), static_cast<size_t>(data.numel()) * sizeof(float));
    const std::string tensor =
        MessageBytes().varint(1, kDtFloat).bytes(2, shape_proto(data.sizes().vec())).bytes(4, content).str();
    add(name, "Const", {}, {{"dtype", type_attr(kDtFloat)}, {"value", MessageBytes().bytes(8, tensor).str()}});
    return name;
  }

  std::string int_constant(const std::string& name, const std::vector<int32_t>& values) {
    std::string content(values.size() * sizeof(int32_t), '\0');
    std::memcpy(content.data(), values.data(), content.size());
    const std::string tensor = MessageBytes()
                                   .varint(1, kDtInt32)
                                   .bytes(2, shape_proto({static_cast<int64_t>(values.size())}))
                                   .bytes(4, content)
                                   .str();
    add(name, "Const", {}, {{"dtype", type_attr(kDtInt32)}, {"value", MessageBytes().bytes(8, tensor).str()}});
    return name;
  }

  static std::string type_attr(int type) { return MessageBytes().varint(6, static_cast<uint64_t>(type)).str(); }
  static std::string text_attr(const std::string& text) { return MessageBytes().bytes(2, text).str(); }
  static std::string bool_attr(bool value) { return MessageBytes().varint(5, value ? 1 : 0).str(); }
  static std::string float_attr(float value) { return MessageBytes().real(4, value).str(); }
  // A ListValue of ints (its field 3).
  static std::string ints_attr(const std::vector<int64_t>& values) {
    MessageBytes list;
    for (const int64_t value : values) list.varint(3, static_cast<uint64_t>(value));
    return MessageBytes().bytes(1, list.str()).str();
  }

  std::string str() { return graph_.str(); }

 private:
  MessageBytes graph_;
  std::vector<std::string> names_;
};

// TensorFlow's layer names, numbered in creation order as dual_net.py creates the layers.
std::string numbered(const std::string& base, int64_t index) { return index == 0 ? base : base + "_" + std::to_string(index); }

}  // namespace

void write_minigo_model(const MinigoNet& net, const std::string& path) {
  const MinigoNetOptions& options = net->options();
  if (options.input_planes() != kMlperf07Planes)
    fail(path, "only a network of the 13 mlperf07 planes is written (this one reads " + std::to_string(options.input_planes()) + ")");
  const int64_t size = options.board_size(), points = size * size;
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& item : net->named_parameters()) tensors[item.key()] = item.value().detach();
  for (const auto& item : net->named_buffers()) tensors[item.key()] = item.value().detach();

  GraphBuilder graph;
  const std::string float_type = GraphBuilder::type_attr(kDtFloat);
  graph.add("pos_tensor", "Placeholder", {},
            {{"dtype", GraphBuilder::type_attr(kDtBool)},
             {"shape", MessageBytes().bytes(7, shape_proto({-1, 13, size, size})).str()}});
  graph.add("Cast", "Cast", {"pos_tensor"},
            {{"SrcT", GraphBuilder::type_attr(kDtBool)}, {"DstT", float_type}, {"Truncate", GraphBuilder::bool_attr(false)}});
  int64_t conv_index = 0, norm_index = 0, relu_index = 0, add_index = 0;
  // conv (no bias, SAME) -> FusedBatchNorm in inference mode; returns the norm's name.
  const auto conv_norm = [&](const std::string& input, const std::string& layer, bool affine) {
    const std::string conv = numbered("conv2d", conv_index++), norm = numbered("batch_normalization", norm_index++);
    const torch::Tensor weight = tensors.at(layer + "_conv.weight");
    graph.constant(conv + "/kernel", weight.permute({2, 3, 1, 0}));  // OIHW -> HWIO
    graph.add(conv + "/Conv2D", "Conv2D", {input, conv + "/kernel"},
              {{"T", float_type},
               {"data_format", GraphBuilder::text_attr("NCHW")},
               {"padding", GraphBuilder::text_attr("SAME")},
               {"strides", GraphBuilder::ints_attr({1, 1, 1, 1})},
               {"dilations", GraphBuilder::ints_attr({1, 1, 1, 1})},
               {"use_cudnn_on_gpu", GraphBuilder::bool_attr(true)}});
    const torch::Tensor mean = tensors.at(layer + "_bn.running_mean");
    const std::string gamma = affine ? graph.constant(norm + "/gamma", tensors.at(layer + "_bn.weight"))
                                     : graph.constant(norm + "/Const", torch::ones_like(mean));
    const std::string beta = affine ? graph.constant(norm + "/beta", tensors.at(layer + "_bn.bias"))
                                    : graph.constant(norm + "/Const_1", torch::zeros_like(mean));
    graph.constant(norm + "/moving_mean", mean);
    graph.constant(norm + "/moving_variance", tensors.at(layer + "_bn.running_var"));
    graph.add(norm + "/FusedBatchNorm", "FusedBatchNorm",
              {conv + "/Conv2D", gamma, beta, norm + "/moving_mean", norm + "/moving_variance"},
              {{"T", float_type},
               {"data_format", GraphBuilder::text_attr("NCHW")},
               {"epsilon", GraphBuilder::float_attr(static_cast<float>(options.batch_norm_epsilon()))},
               {"is_training", GraphBuilder::bool_attr(false)}});
    return norm + "/FusedBatchNorm";
  };
  const auto relu = [&](const std::string& input) {
    return graph.add(numbered("Relu", relu_index++), "Relu", {input}, {{"T", float_type}});
  };
  int64_t reshape_index = 0, dense_index = 0;
  const auto reshape = [&](const std::string& input, const std::vector<int32_t>& shape) {
    const std::string name = numbered("Reshape", reshape_index++);
    graph.int_constant(name + "/shape", shape);
    return graph.add(name, "Reshape", {input, name + "/shape"}, {{"T", float_type}, {"Tshape", GraphBuilder::type_attr(kDtInt32)}});
  };
  const auto dense = [&](const std::string& input, const std::string& layer) {
    const std::string name = numbered("dense", dense_index++);
    graph.constant(name + "/kernel", tensors.at(layer + ".weight").t());
    graph.constant(name + "/bias", tensors.at(layer + ".bias"));
    graph.add(name + "/MatMul", "MatMul", {input, name + "/kernel"},
              {{"T", float_type}, {"transpose_a", GraphBuilder::bool_attr(false)}, {"transpose_b", GraphBuilder::bool_attr(false)}});
    return graph.add(name + "/BiasAdd", "BiasAdd", {name + "/MatMul", name + "/bias"},
                     {{"T", float_type}, {"data_format", GraphBuilder::text_attr("NHWC")}});
  };

  std::string x = relu(conv_norm("Cast", "initial", true));
  for (int64_t block = 1; block <= options.trunk_blocks(); ++block) {
    const std::string name = "block" + std::to_string(block);
    const std::string inner = relu(conv_norm(x, name + "_1", true));
    const std::string sum = graph.add(numbered("add", add_index++), "Add", {x, conv_norm(inner, name + "_2", true)}, {{"T", float_type}});
    x = relu(sum);
  }
  const std::string policy = relu(conv_norm(x, "policy", false));
  graph.add("policy_output", "Softmax", {dense(reshape(policy, {-1, static_cast<int32_t>(2 * points)}), "policy_fc")}, {{"T", float_type}});
  const std::string value = relu(conv_norm(x, "value", false));
  const std::string hidden = relu(dense(reshape(value, {-1, static_cast<int32_t>(points)}), "value_fc1"));
  graph.add("value_output", "Tanh", {reshape(dense(hidden, "value_fc2"), {-1})}, {{"T", float_type}});

  const std::string metadata = nlohmann::json{{"engine", "tf"},
                                              {"use_trt", false},
                                              {"conv_width", options.filters()},
                                              {"fc_width", options.fc_width()},
                                              {"trunk_layers", options.trunk_blocks()},
                                              {"use_SE", false},
                                              {"use_SE_bias", false},
                                              {"use_swish", false},
                                              {"input_features", "mlperf07"},
                                              {"input_layout", "nchw"},
                                              {"input_type", "bool"},
                                              {"board_size", size}}
                                   .dump();
  const std::string graph_bytes = graph.str();
  std::string header(kHeaderBytes, '\0');
  const auto put_u64 = [&](size_t offset, uint64_t value) {
    for (size_t i = 0; i < 8; ++i) header[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  };
  std::memcpy(header.data(), kMagic, 8);
  put_u64(8, 1);
  put_u64(16, kHeaderBytes + metadata.size() + graph_bytes.size());
  put_u64(24, metadata.size());
  write_file_atomically(path, header + metadata + graph_bytes);
}

}  // namespace trainbench::minigo
