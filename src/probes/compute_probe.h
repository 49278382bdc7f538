#pragma once
// probe compute: the machine's measured FLOP/s, from square GEMMs over a sweep of sizes and ResNet-like
// convolutions (forward), timed through LibTorch in each data type the device really computes in. Only
// run_compute_probe needs LibTorch (compute_probe.cpp); the rest is plain C++, so the CLI and `bench --peak`
// read a probe's JSON without LibTorch headers.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainbench::probes {

struct ConvShape {
  int64_t batch = 1, in_channels = 1, height = 1, width = 1, out_channels = 1, kernel = 1, stride = 1, padding = 0;
  int64_t out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  int64_t out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
  std::string describe() const;  // "N32 C64 56x56 -> K64 3x3/1"
};

// One multiply-add counts as 2 FLOPs, as in every published peak figure.
inline double gemm_flops(int64_t m, int64_t n, int64_t k) { return 2.0 * m * n * k; }
// 2·N·K·C·R·S·P·Q: every output element (N·K·P·Q) is a dot product of length C·R·S.
inline double conv_flops(const ConvShape& s) {
  return 2.0 * s.batch * s.out_channels * s.in_channels * s.kernel * s.kernel * s.out_height() * s.out_width();
}

struct ComputeProbeOptions {
  std::string device = "auto";    // auto, cpu or cuda
  int threads = 1;
  double seconds = 1.0;           // timed seconds per row, after warm-up
  std::vector<int64_t> gemm_sizes;      // empty: the device's default sweep
  std::vector<ConvShape> conv_shapes;   // empty: the device's default ResNet-50 shapes
};

struct ComputeRow {
  std::string op;     // "gemm" or "conv"
  std::string dtype;  // "fp32", "tf32", "fp16", "bf16"
  std::string shape;
  double flops_per_call = 0;
  double seconds_per_call = 0;  // median over repetitions
  int64_t calls_per_repetition = 0;
  int64_t repetitions = 0;
  double flops_per_second() const { return seconds_per_call > 0 ? flops_per_call / seconds_per_call : 0; }
};

struct SkippedDtype {
  std::string dtype, reason;
};

struct DtypePeak {
  std::string dtype;
  double flops_per_second = 0;  // the best row of this dtype
  std::string op, shape;
  double gemm_flops_per_second = 0, conv_flops_per_second = 0;  // the best of each op
};

struct ComputeProbeResult {
  std::string device;       // "cpu", "cuda:0"
  std::string device_name;  // the CPU model or the GPU's name
  int threads = 0;          // what LibTorch reports after set_num_threads
  std::vector<ComputeRow> rows;
  std::vector<SkippedDtype> skipped;
  std::vector<std::string> notes;  // e.g. sweeps cut short because one call outlasted --seconds
  std::vector<DtypePeak> peaks() const;
};

// Why bf16 is not timed on this CPU, or nothing when /proc/cpuinfo shows native bf16 arithmetic
// (avx512_bf16 or amx_bf16). Without it LibTorch emulates bf16 in fp32, an order of magnitude slower.
std::optional<std::string> cpu_bf16_skip_reason(const std::string& cpuinfo);

// Times every row, printing each as it is measured, then the peaks (LibTorch; compute_probe.cpp).
ComputeProbeResult run_compute_probe(const ComputeProbeOptions& options, std::ostream& out);

std::string format_flops(double flops_per_second);  // "81.4 GFLOP/s", "1.23 TFLOP/s"
void print_row(const ComputeRow& row, std::ostream& out);
void print_peaks(const ComputeProbeResult& result, std::ostream& out);
nlohmann::ordered_json to_json(const ComputeProbeOptions& options, const ComputeProbeResult& result);

// The peak FLOP/s of `dtype` in a `probe compute --json` file; Error naming the file when it cannot be read
// or has no such peak.
double read_measured_peak(const std::string& path, const std::string& dtype = "fp32");

}  // namespace trainbench::probes
