#include "workloads/dlrm/model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>

#include "data/random.h"
#include "parallel/gather.h"
#include "util/error.h"

namespace trainbench::dlrm {

namespace {

// The reference's create_mlp initialization: weights N(0, sqrt(2 / (in + out))), biases N(0, sqrt(1 / out)).
torch::nn::Linear make_linear(int64_t in, int64_t out) {
  torch::nn::Linear linear(in, out);
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std::sqrt(2.0 / static_cast<double>(in + out)));
  linear->bias.normal_(0.0, std::sqrt(1.0 / static_cast<double>(out)));
  return linear;
}

// Rows a generator of the tables' initialization covers: a row range starts its first block's generator at
// the block's beginning, so any range of a table is drawn without drawing the rows before it.
constexpr int64_t kInitBlockRows = 16384;

// Rows [first_row, first_row + out.size(0)) of table `table` (of `table_rows`), as the reference draws them:
// U(-sqrt(1/n), sqrt(1/n)) with n the table's rows; each block of rows from its own generator.
void initialize_table_rows(torch::Tensor out, int64_t table, int64_t first_row, int64_t table_rows, uint64_t seed) {
  const double bound = std::sqrt(1.0 / static_cast<double>(table_rows));
  const int64_t end = first_row + out.size(0);
  for (int64_t block = first_row / kInitBlockRows; block * kInitBlockRows < end; ++block) {
    const int64_t block_first = block * kInitBlockRows;
    const int64_t block_rows = std::min(kInitBlockRows, table_rows - block_first);
    at::Generator generator = at::detail::createCPUGenerator(
        data::mix_seed(seed, static_cast<uint64_t>(table), static_cast<uint64_t>(block)));
    const torch::Tensor values = torch::empty({block_rows, out.size(1)}).uniform_(-bound, bound, generator);
    const int64_t from = std::max(first_row, block_first), to = std::min(end, block_first + block_rows);
    out.narrow(0, from - first_row, to - from).copy_(values.narrow(0, from - block_first, to - from));
  }
}

}  // namespace

DlrmImpl::DlrmImpl(DlrmOptions options) : options_(std::move(options)) {
  const auto& tables = options_.table_sizes();
  const int64_t dim = options_.embedding_dim();
  if (tables.empty()) fail("dlrm model", "needs at least one embedding table");
  if (options_.bottom_mlp().empty() || options_.bottom_mlp().back() != dim)
    fail("dlrm model", "the bottom MLP must end in embedding_dim (" + std::to_string(dim) + ") outputs");
  if (options_.top_mlp().empty() || options_.top_mlp().back() != 1)
    fail("dlrm model", "the top MLP must end in 1 output");

  std::vector<int64_t> offsets;
  int64_t rows = 0;
  for (size_t table = 0; table < tables.size(); ++table) {
    if (tables[table] < 1) fail("dlrm model", "table sizes must be positive");
    offsets.push_back(rows);
    rows += tables[table];
  }
  table_offsets_ = register_buffer("table_offsets", torch::tensor(offsets, torch::kInt64));
  if (options_.shards())
    shards_ = *options_.shards();
  else
    for (size_t table = 0; table < tables.size(); ++table)
      shards_.push_back({static_cast<int64_t>(table), 0, tables[table], 0});
  int64_t local_rows = 0;
  for (const TableShard& shard : shards_) {
    if (shard.table < 0 || shard.table >= static_cast<int64_t>(tables.size()) || shard.first_row < 0 ||
        shard.rows < 1 || shard.first_row + shard.rows > tables[static_cast<size_t>(shard.table)])
      fail("dlrm model", "a table shard lies outside its table");
    shard_offsets_.push_back(local_rows);
    local_rows += shard.rows;
  }
  embeddings = register_parameter("embeddings", torch::empty({local_rows, dim}), /*requires_grad=*/false);
  for (size_t s = 0; s < shards_.size(); ++s)
    initialize_table_rows(embeddings.narrow(0, shard_offsets_[s], shards_[s].rows), shards_[s].table,
                          shards_[s].first_row, tables[static_cast<size_t>(shards_[s].table)],
                          options_.embedding_seed());

  int64_t width = options_.dense_features();
  for (size_t i = 0; i < options_.bottom_mlp().size(); ++i) {
    bottom_.push_back(
        register_module("bottom_mlp_dense" + std::to_string(i + 1), make_linear(width, options_.bottom_mlp()[i])));
    width = options_.bottom_mlp()[i];
  }
  const int64_t vectors = static_cast<int64_t>(tables.size()) + 1;
  std::vector<int64_t> pair_rows, pair_columns;
  for (int64_t i = 0; i < vectors; ++i)
    for (int64_t j = 0; j < i; ++j) {
      pair_rows.push_back(i);
      pair_columns.push_back(j);
    }
  pair_rows_ = register_buffer("pair_rows", torch::tensor(pair_rows, torch::kInt64));
  pair_columns_ = register_buffer("pair_columns", torch::tensor(pair_columns, torch::kInt64));
  width = dim + static_cast<int64_t>(pair_rows.size());
  for (size_t i = 0; i < options_.top_mlp().size(); ++i) {
    top_.push_back(register_module("top_mlp_dense" + std::to_string(i + 1), make_linear(width, options_.top_mlp()[i])));
    width = options_.top_mlp()[i];
  }
}

