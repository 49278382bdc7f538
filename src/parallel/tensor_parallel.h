#pragma once
// Tensor parallelism as Megatron-LM's mpu does it (megatron/mpu/{mappings,layers,cross_entropy}.py), written
// for trainbench: a layer's weight is split over the T ranks of a tensor-parallel group, and a few pairs of
// conjugate collectives (identity one way, a reduction the other) make its forward and its gradients those of
// the unsplit layer. The group is a Communicator whose rank() is the tensor-parallel rank and world() is T; a
// group of one is the unsplit layer, with no collective and no process group.
//
// Column-parallel then row-parallel linear layers make a transformer MLP (or attention: heads split by the
// column layer) with one all-reduce forward and one backward; with sequence parallelism the activations
// outside the pair are split along dim 0 (the sequence in Megatron's [s, b, h] layout) and the all-reduce
// becomes an all-gather and a reduce-scatter.
//
// Every rank of the group must make the same calls in the same order (they are collectives), and the group
// must outlive the modules and every autograd graph built through it (graphs hold it by address).
#include <cstdint>
#include <ostream>

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "parallel/communicator.h"
#include "parallel/transformer_cost.h"  // padded_vocab_size

namespace trainbench::parallel {

// ---- The conjugate operators (autograd functions); each is the identity in a group of one ----

// Megatron's f: identity forward, all-reduce (sum) of the gradient backward. It enters a tensor-parallel
// region whose ranks each use the whole input: every rank's part of the input's gradient is summed.
torch::Tensor copy_to_tensor_parallel(const torch::Tensor& input, Communicator& group);
// Megatron's g: all-reduce (sum) forward, identity backward. It leaves the region: the ranks' partial results
// (a row-parallel product, masked embedding rows) are summed, and every rank holds the whole result.
torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& input, Communicator& group);
// All-gather along the last dimension forward (rank order); backward keeps this rank's chunk of the gradient.
torch::Tensor gather_from_tensor_parallel(const torch::Tensor& input, Communicator& group);
// Keeps this rank's chunk of the last dimension forward; all-gathers the gradient backward.
torch::Tensor scatter_to_tensor_parallel(const torch::Tensor& input, Communicator& group);

// Sequence parallelism (dim 0, which must divide by T where it is split): this rank's chunk forward, all-gather
// backward.
torch::Tensor scatter_to_sequence_parallel(const torch::Tensor& input, Communicator& group);
// All-gather along dim 0 forward; backward reduce-scatters the gradient, as the ranks' uses of the gathered
// tensor are parts of one computation (a column-parallel layer). Where every rank repeats the same computation
// on it instead (Megatron's pooler), tensor_parallel_output_grad = false keeps this rank's chunk unsummed.
torch::Tensor gather_from_sequence_parallel(const torch::Tensor& input, Communicator& group,
                                            bool tensor_parallel_output_grad = true);
// Reduce-scatter (sum) along dim 0 forward; all-gather backward.
torch::Tensor reduce_scatter_to_sequence_parallel(const torch::Tensor& input, Communicator& group);

// ---- Shards of whole tensors (no autograd): initialising a split model from the unsplit one, checkpoints ----

// Chunk `rank` of `parts` equal chunks of `full` along `dim` (negative counts from the end), as a new
// contiguous tensor. Throws Error where that dimension does not divide into `parts`.
torch::Tensor shard_of(const torch::Tensor& full, int64_t dim, int rank, int parts);
// The whole tensor from every rank's `local` shard along `dim`, on every rank (an all-gather).
torch::Tensor gather_shards(const torch::Tensor& local, int64_t dim, Communicator& group);

// ---- Layers ----
// Each draws its default weights whole, as the unsplit torch::nn layer draws them from the default generator,
// and keeps its shard: ranks seeded alike hold one model, the same at every T (what Megatron's
// --use-cpu-initialization does). A model initialised otherwise sets them with load_full(); full_weight()
// gathers them back. Both take and give the unsplit layer's tensors.

/// Y = X Aᵀ + b with A's output rows split: rank r holds rows [r·out/T, (r+1)·out/T) of the weight and bias.
/// The input goes through f (or, under sequence parallelism, is all-gathered along dim 0 first); the output is
/// this rank's columns of Y, or all of Y with gather_output.
///   ColumnParallelLinear layer(ColumnParallelLinearOptions(1024, 4096).sequence_parallel(true), group);
struct ColumnParallelLinearOptions {
  ColumnParallelLinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);  // must divide by T
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, gather_output) = false;
  // The input is this rank's chunk of dim 0; the layer all-gathers it (and reduce-scatters its gradient).
  TORCH_ARG(bool, sequence_parallel) = false;
};

class ColumnParallelLinearImpl : public torch::nn::Cloneable<ColumnParallelLinearImpl> {
 public:
  ColumnParallelLinearImpl(const ColumnParallelLinearOptions& options, Communicator& group);
  void reset() override;
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  torch::Tensor forward(const torch::Tensor& input);

