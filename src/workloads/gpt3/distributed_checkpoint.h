#pragma once
// GPT-3's weights and Adam state in the reference's starting-checkpoint format: Megatron's distributed checkpoint
// (util/dist_checkpoint.h), one Zarr array per parameter with the layers stacked on a leading axis, the Adam
// moments beside them, and the optimizer's step in common.pt. Each rank reads only its tensor-parallel slice of
// its stage's layers, and writes only that.
#include <cstdint>
#include <string>
#include <vector>

#include "optim/adam.h"
#include "parallel/context.h"
#include "workloads/gpt3/model.h"

namespace trainbench::gpt3 {

// One array of the checkpoint: its key, its whole shape (layers first where stacked), and the axis the
// tensor-parallel ranks split (-1: none).
struct CheckpointArray {
  std::string key;
  std::vector<int64_t> shape;
  int64_t split_axis = -1;
  bool stacked = false;
};

// Every array of the model's checkpoint (weights only), from the options alone: nothing is allocated.
std::vector<CheckpointArray> checkpoint_arrays(const GptOptions& options, int64_t padded_vocab);

// Loads this rank's part of `model` (and, given an optimizer built over model->named_parameters() in order, its
// Adam moments and step) from `directory`. Refuses, naming the array, a missing array, a shape other than the
// preset's model needs, and non-finite values; nothing is changed unless everything was read.
void load_distributed_checkpoint(const std::string& directory, GptModel& model, optim::Adam* optimizer);

// Writes the model (and the optimizer's moments and step) as a new checkpoint directory. A split model: every
// rank calls it, the first data-parallel replica's ranks write their slices, and world rank 0 the arrays'
// metadata, common.pt and, last, metadata.json. A whole model: the rank that calls it writes everything. Refuses a
// directory that exists and is not empty.
void save_distributed_checkpoint(const std::string& directory, const GptModel& model, const optim::Adam& optimizer,
                                 const parallel::ParallelContext& context);

}  // namespace trainbench::gpt3