EmbeddingLookup DlrmImpl::lookup(const torch::Tensor& sparse) const {
  if (sharded()) fail("dlrm model", "a sharded model's lookup is a collective: use look_up()");
  torch::NoGradGuard no_grad;
  EmbeddingLookup result;
  result.rows = (sparse + table_offsets_).reshape({-1});
  result.vectors = embeddings.index_select(0, result.rows)
                       .view({sparse.size(0), sparse.size(1), options_.embedding_dim()});
  return result;
}

torch::Tensor DlrmImpl::predict(const torch::Tensor& dense, const torch::Tensor& vectors) {
  torch::Tensor x = dense;
  for (auto& layer : bottom_) x = torch::relu(layer->forward(x));
  const int64_t batch = x.size(0);
  const torch::Tensor all = torch::cat({x.unsqueeze(1), vectors}, 1);       // (batch, 27, dim)
  const torch::Tensor dots = torch::bmm(all, all.transpose(1, 2));           // (batch, 27, 27)
  const torch::Tensor pairs = dots.index({torch::indexing::Slice(), pair_rows_, pair_columns_});  // (batch, 351)
  x = torch::cat({x, pairs}, 1);
  for (size_t i = 0; i + 1 < top_.size(); ++i) x = torch::relu(top_[i]->forward(x));
  return top_.back()->forward(x).view({batch});
}

torch::Tensor DlrmImpl::forward(const torch::Tensor& dense, const torch::Tensor& sparse) {
  return predict(dense, lookup(sparse).vectors);
}

std::vector<torch::Tensor> DlrmImpl::mlp_parameters() const {
  std::vector<torch::Tensor> result;
  for (const auto& parameter : parameters())
    if (parameter.requires_grad()) result.push_back(parameter);
  return result;
}

void DlrmImpl::sgd_step(const torch::Tensor& rows_to_update, const torch::Tensor& row_gradients, double learning_rate) {
  torch::NoGradGuard no_grad;
  for (auto& parameter : parameters())
    if (parameter.grad().defined()) parameter.add_(parameter.grad(), -learning_rate);
  const int64_t dim = options_.embedding_dim();
  if (embeddings.is_cpu() && embeddings.is_contiguous() && embeddings.scalar_type() == torch::kFloat32) {
    // A plain loop over the touched rows: index_add_ on a 2-D CPU tensor dispatches one slice add per
    // index in LibTorch 1.13, which costs more than the arithmetic at these row counts.
    const torch::Tensor rows = rows_to_update.contiguous();
    const torch::Tensor grad = row_gradients.contiguous();
    const int64_t* row = rows.data_ptr<int64_t>();
    const float* g = grad.data_ptr<float>();
    float* table = embeddings.data_ptr<float>();
    const auto scale = static_cast<float>(-learning_rate);
    for (int64_t i = 0; i < rows.numel(); ++i) {
      float* target = table + row[i] * dim;
      const float* source = g + i * dim;
      for (int64_t k = 0; k < dim; ++k) target[k] += scale * source[k];
    }
  } else {
    embeddings.index_add_(0, rows_to_update, row_gradients, -learning_rate);
  }
}

