#include "workloads/gpt3/distributed_checkpoint.h"

#include <filesystem>
#include <map>

#include "util/dist_checkpoint.h"
#include "util/error.h"

namespace trainbench::gpt3 {

namespace {

const std::string kLayerPrefix = "language_model.encoder.layers.";

// A parameter's array key and its layer on the stacked axis (-1: not stacked). The last stage's copy of the word
// embeddings is stored once, as the embeddings (Megatron's checkpoint reuses the key).
std::pair<std::string, int64_t> array_of(const std::string& name) {
  if (name == kHeadWordEmbeddings) return {kWordEmbeddings, -1};
  if (name.rfind(kLayerPrefix, 0) != 0) return {name, -1};
  const size_t dot = name.find('.', kLayerPrefix.size());
  return {kLayerPrefix + name.substr(dot + 1), std::stoll(name.substr(kLayerPrefix.size(), dot - kLayerPrefix.size()))};
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// Where this rank's part of a parameter lies in its array: the layer, then the tensor-parallel slice.
zarr::Region region_of(const std::string& name, const torch::Tensor& local, const GptPartition& partition) {
  const auto [key, layer] = array_of(name);
  zarr::Region region;
  if (layer >= 0) {
    region.start.push_back(layer);
    region.count.push_back(1);
  }
  const int64_t split = tensor_parallel_dim(name);
  for (int64_t d = 0; d < local.dim(); ++d) {
    region.start.push_back(d == split ? local.size(d) * partition.tensor_rank() : 0);
    region.count.push_back(local.size(d));
  }
  return region;
}

std::vector<int64_t> whole_shape(const std::string& name, const torch::Tensor& local, const GptOptions& options,
                                 const GptPartition& partition) {
  std::vector<int64_t> shape;
  if (array_of(name).second >= 0) shape.push_back(options.layers());
  const int64_t split = tensor_parallel_dim(name);
  for (int64_t d = 0; d < local.dim(); ++d)
    shape.push_back(d == split ? local.size(d) * partition.tensor_size() : local.size(d));
  return shape;
}

// Reads `key`'s slice for a parameter into a new CPU tensor of the parameter's shape.
torch::Tensor read_slice(const std::string& directory, const std::string& key, const std::string& name,
                         const torch::Tensor& local, const GptModel& model) {
  const zarr::Array array = dist_checkpoint::open_array(directory, key);
  const std::vector<int64_t> expected = whole_shape(name, local, model->options(), model->partition());
  if (array.metadata().shape != expected)
    fail(array.directory(),
         "has shape " + shape_text(array.metadata().shape) + ", the preset's model needs " + shape_text(expected));
  torch::Tensor values = torch::empty(local.sizes(), torch::kFloat);
  array.read_float32(region_of(name, local, model->partition()), values.data_ptr<float>());
  if (!torch::isfinite(values).all().item<bool>())
    fail(array.directory(), "holds values that are not finite (NaN or infinite)");
  return values;
}

}  // namespace

std::vector<CheckpointArray> checkpoint_arrays(const GptOptions& options, int64_t padded_vocab) {
  const int64_t h = options.hidden(), ffn = options.ffn_hidden(), l = options.layers();
  const std::string attention = kLayerPrefix + "self_attention.", mlp = kLayerPrefix + "mlp.";
  std::vector<CheckpointArray> arrays = {
      {kWordEmbeddings, {padded_vocab, h}, 0, false},
      {"language_model.embedding.position_embeddings.weight", {options.max_positions(), h}, -1, false}};
  const auto stacked = [&](const std::string& key, std::vector<int64_t> shape, int64_t split) {
    shape.insert(shape.begin(), l);
    arrays.push_back({key, shape, split < 0 ? -1 : split + 1, true});
  };
  for (const char* norm : {"input_layernorm.", "post_attention_layernorm."}) {
    stacked(kLayerPrefix + norm + "weight", {h}, -1);
    stacked(kLayerPrefix + norm + "bias", {h}, -1);
  }
  stacked(attention + "query_key_value.weight", {3 * h, h}, 0);
  stacked(attention + "query_key_value.bias", {3 * h}, 0);
  stacked(attention + "dense.weight", {h, h}, 1);
  stacked(attention + "dense.bias", {h}, -1);
  stacked(mlp + "dense_h_to_4h.weight", {ffn, h}, 0);
  stacked(mlp + "dense_h_to_4h.bias", {ffn}, 0);
  stacked(mlp + "dense_4h_to_h.weight", {h, ffn}, 1);
  stacked(mlp + "dense_4h_to_h.bias", {h}, -1);
  arrays.push_back({"language_model.encoder.final_layernorm.weight", {h}, -1, false});
  arrays.push_back({"language_model.encoder.final_layernorm.bias", {h}, -1, false});
  return arrays;
}

void load_distributed_checkpoint(const std::string& directory, GptModel& model, optim::Adam* optimizer) {
  dist_checkpoint::read_config(directory);
  const bool has_moments = std::filesystem::exists(
      dist_checkpoint::array_directory(directory, dist_checkpoint::exp_avg_key(kWordEmbeddings)));
  std::vector<torch::Tensor> weights, exp_avgs, exp_avg_sqs;
  for (const auto& item : model->named_parameters()) {
    const std::string key = array_of(item.key()).first;
    weights.push_back(read_slice(directory, key, item.key(), item.value(), model));
    if (!optimizer || !has_moments) continue;
    exp_avgs.push_back(read_slice(directory, dist_checkpoint::exp_avg_key(key), item.key(), item.value(), model));
    exp_avg_sqs.push_back(read_slice(directory, dist_checkpoint::exp_avg_sq_key(key), item.key(), item.value(), model));
  }
  int64_t step = 0;
  const PlainValue common = dist_checkpoint::read_common(directory);
  if (const PlainValue* optimizer_state = common.find("optimizer"))
    if (const PlainValue* groups = optimizer_state->find("param_groups"))
      if (!groups->items().empty())
        if (const PlainValue* taken = groups->items().front().find("step")) step = taken->as_int();
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& item : model->named_parameters()) {
    item.value().copy_(weights[i]);
    if (!exp_avgs.empty()) {
      optimizer->exp_avg(i).copy_(exp_avgs[i]);
      optimizer->exp_avg_sq(i).copy_(exp_avg_sqs[i]);
    }
    ++i;
  }
  if (optimizer && has_moments) optimizer->set_steps(step);
}

namespace {

// The arrays of the weights and of both moments, created with one chunk per layer and tensor-parallel shard (as
// Megatron's zarr strategy creates them), and common.pt with the step, as the reference's optimizer records it.
void create_checkpoint(const std::string& directory, const GptModel& model, int64_t step, int tensor_parallel) {
  dist_checkpoint::prepare_new_checkpoint(directory);
  for (const CheckpointArray& array : checkpoint_arrays(model->options(), model->vocab_rows())) {
    std::vector<int64_t> fragments(array.shape.size(), 1);
    if (array.stacked) fragments[0] = array.shape[0];
    if (array.split_axis >= 0) fragments[static_cast<size_t>(array.split_axis)] = tensor_parallel;
    const zarr::ArrayMetadata metadata =
        dist_checkpoint::megatron_array_metadata(array.shape, fragments, zarr::DataType::kFloat32);
    for (const std::string& key :
         {array.key, dist_checkpoint::exp_avg_key(array.key), dist_checkpoint::exp_avg_sq_key(array.key)})
      dist_checkpoint::create_array(directory, key, metadata);
  }
  PlainValue group = PlainValue::dict();
  group.set("step", PlainValue::integer(step));
  PlainValue optimizer = PlainValue::dict();
  optimizer.set("param_groups", PlainValue::list({group}));
  PlainValue common = PlainValue::dict();
  common.set("optimizer", optimizer);
  dist_checkpoint::write_common(directory, common);
}

void write_slice(const std::string& directory, const std::string& key, const std::string& name,
                 const torch::Tensor& values, const GptPartition& partition) {
  const torch::Tensor host = values.detach().to(torch::kCPU, torch::kFloat).contiguous();
  dist_checkpoint::open_array(directory, key).write_float32(region_of(name, host, partition), host.data_ptr<float>());
}

}  // namespace

void save_distributed_checkpoint(const std::string& directory, const GptModel& model, const optim::Adam& optimizer,
                                 const parallel::ParallelContext& context) {
  // A split model is written by every rank of the first data-parallel replica, between barriers; a whole one by
  // the one rank that calls this (world rank 0, as WorkloadBase::save_weights and export_model call it).
  const bool split = context.plan.model_parallel();
  if (!split || context.rank() == 0) create_checkpoint(directory, model, optimizer.steps(), context.plan.tensor);
  if (split) context.world->barrier();
  if (!split || context.coordinates().data == 0) {
    size_t i = 0;
    for (const auto& item : model->named_parameters()) {
      const std::string key = array_of(item.key()).first;
      // The last stage's copy of the embeddings equals the first stage's, which writes them; a tensor every
      // tensor-parallel rank holds whole is written by the first (Megatron's replica_id 0).
      const bool replica = tensor_parallel_dim(item.key()) < 0 && model->partition().tensor_rank() != 0;
      if (item.key() != kHeadWordEmbeddings && !replica) {
        write_slice(directory, key, item.key(), item.value(), model->partition());
        write_slice(directory, dist_checkpoint::exp_avg_key(key), item.key(), optimizer.exp_avg(i), model->partition());
        write_slice(directory, dist_checkpoint::exp_avg_sq_key(key), item.key(), optimizer.exp_avg_sq(i),
                    model->partition());
      }
      ++i;
    }
  }
  if (split) context.world->barrier();
  if (!split || context.rank() == 0) dist_checkpoint::write_config(directory);
}

}  // namespace trainbench::gpt3
