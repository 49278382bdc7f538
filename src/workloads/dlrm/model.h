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
#include <torch/torch.h>

#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "workloads/training_loop.h"

namespace trainbench::dlrm {

struct DlrmOptions {
  explicit DlrmOptions(std::vector<int64_t> table_sizes) : table_sizes_(std::move(table_sizes)) {}
  TORCH_ARG(std::vector<int64_t>, table_sizes);
  TORCH_ARG(int64_t, dense_features) = 13;
  TORCH_ARG(int64_t, embedding_dim) = 128;
  TORCH_ARG(std::vector<int64_t>, bottom_mlp) = std::vector<int64_t>{512, 256, 128};  // last == embedding_dim
  TORCH_ARG(std::vector<int64_t>, top_mlp) = std::vector<int64_t>{1024, 1024, 512, 256, 1};  // last == 1
};

// The rows of one batch gathered for training; `vectors` is the autograd leaf whose grad sgd_step applies.
struct EmbeddingLookup {
  torch::Tensor rows;     // (batch * tables) rows of `embeddings`
  torch::Tensor vectors;  // (batch, tables, dim)
};

class DlrmImpl : public torch::nn::Module {
 public:
  explicit DlrmImpl(DlrmOptions options);

  // dense: (batch, 13) float, already log(x + 1); sparse: (batch, 26) int64 row within each table.
  // Returns logits (batch). For evaluation; training uses lookup() and predict().
  torch::Tensor forward(const torch::Tensor& dense, const torch::Tensor& sparse);

  EmbeddingLookup lookup(const torch::Tensor& sparse) const;
  torch::Tensor predict(const torch::Tensor& dense, const torch::Tensor& vectors);

  // Plain SGD (the reference's optimizer): MLP parameters p -= lr * grad; embedding rows `rows` -= lr *
  // `row_gradients` (one row each), duplicates accumulating.
  void sgd_step(const torch::Tensor& rows, const torch::Tensor& row_gradients, double learning_rate);
  // Clears the MLP gradients (the embeddings have none).
  // The parameters autograd trains, and data parallelism averages: all but the embeddings.
  std::vector<torch::Tensor> mlp_parameters() const;

  // Multiply-accumulates of one sample's forward pass (MLPs and the interaction).
  int64_t forward_macs() const;
  // The v1.1 rules' weights_initialization names: embeddings, bottom_mlp_dense1.., top_mlp_dense1..
  std::vector<std::string> initialized_tensor_names() const;

  const DlrmOptions& options() const { return options_; }
  torch::Tensor embeddings;

 private:
  DlrmOptions options_;
  std::vector<torch::nn::Linear> bottom_, top_;
  torch::Tensor table_offsets_;                   // (tables) first row of each table
  torch::Tensor pair_rows_, pair_columns_;        // the strictly lower triangle of the 27 x 27 dot matrix
};
TORCH_MODULE(Dlrm);

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

// The ranks a step is averaged over (a world of one for a single process) and the MLP gradients' sync.
struct DataParallel {
  dist::Communicator& communicator;
  dist::GradientSync& mlp_gradients;
  // Seconds train_step blocked exchanging the touched embedding rows: nothing overlaps it, so it is all
  // rank wait in the run's time split.
  double row_exchange_seconds = 0;
};

// One update for the shared training loop: per micro-batch the lookup, forward and BCE loss (mean over the
// batch, as the reference's BCELoss); then the SGD update. The MLP gradients are all-reduced (overlapped
// with backward); the embedding rows each rank touched travel with their gradients, and every rank
// applies all of them scaled by 1/world, so the replicated tables stay identical without being sent.
TrainingStep training_step(Dlrm model, DataParallel& parallel, const TrainingLoop& loop, torch::Tensor dense,
                           torch::Tensor sparse, torch::Tensor labels, double learning_rate);

}  // namespace trainbench::dlrm
