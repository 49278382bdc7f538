#pragma once
// The arithmetic of a GPT-style decoder under a 3-D layout, from its shape alone (nothing is allocated): the padded
// vocabulary, the pipeline bubble, a step's floating-point operations and what one rank of a stage holds and sends
// per step. Plain C++ (no LibTorch), so the GPT-3 dry plan and the time-to-train prediction (src/predict) count
// with one formula.
#include <cstdint>

#include "parallel/plan.h"

namespace trainbench::parallel {

struct TransformerShape {
  int64_t layers = 0, hidden = 0, heads = 0, ffn_hidden = 0;
  int64_t seq_length = 0;
  int64_t vocab_size = 0, make_vocab_size_divisible_by = 128;
  int64_t max_positions = 0;  // learned position embeddings
  // The language-model head: logits over every position (0, GPT), or over this many positions of each sequence
  // (BERT's masked-LM head, which gathers the masked positions before the decoder: MLPerf's
  // max_predictions_per_seq).
  int64_t lm_head_positions = 0;
  // A dense h×h layer and a LayerNorm before the decoder (BERT's BertPredictionHeadTransform), on the same positions.
  bool lm_head_transform = false;
};

// Megatron's padded vocabulary (_vocab_size_with_padding): `vocab` rounded up to a multiple of
// divisible_by × tensor_parallel, so the embedding and the logits split evenly; GPT-3's 50257 tokens with 128
// and T = 8 make 51200. Throws Error for sizes that are not positive.
int64_t padded_vocab_size(int64_t vocab, int64_t divisible_by, int tensor_parallel);

// Megatron's bubble: the time the ranks are idle at the start and end of a step over the time they compute,
// (p − 1) / (v · m) (Narayanan et al. 2021, eq. 1 with interleaving). It is a share of the ideal (bubble-free)
// time, not of the step's.
double pipeline_bubble_fraction(int stages, int micro_batches, int chunks);

// Floating-point operations of one step of `global_batch` sequences with the padded vocabulary V: the model's
// 72·B·s·l·h²(1 + s/6h + V/12lh) (Narayanan et al. 2021), what is computed (with the core attention recomputed,
// Megatron's selective recompute, its second forward 4·B·s²·h·l more), and the paper's eq. 3 for recomputing
// whole layers, 96·B·s·l·h²(1 + s/6h + V/16lh). A head over k of the s positions computes its logits (and its
// transform, h more columns) for those only: V becomes k/s·(V + h) in both.
struct StepFlops {
  double model = 0, computed = 0, full_recompute = 0;
};
StepFlops step_flops(const TransformerShape& shape, double global_batch, int64_t padded_vocab,
                     bool recompute_attention);

struct FootprintOptions {
  int64_t micro_batches = 1;     // per step on one data-parallel replica: the pipeline's micro-batches
  int64_t micro_batch_size = 1;  // sequences
  int activation_element_bytes = 2;
  // The core attention's scores are not kept for backward: recomputed (selective recompute) or never stored
  // (a fused attention kernel, which recomputes them inside its backward).
  bool recompute_attention = false;
  // The weights as training reads them, per element; mixed precision keeps an fp32 master copy beside them.
  int weight_element_bytes = 4;
  bool master_weights = false;
  // Megatron's distributed optimizer (docs/distrib_optimizer.md): the fp32 master and Adam's two moments are
  // sharded over the data-parallel ranks.
  bool distributed_optimizer = false;
};

// What one rank of `stage` holds and moves in one step.
struct StageFootprint {
  int64_t parameters = 0;  // elements held: a slice of each split tensor, every replicated one
  // Weights in the training precision, fp32 gradients, and the optimizer's fp32 state (Adam's two moments and,
  // where kept, the master weights; over the data-parallel ranks under the distributed optimizer).
  double parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
  // Activations kept for backward at the schedule's peak (the micro-batches in flight on this stage), by
  // Korthikanti et al.'s (2022) per-layer count at 2-byte activations, scaled to the element size:
  // s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes, 34/t in place of 10 + 24/t under sequence parallelism, and without
  // the 5·a·s/(h·t) of the attention scores when they are not kept. An estimate.
  double activation_bytes = 0;
  // Payload bytes this rank gives each group per step: tensor parallel 4 all-reduces of b·s·h per layer per
  // micro-batch (forward and backward; a reduce-scatter and an all-gather each under sequence parallelism) plus
  // the embedding's and the logits'; pipeline b·s·h per boundary per micro-batch each way (b·s·h/t under
  // sequence parallelism, which splits the boundary's activations over the tensor ranks); data parallel the
  // shard's gradients once; the tied embeddings' gradient.
  double tensor_bytes = 0, pipeline_bytes = 0, data_bytes = 0, embedding_bytes = 0;
  // Bytes of one activation message, b·s·h elements (the tensor-parallel all-reduce's size).
  double activation_message_bytes = 0;

  double total_bytes() const { return parameter_bytes + gradient_bytes + optimizer_bytes + activation_bytes; }
};
StageFootprint stage_footprint(const TransformerShape& shape, const ParallelPlan& plan, int stage,
                               const FootprintOptions& options);

}  // namespace trainbench::parallel
