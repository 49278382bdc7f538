// The timed half of probe compute: the only probe code that compiles against LibTorch.
#include "probes/compute_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include <torch/torch.h>
// Device names and compute capabilities need the CUDA runtime headers, present only where LibTorch was
// built with CUDA (the toolkit is then on the include path); Debian's CPU build has none.
#if __has_include(<cuda_runtime_api.h>)
#include <ATen/cuda/CUDAContext.h>
#define TRAINBENCH_HAS_CUDA_RUNTIME 1
#endif

#include "probes/environment.h"
#include "parallel/device.h"

namespace trainbench::probes {

namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double seconds_per_call = 0;
  int64_t calls_per_repetition = 0, repetitions = 0;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// Warm-up, then repetitions of a batch of calls until `budget` seconds are spent (at least 3): the first
// call pays for allocation, oneDNN primitive creation or cuDNN's algorithm search; the following warm-up
// lets thread pools and clocks settle. Batching keeps the clock's and the launch's overhead out of small ops.
Timing time_calls(const std::function<void()>& call, const torch::Device& device, double budget) {
  const auto timed = [&](int64_t calls) {
    const auto begin = Clock::now();
    for (int64_t i = 0; i < calls; ++i) call();
    if (device.is_cuda()) torch::cuda::synchronize();  // the clock must cover the work, not its launch
    return std::chrono::duration<double>(Clock::now() - begin).count();
  };
  timed(1);
  const double one_call = timed(1);
  Timing timing;
  timing.calls_per_repetition = std::clamp<int64_t>(std::llround(budget / 20 / std::max(one_call, 1e-9)), 1, 100000);
  for (double warm = one_call; warm < budget / 5;) warm += timed(timing.calls_per_repetition);
  std::vector<double> per_call;
  for (double spent = 0; (spent < budget || per_call.size() < 3) && per_call.size() < 1000;) {
    const double seconds = timed(timing.calls_per_repetition);
    spent += seconds;
    per_call.push_back(seconds / timing.calls_per_repetition);
  }
  timing.seconds_per_call = median(per_call);
  timing.repetitions = static_cast<int64_t>(per_call.size());
  return timing;
}

torch::ScalarType scalar_type(const std::string& dtype) {
  if (dtype == "fp16") return torch::kHalf;
  if (dtype == "bf16") return torch::kBFloat16;
  return torch::kFloat;  // fp32, and tf32, which is fp32 storage with tensor-core arithmetic
}

std::vector<ConvShape> resnet50_convs(int64_t batch) {
  return {{batch, 64, 56, 56, 64, 3, 1, 1},     // stage 1, 3x3
          {batch, 256, 56, 56, 64, 1, 1, 0},    // stage 1, 1x1 bottleneck reduce
          {batch, 128, 28, 28, 128, 3, 1, 1},   // stage 2
          {batch, 256, 14, 14, 256, 3, 1, 1},   // stage 3
          {batch, 512, 7, 7, 512, 3, 1, 1}};    // stage 4
}

struct DeviceInfo {
  std::string name;
  std::vector<std::string> dtypes;
  std::vector<SkippedDtype> skipped;
};

DeviceInfo describe_device(const torch::Device& device) {
  DeviceInfo info;
  info.dtypes = {"fp32"};
  if (device.is_cpu()) {
    const std::string cpuinfo = read_cpuinfo();
    info.name = cpuinfo_field(cpuinfo, "model name");
    if (const auto reason = cpu_bf16_skip_reason(cpuinfo)) info.skipped.push_back({"bf16", *reason});
    else info.dtypes.push_back("bf16");
    info.skipped.push_back({"fp16", "timed on CUDA devices only (LibTorch's CPU kernels have no fast fp16 path)"});
    info.skipped.push_back({"tf32", "a mode of NVIDIA tensor cores (CUDA only)"});
    return info;
  }
  int capability = 0;  // major version; tf32 and bf16 tensor cores arrived with 8 (Ampere)
#ifdef TRAINBENCH_HAS_CUDA_RUNTIME
  const cudaDeviceProp* properties = at::cuda::getDeviceProperties(device.index());
  info.name = properties->name;
  capability = properties->major;
#else
  info.name = "CUDA device " + std::to_string(device.index());
#endif
  info.dtypes.push_back("fp16");
  for (const char* dtype : {"tf32", "bf16"}) {
    if (capability >= 8) info.dtypes.push_back(dtype);
    else info.skipped.push_back({dtype, capability ? "needs compute capability 8.0 or newer (this device: " +
                                                          std::to_string(capability) + ".x)"
                                                    : "compute capability unknown: this build has no CUDA runtime headers"});
  }
  return info;
}

// Sets the global math modes for one dtype's rows and restores them afterwards.
class MathModeGuard {
 public:
  MathModeGuard(const torch::Device& device, const std::string& dtype)
      : cublas_tf32_(at::globalContext().allowTF32CuBLAS()),
        cudnn_tf32_(at::globalContext().allowTF32CuDNN()),
        cudnn_benchmark_(at::globalContext().benchmarkCuDNN()) {
    if (!device.is_cuda()) return;
    // fp32 rows must be true fp32: PyTorch allows tf32 in cuDNN convolutions by default.
    at::globalContext().setAllowTF32CuBLAS(dtype == "tf32");
    at::globalContext().setAllowTF32CuDNN(dtype == "tf32");
    at::globalContext().setBenchmarkCuDNN(true);  // a peak: let cuDNN pick its fastest algorithm
  }
  ~MathModeGuard() {
    at::globalContext().setAllowTF32CuBLAS(cublas_tf32_);
    at::globalContext().setAllowTF32CuDNN(cudnn_tf32_);
    at::globalContext().setBenchmarkCuDNN(cudnn_benchmark_);
  }

