#include "parallel/device.h"

#include "util/error.h"

namespace trainbench {

torch::Device resolve_device(const std::string& setting) {
  const bool has_cuda = torch::cuda::is_available();
  if (setting == "cpu" || (setting == "auto" && !has_cuda)) return torch::kCPU;
  if (setting == "cuda" || setting == "auto") {
    if (!has_cuda) fail("--device cuda", "this LibTorch build sees no CUDA device (expected a CUDA build and a visible GPU)");
    return {torch::kCUDA, 0};
  }
  fail("--device " + setting, "expected auto, cpu or cuda");
}

}  // namespace trainbench
