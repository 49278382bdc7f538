#pragma once
// MiniGo's own model files, read and written natively: the `.minigo` container (cc/model/loader.cc: an
// "<minigo>" magic, version 1, the file's size, a JSON metadata block, then the model) holding a frozen
// TensorFlow graph, or a bare frozen graph (`.pb`, a GraphDef) as dual_net.py's freeze_graph writes it. The
// official v1.1 checkpoint and target are such files. Only the reference architecture is accepted (dual_net.py's
// model_inference_fn without squeeze-excitation or swish); anything else is refused naming the node or key.
#include <string>

#include <nlohmann/json.hpp>

#include "workloads/minigo/model.h"

namespace trainbench::minigo {

struct MinigoModelFile {
  MinigoNet net{nullptr};  // on the CPU, in eval mode
  // The container's metadata (board_size, input_features, input_layout, ...); an empty object for a bare .pb.
  nlohmann::json metadata;
  std::string input_features;  // "mlperf07" (13 planes, what trainbench plays) or "agz" (17 planes)
};

// Reads a `.minigo` file or a bare frozen graph: the layers are found by walking the graph back from
// `policy_output` and `value_output` to `pos_tensor`, so the network's shape (board size, filters, blocks,
// fc width, input planes) comes from the file. A file this cannot read is refused with its path and the
// reason, and nothing is returned.
MinigoModelFile read_minigo_model(const std::string& path);

// True when `path` is a file read_minigo_model reads (a `.minigo` container by its magic, or a name ending in
// `.pb`); false for anything else, such as the `torch::save` files `data make minigo` writes.
bool is_minigo_model_file(const std::string& path);

// Writes `net` as the v1.1 reference freezes its models (bool_features, input_layout nchw, mlperf07
// features): a `.minigo` container whose metadata names the architecture, holding a GraphDef with
// pos_tensor, policy_output and value_output as cc/dual_net/tf_dual_net.cc feeds and fetches them. The file
// appears whole or not at all.
void write_minigo_model(const MinigoNet& net, const std::string& path);

}  // namespace trainbench::minigo