 private:
  bool cublas_tf32_, cudnn_tf32_, cudnn_benchmark_;
};

}  // namespace

ComputeProbeResult run_compute_probe(const ComputeProbeOptions& options, std::ostream& out) {
  const torch::Device device = resolve_device(options.device);
  torch::set_num_threads(options.threads);
  torch::manual_seed(1);
  torch::NoGradGuard no_grad;
  const DeviceInfo info = describe_device(device);
  ComputeProbeResult result;
  result.device = device.str();
  result.device_name = info.name;
  result.threads = torch::get_num_threads();
  result.skipped = info.skipped;
  const std::vector<int64_t> gemm_sizes = !options.gemm_sizes.empty() ? options.gemm_sizes
                                          : device.is_cuda()          ? std::vector<int64_t>{1024, 2048, 4096, 8192}
                                                                      : std::vector<int64_t>{256, 512, 1024, 2048};
  const std::vector<ConvShape> conv_shapes =
      !options.conv_shapes.empty() ? options.conv_shapes : resnet50_convs(device.is_cuda() ? 128 : 8);

  char header[256];
  std::snprintf(header, sizeof header,
                "probe compute: %s (%s), %d threads, LibTorch %s; median time per call over repetitions, "
                "%.2f s timed per row after warm-up\n",
                result.device.c_str(), result.device_name.c_str(), result.threads, TORCH_VERSION, options.seconds);
  out << header;
  std::snprintf(header, sizeof header, "%-5s %-5s %-32s %14s %16s %s\n", "op", "dtype", "shape", "time/call", "reps x calls",
                "achieved");
  out << header << std::flush;

  const auto measure = [&](const std::string& op, const std::string& dtype, const std::string& shape, double flops,
                           const std::function<void()>& call) {
    const Timing timing = time_calls(call, device, options.seconds);
    ComputeRow row{op, dtype, shape, flops, timing.seconds_per_call, timing.calls_per_repetition, timing.repetitions};
    print_row(row, out);
    out << std::flush;
    result.rows.push_back(row);
    return row;
  };

  for (const auto& dtype : info.dtypes) {
    const MathModeGuard math_mode(device, dtype);
    const auto tensor_options = torch::TensorOptions().device(device).dtype(scalar_type(dtype));
    for (const int64_t n : gemm_sizes) {
      const auto a = torch::randn({n, n}, tensor_options), b = torch::randn({n, n}, tensor_options);
      auto c = torch::empty({n, n}, tensor_options);
      const std::string shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
      const ComputeRow row = measure("gemm", dtype, shape, gemm_flops(n, n, n), [&] { torch::mm_out(c, a, b); });
      if (row.seconds_per_call > options.seconds && n != gemm_sizes.back()) {
        // The sweep grows as n^3: a size that outlasts the budget would make the next ones take minutes.
        char note[256];
        std::snprintf(note, sizeof note, "gemm %s: sizes above %lld left out: one call took %.2f s, more than --seconds %.2f",
                      dtype.c_str(), static_cast<long long>(n), row.seconds_per_call, options.seconds);
        result.notes.push_back(note);
        break;
      }
    }
    // cuDNN's tensor-core convolutions are fastest in channels-last (NHWC) layout, so a GPU peak is measured
    // in it; on the CPU, oneDNN is as fast in NCHW (shared/reference/libtorch-notes.md), the layout used there.
    const auto layout = device.is_cuda() ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
    for (const auto& s : conv_shapes) {
      const auto input = torch::randn({s.batch, s.in_channels, s.height, s.width}, tensor_options).contiguous(layout);
      const auto weight = torch::randn({s.out_channels, s.in_channels, s.kernel, s.kernel}, tensor_options).contiguous(layout);
      measure("conv", dtype, s.describe(), conv_flops(s), [&] { torch::conv2d(input, weight, {}, s.stride, s.padding); });
    }
  }
  print_peaks(result, out);
  return result;
}

}  // namespace trainbench::probes