int64_t DlrmImpl::forward_macs() const {
  int64_t macs = 0;
  for (const auto& layer : bottom_) macs += layer->weight.numel();
  for (const auto& layer : top_) macs += layer->weight.numel();
  const int64_t vectors = static_cast<int64_t>(options_.table_sizes().size()) + 1;
  return macs + vectors * vectors * options_.embedding_dim();
}

std::vector<std::string> DlrmImpl::initialized_tensor_names() const {
  std::vector<std::string> names{"embeddings"};
  for (size_t i = 0; i < bottom_.size(); ++i) names.push_back("bottom_mlp_dense" + std::to_string(i + 1));
  for (size_t i = 0; i < top_.size(); ++i) names.push_back("top_mlp_dense" + std::to_string(i + 1));
  return names;
}

StateDict official_state(const Dlrm& model, const std::string& flag) {
  if (model->sharded())
    fail(flag, "needs embedding_sharding=replicated: a rank of a sharded model holds only its share of the tables");
  StateDict state;
  const std::vector<int64_t>& tables = model->options().table_sizes();
  int64_t first_row = 0;
  for (size_t table = 0; table < tables.size(); ++table) {
    state.push_back(
        {"emb_l." + std::to_string(table) + ".weight", model->embeddings.narrow(0, first_row, tables[table])});
    first_row += tables[table];
  }
  std::vector<std::pair<std::string, std::string>> prefixes;
  for (size_t i = 0; i < model->options().bottom_mlp().size(); ++i)
    prefixes.emplace_back("bottom_mlp_dense" + std::to_string(i + 1) + ".", "bot_l." + std::to_string(2 * i) + ".");
  for (size_t i = 0; i < model->options().top_mlp().size(); ++i)
    prefixes.emplace_back("top_mlp_dense" + std::to_string(i + 1) + ".", "top_l." + std::to_string(2 * i) + ".");
  StateDict mlps;
  for (const auto& item : model->named_parameters())
    if (item.key() != "embeddings") mlps.push_back({item.key(), item.value()});
  for (NamedTensor& named : with_renamed_prefixes(std::move(mlps), prefixes)) state.push_back(std::move(named));
  return state;
}

Parallelism::Parallelism(parallel::Communicator& communicator, parallel::GradientSync& mlp_gradients,
                         std::optional<ShardPlan> sharding)
    : communicator(communicator), mlp_gradients(mlp_gradients), sharding(std::move(sharding)) {
  if (!this->sharding) return;
  if (this->sharding->world != communicator.world())
    fail("dlrm table shards", "planned for " + std::to_string(this->sharding->world) + " ranks, but the run has " +
                                  std::to_string(communicator.world()));
  const int64_t slots = slots_per_rank = this->sharding->max_shards_per_rank();
  int64_t tables = 0;
  for (const TableShard& shard : this->sharding->shards) tables = std::max(tables, shard.table + 1);
  std::vector<int64_t> slot_table(static_cast<size_t>(this->sharding->world * slots), tables);
  for (int rank = 0; rank < this->sharding->world; ++rank) {
    const std::vector<TableShard> held = this->sharding->on_rank(rank);
    for (size_t j = 0; j < held.size(); ++j) slot_table[static_cast<size_t>(rank * slots) + j] = held[j].table;
  }
  slot_tables = torch::tensor(slot_table, torch::kInt64);
}