  // From the unsplit layer's weight [out, in] and bias [out] (ignored without a bias).
  void load_full(const torch::Tensor& weight, const torch::Tensor& bias = {});
  torch::Tensor full_weight() const;  // collective
  torch::Tensor full_bias() const;    // collective; undefined without a bias

  ColumnParallelLinearOptions options;
  torch::Tensor weight;  // [out/T, in]
  torch::Tensor bias;    // [out/T], or undefined

 private:
  Communicator* group_;
};
TORCH_MODULE(ColumnParallelLinear);

/// Y = X Aᵀ + b with A's input columns split: rank r holds columns [r·in/T, (r+1)·in/T) of the weight and the
/// whole bias. The input is this rank's chunk of the last dimension (input_is_parallel, what a column-parallel
/// layer gives), or the whole input, which it then splits. The ranks' partial products are summed by g, or
/// reduce-scattered along dim 0 under sequence parallelism, and the bias is added after the sum.
///
/// Under sequence parallelism each rank adds the bias to its own rows only, so its gradient there is a part;
/// the layer sums it over the group in the backward (f on the bias), so every parameter's gradient is whole
/// when backward returns. Megatron leaves that sum to its optimizer (allreduce_layernorm_grads); a model's own
/// replicated parameters used on sequence-parallel rows (layer norms) need the same: copy_to_tensor_parallel.
struct RowParallelLinearOptions {
  RowParallelLinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);  // must divide by T
  TORCH_ARG(int64_t, out_features);
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, input_is_parallel) = true;
  // The output is this rank's chunk of dim 0 (which must divide by T).
  TORCH_ARG(bool, sequence_parallel) = false;
};

class RowParallelLinearImpl : public torch::nn::Cloneable<RowParallelLinearImpl> {
 public:
  RowParallelLinearImpl(const RowParallelLinearOptions& options, Communicator& group);
  void reset() override;
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  torch::Tensor forward(const torch::Tensor& input);

  // From the unsplit layer's weight [out, in] and bias [out] (ignored without a bias).
  void load_full(const torch::Tensor& weight, const torch::Tensor& bias = {});
  torch::Tensor full_weight() const;  // collective
  torch::Tensor full_bias() const;    // the bias (every rank holds it whole); undefined without one

  RowParallelLinearOptions options;
  torch::Tensor weight;  // [out, in/T]
  torch::Tensor bias;    // [out], or undefined

 private:
  Communicator* group_;
};
TORCH_MODULE(RowParallelLinear);

/// An embedding with its rows split: rank r holds ids [r·V/T, (r+1)·V/T). Each rank looks up the ids it holds,
/// gives zeros for the others, and g sums the ranks' rows. num_embeddings is the padded vocabulary
/// (padded_vocab_size), which must divide by T.
struct VocabParallelEmbeddingOptions {
  VocabParallelEmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TORCH_ARG(int64_t, num_embeddings);
  TORCH_ARG(int64_t, embedding_dim);
};

class VocabParallelEmbeddingImpl : public torch::nn::Cloneable<VocabParallelEmbeddingImpl> {
 public:
  VocabParallelEmbeddingImpl(const VocabParallelEmbeddingOptions& options, Communicator& group);
  void reset() override;
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  // ids: int64 of any shape, each in [0, num_embeddings); gives [*ids.shape, embedding_dim].
  torch::Tensor forward(const torch::Tensor& ids);

  // The first id this rank holds, and one past its last.
  int64_t vocab_start() const;
  int64_t vocab_end() const;
  // From the unsplit table [num_embeddings, embedding_dim].
  void load_full(const torch::Tensor& weight);
  torch::Tensor full_weight() const;  // collective

  VocabParallelEmbeddingOptions options;
  torch::Tensor weight;  // [num_embeddings/T, embedding_dim]

 private:
  Communicator* group_;
};
TORCH_MODULE(VocabParallelEmbedding);

// ---- Loss and prediction over logits split along the vocabulary ----
// local_logits: [..., V/T], rank r's columns [r·V/T, (r+1)·V/T) of the logits (what a column-parallel output
// layer gives without gather_output). vocab_limit: the real vocabulary; columns at or past it are padding
// (padded_vocab_size) and take no part, so a padded model gives exactly the unpadded loss and prediction.

// Per-row cross-entropy [...] against global target ids [...] (each in [0, vocab_limit)), with Megatron's
// backward: the softmax, minus one at the target on the rank that holds it; padding columns get no gradient.
// Two collectives forward (an all-gather of row maxima, one all-reduce), none backward.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& local_logits, const torch::Tensor& target,
                                           Communicator& group, int64_t vocab_limit);
// The global argmax [...] (int64) over the real columns; ties go to the lowest id, as torch::argmax of the whole
// row. One all-gather; no autograd.
torch::Tensor vocab_parallel_argmax(const torch::Tensor& local_logits, Communicator& group, int64_t vocab_limit);

}  // namespace trainbench::parallel
