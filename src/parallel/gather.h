#pragma once
// Gathers of variable-length data over the Communicator's collectives, which need equal shapes on every rank:
// the ranks first all-gather their row counts, then pad to the longest, gather, and drop the padding. What
// crosses the wire is therefore world x the longest contribution, plus one small all-gather of the counts.
//
// Every rank must call the same gathers in the same order (they are collectives); results come in rank order.
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "parallel/communicator.h"

namespace trainbench::parallel {

// Every rank's `values` concatenated along dim 0 in rank order, when ranks hold different numbers of rows
// (the other dimensions and the dtype must agree): how ranks exchange the rows of a replicated table they
// touched (embedding gradients) without sending the table, or gather evaluation scores.
torch::Tensor allgather_concat(Communicator& communicator, const torch::Tensor& values);
// The same on `root` only (c10d's gather: the other ranks receive nothing); an undefined tensor elsewhere.
torch::Tensor gather_concat(Communicator& communicator, const torch::Tensor& values, int root);

// Every rank's bytes, in rank order, on every rank.
std::vector<std::vector<uint8_t>> allgather_bytes(Communicator& communicator, const std::vector<uint8_t>& bytes);
// Every rank's bytes, in rank order, on `root`; no buffers on the other ranks.
std::vector<std::vector<uint8_t>> gather_bytes(Communicator& communicator, const std::vector<uint8_t>& bytes, int root);

}  // namespace trainbench::parallel