const torch::Tensor& Parallelism::slot_tables_on(const torch::Device& device) {
  if (slot_tables.device() != device) slot_tables = slot_tables.to(device);
  return slot_tables;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The sharded lookup (see look_up): ids all-gathered, this rank's shards read, vectors sent by all-to-all.
EmbeddingLookup sharded_lookup(const DlrmImpl& model, Parallelism& parallel, const torch::Tensor& sparse) {
  torch::NoGradGuard no_grad;
  parallel::Communicator& communicator = parallel.communicator;
  const auto world = static_cast<int64_t>(communicator.world());
  const int64_t batch = sparse.size(0), tables = sparse.size(1), dim = model.options().embedding_dim();
  const auto ids_options = sparse.options().dtype(torch::kInt64);
  const auto start = Clock::now();
  // Ranks may hold different numbers of samples (the evaluation's last batch): every chunk is padded to the
  // largest, with id 0 (a row of every table) in the padding.
  torch::Tensor sizes = torch::empty({world}, ids_options);
  communicator.allgather(sizes, torch::full({1}, batch, ids_options)).wait();
  EmbeddingLookup result;
  result.padded_batch = sizes.max().item<int64_t>();
  torch::Tensor padded_ids = torch::zeros({result.padded_batch, tables}, ids_options);
  padded_ids.narrow(0, 0, batch).copy_(sparse);
  torch::Tensor all_ids = torch::empty({world * result.padded_batch, tables}, ids_options);
  communicator.allgather(all_ids, padded_ids).wait();

  const int64_t slots = parallel.slots_per_rank;
  std::vector<torch::Tensor> rows, positions;
  for (size_t j = 0; j < model.shards().size(); ++j) {
    const TableShard& shard = model.shards()[j];
    const torch::Tensor ids = all_ids.select(1, shard.table);
    const torch::Tensor samples =
        ((ids >= shard.first_row) & (ids < shard.first_row + shard.rows)).nonzero().view({-1});
    rows.push_back(ids.index_select(0, samples) - shard.first_row + model.shard_offsets()[j]);
    positions.push_back(samples * slots + static_cast<int64_t>(j));
  }
  result.rows = rows.empty() ? torch::empty({0}, ids_options) : torch::cat(rows);
  result.send_positions = positions.empty() ? torch::empty({0}, ids_options) : torch::cat(positions);
  // Chunk r of the send buffer holds rank r's samples: (padded batch, slots, dim) each.
  torch::Tensor send = torch::zeros({world * result.padded_batch * slots, dim}, model.embeddings.options());
  send.index_copy_(0, result.send_positions, model.embeddings.index_select(0, result.rows));
  torch::Tensor received = torch::empty_like(send);
  communicator.alltoall(received, send).wait();
  // Received chunk r: this rank's samples' vectors from rank r's slots; each slot adds into its table (a
  // table cut into row ranges gets one nonzero vector per sample, from the range holding its id).
  const torch::Tensor by_slot = received.view({world, result.padded_batch, slots, dim})
                                    .permute({1, 0, 2, 3})
                                    .reshape({result.padded_batch, world * slots, dim});
  result.vectors = torch::zeros({result.padded_batch, tables + 1, dim}, model.embeddings.options())
                       .index_add_(1, parallel.slot_tables_on(sparse.device()), by_slot)
                       .narrow(1, 0, tables)
                       .narrow(0, 0, batch)
                       .contiguous();
  parallel.row_exchange_seconds += seconds_since(start);
  return result;
}

// The backward of sharded_lookup: each sample's vector gradients to the ranks holding their rows; returns
// the gradient of each of `lookup.rows`.
torch::Tensor sharded_row_gradients(Parallelism& parallel, const EmbeddingLookup& lookup,
                                    const torch::Tensor& gradient) {
  torch::NoGradGuard no_grad;
  const auto start = Clock::now();
  const auto world = static_cast<int64_t>(parallel.communicator.world());
  const int64_t batch = gradient.size(0), tables = gradient.size(1), dim = gradient.size(2);
  const int64_t slots = parallel.slots_per_rank;
  torch::Tensor padded = torch::zeros({lookup.padded_batch, tables + 1, dim}, gradient.options());
  padded.narrow(1, 0, tables).narrow(0, 0, batch).copy_(gradient);
  // Chunk r: what rank r's slots contributed to this rank's samples, laid out as sharded_lookup sent it.
  const torch::Tensor send = padded.index_select(1, parallel.slot_tables_on(gradient.device()))
                                 .view({lookup.padded_batch, world, slots, dim})
                                 .permute({1, 0, 2, 3})
                                 .contiguous();
  torch::Tensor received = torch::empty_like(send);
  parallel.communicator.alltoall(received, send).wait();
  parallel.row_exchange_seconds += seconds_since(start);
  return received.view({-1, dim}).index_select(0, lookup.send_positions);
}

}  // namespace

