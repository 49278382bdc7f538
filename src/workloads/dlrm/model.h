#pragma once
// DLRM as in the MLPerf v1.1 reference (facebookresearch/dlrm, mlperf branch, dlrm_s_pytorch.py): one
// embedding table per categorical feature, a bottom MLP on the dense features, the "dot" interaction
// (pairwise dot products of the bottom-MLP output and the 26 embedding vectors, strictly lower triangle,
// concatenated with the bottom-MLP output), a top MLP ending in one logit. DlrmOptions{table_sizes} with
// the defaults is the v1.1 model; the mini preset shrinks dims on the same code.
//
// Embeddings are one (sum of table rows, dim) parameter "embeddings", each table a row range of it, so a
// batch is one gather. It never takes part in autograd: training gathers the rows into a leaf tensor,
// backward leaves the (batch, 26, dim) gradient of just those rows there, and sgd_step adds -lr times it
// into the touched rows in place. No table-sized gradient, copy or densification ever exists (the
// reference's EmbeddingBag(sparse=True) + SGD gets the same update through sparse COO gradients).
//
// Over ranks the tables are either replicated (every rank holds all of them; the touched rows and their
// gradients are all-gathered) or sharded (each rank holds a ShardPlan's share; looked-up vectors and their
// gradients travel by all-to-all, as the v1.1 reference's and HugeCTR's model-parallel embeddings do).
// Either way each table row is initialized from a generator keyed by (embedding_seed, table, block of
// rows), so a sharded model starts from exactly the replicated one's values.
#include <optional>

#include <torch/torch.h>

#include "parallel/communicator.h"
#include "parallel/gradient_sync.h"
#include "parallel/shard_plan.h"
#include "workloads/checkpoint.h"
#include "workloads/training_loop.h"

namespace trainbench::dlrm {

using parallel::plan_table_shards;
using parallel::ShardPlan;
using parallel::TableShard;

struct DlrmOptions {
  explicit DlrmOptions(std::vector<int64_t> table_sizes) : table_sizes_(std::move(table_sizes)) {}
  TORCH_ARG(std::vector<int64_t>, table_sizes);
  // The table rows this rank holds, in ShardPlan::on_rank's order; none: every table whole (replicated).
  TORCH_ARG(std::optional<std::vector<TableShard>>, shards);
  TORCH_ARG(uint64_t, embedding_seed) = 0;
  TORCH_ARG(int64_t, dense_features) = 13;
  TORCH_ARG(int64_t, embedding_dim) = 128;
  TORCH_ARG(std::vector<int64_t>, bottom_mlp) = std::vector<int64_t>{512, 256, 128};  // last == embedding_dim
  TORCH_ARG(std::vector<int64_t>, top_mlp) = std::vector<int64_t>{1024, 1024, 512, 256, 1};  // last == 1
};

// The rows of one batch gathered for training; `vectors` is the autograd leaf whose grad sgd_step applies.
struct EmbeddingLookup {
  torch::Tensor rows;     // rows of this rank's `embeddings` the lookup read (replicated: batch * tables)
  torch::Tensor vectors;  // (batch, tables, dim)
  // Sharded: where each of `rows` went in the all-to-all's send buffer, a (ranks * padded_batch samples,
  // shard slots) grid; the backward exchange brings each one's gradient back to the same place.
  torch::Tensor send_positions;
  int64_t padded_batch = 0;  // the largest batch of any rank in this lookup (the all-to-all's chunk)
};

class DlrmImpl : public torch::nn::Module {
 public:
  explicit DlrmImpl(DlrmOptions options);

  // dense: (batch, 13) float, already log(x + 1); sparse: (batch, 26) int64 row within each table.
  // Returns logits (batch). A replicated model only; a sharded one goes through click_logits().
  torch::Tensor forward(const torch::Tensor& dense, const torch::Tensor& sparse);

  // A replicated model's rows for `sparse`; a sharded one's go through look_up().
  EmbeddingLookup lookup(const torch::Tensor& sparse) const;
  torch::Tensor predict(const torch::Tensor& dense, const torch::Tensor& vectors);

  // Plain SGD (the reference's optimizer): MLP parameters p -= lr * grad; embedding rows `rows` -= lr *
  // `row_gradients` (one row each), duplicates accumulating.
  void sgd_step(const torch::Tensor& rows, const torch::Tensor& row_gradients, double learning_rate);
  // The parameters autograd trains, and data parallelism averages: all but the embeddings.
  std::vector<torch::Tensor> mlp_parameters() const;

