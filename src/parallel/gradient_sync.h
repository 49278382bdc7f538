#pragma once
// Data-parallel gradient averaging, overlapped with the backward pass (the scheme of PyTorch's DDP,
// written for trainbench): parameters are grouped into buckets of about `bucket_megabytes`, in reverse
// registration order because that is roughly the order backward produces their gradients. A hook on each
// parameter copies its gradient into its bucket; when a bucket is full it is all-reduced asynchronously
// while backward continues. finish() waits for the buckets and writes the averaged gradients back.
//
// Construction broadcasts rank 0's parameters and buffers, so every rank starts from the same model.
// Tables updated row-wise (embeddings) stay out of it: their touched rows travel with allgather_concat() (parallel/gather.h).
#include <chrono>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "parallel/communicator.h"

namespace trainbench::parallel {

struct GradientSyncOptions {
  double bucket_megabytes = 1;
};

// Where a step's communication time went, for the overlap figure in `trainbench bench`.
struct GradientSyncStats {
  int64_t steps = 0;
  double exposed_wait_seconds = 0;  // time finish() blocked waiting on collectives, summed over steps
  double last_bucket_wait_seconds = 0;  // ... of which waiting on the bucket launched last (cannot overlap)
  int buckets = 0;
  int64_t bytes_per_step = 0;
};

class GradientSync {
 public:
  GradientSync(Communicator& communicator, std::vector<torch::Tensor> parameters, std::vector<torch::Tensor> buffers,
               GradientSyncOptions options = {});
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;
  ~GradientSync();

  // Gradient accumulation (DDP's no_sync): with false, the next backward only accumulates into .grad() on
  // this rank; with true (the default), its hooks send the accumulated gradient (.grad() plus this
  // backward's) to the buckets. finish() sets it back to true.
  void set_exchange(bool exchange) { exchange_ = exchange; }
  // After backward: every parameter's .grad() is the mean over ranks. Parameters that got no gradient this
  // update contribute zeros, as in DDP with unused parameters.
  void finish();
  // Rank 0's buffers (e.g. batch-norm running statistics) to every rank, so all evaluate the same model.
  void broadcast_buffers();
  const GradientSyncStats& stats() const { return stats_; }
  void reset_stats() { stats_ = GradientSyncStats{0, 0, 0, stats_.buckets, stats_.bytes_per_step}; }

 private:
  struct Slot {
    torch::Tensor parameter;
    int bucket = 0;
    int64_t offset = 0;   // in the bucket
    bool ready = false;
  };
  struct Bucket {
    torch::Tensor flat;
    std::vector<int> slots;
    int pending = 0;
    PendingCollective reduction;
  };

  void on_gradient(int slot, const torch::Tensor& gradient);
  void launch_ready_buckets();

  Communicator& communicator_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<torch::Tensor> buffers_;
  int next_bucket_to_launch_ = 0;
  bool exchange_ = true;
  std::vector<unsigned> hook_handles_;
  GradientSyncStats stats_;
};

// Rank 0's `tensors` to every rank, one broadcast per dtype and device (the tensors flattened together).
void broadcast_from_rank0(Communicator& communicator, const std::vector<torch::Tensor>& tensors);

// Every rank's `tensors` replaced by their mean over the ranks (floating point only), e.g. the batch-norm
// running statistics SSD's reference averages before each evaluation.
void average_over_ranks(Communicator& communicator, const std::vector<torch::Tensor>& tensors);

}  // namespace trainbench::parallel