EmbeddingLookup look_up(const Dlrm& model, Parallelism& parallel, const torch::Tensor& sparse) {
  return parallel.sharding ? sharded_lookup(*model, parallel, sparse) : model->lookup(sparse);
}

torch::Tensor click_logits(Dlrm model, Parallelism& parallel, const torch::Tensor& dense, const torch::Tensor& sparse) {
  const EmbeddingLookup lookup = look_up(model, parallel, sparse);
  return dense.size(0) == 0 ? torch::empty({0}, dense.options()) : model->predict(dense, lookup.vectors);
}

TrainingStep training_step(Dlrm model, Parallelism& parallel, const TrainingLoop& loop, torch::Tensor dense,
                           torch::Tensor sparse, torch::Tensor labels, double learning_rate) {
  // Each micro-batch's looked-up vectors; backward leaves their gradients in them.
  auto lookups = std::make_shared<std::vector<EmbeddingLookup>>();
  TrainingStep step;
  step.samples = dense.size(0);
  step.loss = [=, &parallel](const BatchSlice& slice) mutable {
    EmbeddingLookup& lookup = lookups->emplace_back(look_up(model, parallel, slice.of(sparse)));
    lookup.vectors.requires_grad_(true);
    return torch::binary_cross_entropy_with_logits(model->predict(slice.of(dense), lookup.vectors), slice.of(labels));
  };
  step.update = [=, &parallel, &loop]() mutable {
    std::vector<torch::Tensor> touched, touched_gradients;
    for (const EmbeddingLookup& lookup : *lookups) {
      if (!lookup.vectors.grad().defined()) fail("dlrm training step", "the embedding lookup has no gradient");
      touched.push_back(lookup.rows);
      touched_gradients.push_back(parallel.sharding ? sharded_row_gradients(parallel, lookup, lookup.vectors.grad())
                                                    : lookup.vectors.grad().reshape({lookup.rows.numel(), -1}));
    }
    torch::Tensor rows = touched.size() == 1 ? touched[0] : torch::cat(touched);
    torch::Tensor row_gradients = touched_gradients.size() == 1 ? touched_gradients[0] : torch::cat(touched_gradients);
    if (loop.gradient_scale() != 1) row_gradients = row_gradients / loop.gradient_scale();
    if (const int world = parallel.communicator.world(); world > 1) {
      if (!parallel.sharding) {
        const auto exchange_start = Clock::now();
        rows = parallel::allgather_concat(parallel.communicator, rows);
        row_gradients = parallel::allgather_concat(parallel.communicator, row_gradients);
        parallel.row_exchange_seconds += seconds_since(exchange_start);
      }
      row_gradients = row_gradients / world;  // each rank's loss is the mean over its share of the batch
    }
    model->sgd_step(rows, row_gradients, learning_rate);
  };
  return step;
}

double DlrmLrSchedule::at(int64_t step) const {
  // The reference counts scheduler steps from 1 and holds the last rate it computed between phases, so the
  // plateau after warmup is base * (W - 1) / W, not base.
  const int64_t count = step + 1;
  const auto decayed = [&](int64_t into_decay) {
    const double left = static_cast<double>(decay_steps - into_decay) / static_cast<double>(decay_steps);
    return std::max(1e-7, base_lr * left * left);
  };
  if (count < warmup_steps) return base_lr * static_cast<double>(count) / static_cast<double>(warmup_steps);
  if (decay_steps > 0 && count >= decay_start_step + decay_steps) return decayed(decay_steps - 1);
  if (decay_steps > 0 && count >= decay_start_step) return decayed(count - decay_start_step);
  if (warmup_steps <= 1) return base_lr;
  return base_lr * static_cast<double>(warmup_steps - 1) / static_cast<double>(warmup_steps);
}

}  // namespace trainbench::dlrm
