#pragma once
// Pipeline parallelism: the schedules of one training step and the executor that runs them on a rank (the
// scheme of Megatron-LM's megatron/schedules.py and p2p_communication.py, written for trainbench).
//
// The model is cut into P · v pieces, the virtual stages. Rank r of the pipeline group holds v of them, its
// model chunks: chunk c is virtual stage c·P + r, so an activation goes round the ranks v times (Megatron's
// interleaving). GPipe and 1F1B have v = 1. A step splits the batch into m micro-batches; each runs forward
// through every virtual stage, then backward through them in reverse, and parameter gradients accumulate over
// the micro-batches (the caller steps the optimizer after run_step()).
//
// Schedules are data (pipeline_actions), so their order can be tested, simulated and printed without a
// tensor; the executor only follows the list.
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "parallel/communicator.h"
#include "parallel/plan.h"
#include "parallel/transformer_cost.h"  // pipeline_bubble_fraction

namespace trainbench::parallel {

struct PipelineAction {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int micro_batch = 0;
  int chunk = 0;

  bool operator==(const PipelineAction& other) const {
    return kind == other.kind && micro_batch == other.micro_batch && chunk == other.chunk;
  }
};

// The order in which pipeline rank `stage` of `stages` runs the forwards and backwards of one step:
// - GPipe: every forward in micro-batch order, then every backward in micro-batch order (in order, not
//   reversed, so that each parameter's gradient accumulates over the micro-batches in the same order as 1F1B).
// - 1F1B (Megatron's forward_backward_pipelining_without_interleaving): min(stages − stage − 1, m) warm-up
//   forwards, then one forward and one backward in turn, then the remaining backwards.
// - Interleaved (Megatron's forward_backward_pipelining_with_interleaving): the same over m·v chunk passes,
//   forwards taking the chunks in groups of `stages` micro-batches (backwards from the last chunk down), with
//   min(2·(stages − stage − 1) + (v − 1)·stages, m·v) warm-up forwards, or all of them when m == stages.
// GPipe and 1F1B need chunks == 1; interleaved needs m to be a multiple of `stages`. Throws Error otherwise.
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stages, int stage, int micro_batches,
                                             int chunks);

// A step's timeline on an ideal machine: each action starts as soon as its rank is free and its input has
// arrived (sends take no time). `forward_time` and `backward_time` are one micro-batch's pass through all of a
// rank's chunks; each chunk takes 1/v of it.
struct PipelineTimeline {
  double step_time = 0;      // when the last rank finishes
  double compute_time = 0;   // what each rank computes: m · (forward_time + backward_time)
  double idle_fraction = 0;  // idle rank-time over stages · step_time
};
// Throws Error if the schedule would deadlock (an action waits for one that its rank runs later).
PipelineTimeline simulate_pipeline(PipelineSchedule schedule, int stages, int micro_batches, int chunks,
                                   double forward_time = 1, double backward_time = 2);

// The shape and options (dtype, device) of an activation, for preallocating the tensor a receive fills.
struct ActivationLayout {
  std::vector<int64_t> shape;
  torch::TensorOptions options;
};

// What the model gives the executor. Both are called only for this rank's chunks.
struct PipelineStageFunctions {
  // Forward of model chunk `chunk` for `micro_batch`. `input` is the activation of the previous virtual stage
  // (requires_grad set by the executor), or undefined on the first virtual stage, which reads its micro-batch
  // itself. Returns the activation for the next virtual stage or, on the last one, the micro-batch's loss (a
  // scalar the executor calls backward on; how losses are weighted is the caller's business).
  std::function<torch::Tensor(int chunk, int micro_batch, const torch::Tensor& input)> forward;
  // The activation that enters `chunk` for `micro_batch` (not called on the first virtual stage).
  std::function<ActivationLayout(int chunk, int micro_batch)> input_layout;
};

// Where one step's time went on this rank. On CUDA the times are host times (kernels are not waited for).
struct PipelineStepStats {
  double step_seconds = 0;
  double compute_seconds = 0;       // inside forward() and backward
  double receive_wait_seconds = 0;  // blocked in receives: the bubble as this rank sees it
  double send_wait_seconds = 0;     // waiting, at the end of the step, for sends still in flight
  int64_t bytes_sent = 0;           // activations and gradients to other ranks
  int64_t bytes_received = 0;
  int forwards = 0;
  int backwards = 0;
  int peak_stored_activations = 0;  // micro-batch chunk passes held for their backward at once
};

class PipelineExecutor {
 public:
  // `pipeline_group`: rank() is the stage, world() the stage count P. It must outlive the executor.
  PipelineExecutor(Communicator& pipeline_group, PipelineSchedule schedule, int chunks);
  PipelineExecutor(const PipelineExecutor&) = delete;
  PipelineExecutor& operator=(const PipelineExecutor&) = delete;
  ~PipelineExecutor();

  // Runs the forwards and backwards of one step over `micro_batches` micro-batches (every rank of the group
  // calls it with the same count). Returns the sum of the last virtual stage's losses, on every rank.
  // Communication failures surface as the communicator's Error, which names the rank that stopped.
  double run_step(int micro_batches, const PipelineStageFunctions& functions);
  const PipelineStepStats& last_step() const { return last_step_; }

  int stage() const;
  int stages() const;
  int chunks() const { return chunks_; }
  // Whether `chunk` on this rank is virtual stage 0 (reads the data) or the last one (computes the loss).
  bool first_virtual_stage(int chunk) const { return virtual_stage(chunk) == 0; }
  bool last_virtual_stage(int chunk) const { return virtual_stage(chunk) == stages() * chunks_ - 1; }

 private:
  struct StepState;
  int virtual_stage(int chunk) const { return chunk * stages() + stage(); }
  void run_forward(StepState& step, int micro_batch, int chunk);
  void run_backward(StepState& step, int micro_batch, int chunk);
  void send_to(StepState& step, int virtual_stage, const torch::Tensor& tensor, int tag);
  torch::Tensor receive_from(StepState& step, int virtual_stage, int tag, const std::vector<int64_t>& shape,
                             const torch::TensorOptions& options);
  void finish_sends(StepState& step);

  Communicator& group_;
  PipelineSchedule schedule_;
  int chunks_;
  PipelineStepStats last_step_;
  // Sends of a step that failed, never waited for: their buffers must outlive the transport's pending I/O.
  std::vector<PendingCollective> abandoned_sends_;
};

}  // namespace trainbench::parallel