  // Multiply-accumulates of one sample's forward pass (MLPs and the interaction).
  int64_t forward_macs() const;
  // The v1.1 rules' weights_initialization names: embeddings, bottom_mlp_dense1.., top_mlp_dense1..
  std::vector<std::string> initialized_tensor_names() const;

  const DlrmOptions& options() const { return options_; }
  bool sharded() const { return options_.shards().has_value(); }
  // The table pieces this rank holds (all tables whole when replicated), and where each starts in `embeddings`.
  const std::vector<TableShard>& shards() const { return shards_; }
  const std::vector<int64_t>& shard_offsets() const { return shard_offsets_; }
  torch::Tensor embeddings;  // this rank's shards' rows, one after another

 private:
  DlrmOptions options_;
  std::vector<TableShard> shards_;
  std::vector<int64_t> shard_offsets_;
  std::vector<torch::nn::Linear> bottom_, top_;
  torch::Tensor table_offsets_;                   // (tables) first row of each table (replicated)
  torch::Tensor pair_rows_, pair_columns_;        // the strictly lower triangle of the 27 x 27 dot matrix
};
TORCH_MODULE(Dlrm);

// The model under the v1.1 reference's DLRM_Net names (dlrm_s_pytorch.py, mlperf branch): emb_l.<k>.weight for
// table k (its row range of `embeddings`), bot_l.<2i> and top_l.<2i> for the MLPs' i-th Linear (create_mlp's
// Sequential puts a ReLU, or the top's last Sigmoid, at the odd indices, without tensors). The index buffers
// (table offsets, interaction pairs) have no counterpart: the reference computes them. A sharded model, whose
// rank holds only its share of the tables, is refused naming `flag` (what asked for the state).
StateDict official_state(const Dlrm& model, const std::string& flag);

// The reference's LRPolicyScheduler: linear warmup over warmup_steps, constant, then from
// decay_start_step a polynomial decay with power 2 over decay_steps (floored at 1e-7), then constant at the
// last decayed value. `step` is the 0-based index of the optimizer step.
struct DlrmLrSchedule {
  double base_lr = 1;
  int64_t warmup_steps = 0;
  int64_t decay_start_step = 0;
  int64_t decay_steps = 0;
  double at(int64_t step) const;
};

}  // namespace trainbench::dlrm

namespace trainbench::dlrm {

// The ranks a step is averaged over (a world of one for a single process), the MLP gradients' sync, and the
// tables' layout over the ranks.
struct Parallelism {
  Parallelism(parallel::Communicator& communicator, parallel::GradientSync& mlp_gradients,
              std::optional<ShardPlan> sharding = std::nullopt);
  parallel::Communicator& communicator;
  parallel::GradientSync& mlp_gradients;
  std::optional<ShardPlan> sharding;  // the tables sharded over the ranks; none: replicated
  // Sharded: the most shards any rank holds (each rank's all-to-all chunk has that many slots), and for each
  // (rank, slot) the table it carries (tables: a padding slot), on the device it was last used on.
  int64_t slots_per_rank = 0;
  torch::Tensor slot_tables;
  const torch::Tensor& slot_tables_on(const torch::Device& device);
  // Seconds the step blocked exchanging embedding rows or vectors: nothing overlaps it, so it is all rank
  // wait in the run's time split.
  double row_exchange_seconds = 0;
};

// The samples' embedding vectors: from this rank's table (replicated), or, sharded, by all-gathering the
// ranks' categorical ids, looking up the shards held here, and an all-to-all that brings every sample its
// vectors from the ranks holding them. Sharded, it is a collective: every rank calls it, with the same
// number of lookups (an empty batch included).
EmbeddingLookup look_up(const Dlrm& model, Parallelism& parallel, const torch::Tensor& sparse);
// Evaluation logits through look_up().
torch::Tensor click_logits(Dlrm model, Parallelism& parallel, const torch::Tensor& dense, const torch::Tensor& sparse);

// One update for the shared training loop: per micro-batch the lookup, forward and BCE loss (mean over the
// batch, as the reference's BCELoss); then the SGD update. The MLP gradients are all-reduced (overlapped
// with backward). Replicated, the embedding rows each rank touched travel with their gradients, and every
// rank applies all of them scaled by 1/world, so the tables stay identical without being sent; sharded,
// the vectors' gradients go back by all-to-all to the ranks holding their rows, which apply them scaled by
// 1/world: the same update.
TrainingStep training_step(Dlrm model, Parallelism& parallel, const TrainingLoop& loop, torch::Tensor dense,
                           torch::Tensor sparse, torch::Tensor labels, double learning_rate);

}  // namespace trainbench::dlrm
