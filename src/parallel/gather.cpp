#include "parallel/gather.h"

#include <optional>
#include <string>

#include <torch/torch.h>

#include "util/error.h"

namespace trainbench::parallel {

namespace {

// Each rank's rows, in rank order: on every rank when `root` is empty, else on the root only (an empty list
// elsewhere).
std::vector<torch::Tensor> gather_rows(Communicator& communicator, const torch::Tensor& values, std::optional<int> root) {
  const int world = communicator.world();
  if (values.dim() == 0) fail("gathered tensor", "needs a first dimension to concatenate along; got a scalar");
  if (world == 1) return {values};
  const bool receives = !root || communicator.rank() == *root;
  if (root && (*root < 0 || *root >= world))
    fail("gather root", "expected a rank in 0.." + std::to_string(world - 1) + ", got " + std::to_string(*root));
  // Rows and elements per row, so a rank whose rows differ in shape is an error naming it, not a hang.
  int64_t trailing = 1;
  for (int64_t d = 1; d < values.dim(); ++d) trailing *= values.size(d);
  torch::Tensor shape = torch::tensor({values.size(0), trailing}, torch::kInt64).to(values.device());
  torch::Tensor shapes = torch::empty({world, 2}, shape.options());
  communicator.allgather(shapes, shape).wait();
  const auto shapes_cpu = shapes.cpu();
  const auto rows = shapes_cpu.accessor<int64_t, 2>();
  int64_t longest = 0;
  for (int rank = 0; rank < world; ++rank) {
    if (rows[rank][1] != trailing)
      fail("gather on rank " + std::to_string(communicator.rank()),
           "rank " + std::to_string(rank) + " sends rows of " + std::to_string(rows[rank][1]) + " elements, this rank rows of " +
               std::to_string(trailing) + "; every rank's rows must have one shape");
    longest = std::max(longest, rows[rank][0]);
  }
  std::vector<torch::Tensor> gathered;
  if (longest == 0) {
    // Nothing to send: every rank knows it from the counts, so no collective is issued.
    if (receives)
      for (int rank = 0; rank < world; ++rank) gathered.push_back(values);
    return gathered;
  }
  std::vector<int64_t> padded_shape = values.sizes().vec();
  padded_shape[0] = longest;
  torch::Tensor padded = torch::zeros(padded_shape, values.options());
  padded.narrow(0, 0, values.size(0)).copy_(values);
  padded_shape[0] = longest * world;
  torch::Tensor all;
  if (receives) all = torch::empty(padded_shape, values.options());
  if (root)
    communicator.gather(all, padded, *root).wait();
  else
    communicator.allgather(all, padded).wait();
  if (receives)
    for (int rank = 0; rank < world; ++rank) gathered.push_back(all.narrow(0, rank * longest, rows[rank][0]));
  return gathered;
}

// Bytes travel as a uint8 tensor on the device of whichever backend the build has (Gloo: CPU, else CUDA).
torch::Device host_collective_device(Communicator& communicator) {
  return communicator.backend(torch::kCPU) == "nccl" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
}

std::vector<std::vector<uint8_t>> gather_byte_buffers(Communicator& communicator, const std::vector<uint8_t>& bytes,
                                                      std::optional<int> root) {
  if (communicator.world() == 1) return {bytes};
  const torch::Device device = host_collective_device(communicator);
  const torch::Tensor local =
      bytes.empty() ? torch::empty({0}, torch::TensorOptions(torch::kUInt8).device(device))
                    : torch::from_blob(const_cast<uint8_t*>(bytes.data()), {static_cast<int64_t>(bytes.size())}, torch::kUInt8)
                          .to(device, /*non_blocking=*/false, /*copy=*/true);
  std::vector<std::vector<uint8_t>> buffers;
  for (const torch::Tensor& part : gather_rows(communicator, local, root)) {
    const torch::Tensor host = part.cpu().contiguous();
    buffers.emplace_back(host.data_ptr<uint8_t>(), host.data_ptr<uint8_t>() + host.numel());
  }
  return buffers;
}

}  // namespace

torch::Tensor allgather_concat(Communicator& communicator, const torch::Tensor& values) {
  if (communicator.world() == 1) return values;
  return torch::cat(gather_rows(communicator, values, std::nullopt));
}

torch::Tensor gather_concat(Communicator& communicator, const torch::Tensor& values, int root) {
  if (communicator.world() == 1) return values;
  const std::vector<torch::Tensor> parts = gather_rows(communicator, values, root);
  return parts.empty() ? torch::Tensor() : torch::cat(parts);
}

std::vector<std::vector<uint8_t>> allgather_bytes(Communicator& communicator, const std::vector<uint8_t>& bytes) {
  return gather_byte_buffers(communicator, bytes, std::nullopt);
}

std::vector<std::vector<uint8_t>> gather_bytes(Communicator& communicator, const std::vector<uint8_t>& bytes, int root) {
  return gather_byte_buffers(communicator, bytes, root);
}

}  // namespace trainbench::parallel
