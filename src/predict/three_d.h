#pragma once
// Time-to-train of a GPT-style model under a tensor × pipeline × data layout (Megatron-LM's 3-D parallelism,
// Narayanan et al. 2021), from the device's achieved FLOP/s and the links. Every term, per step:
//   compute   FLOPs per step (recompute's extra forward included) / devices / achieved FLOP/s per device
//   bubble    compute × (p − 1) / (v·m)
//   tensor    4 all-reduces of b·s·h per layer per micro-batch on the link the tensor group spans
//   pipeline  b·s·h (/t under sequence parallelism) per stage boundary per micro-batch each way
//   data      the stage's gradients all-reduced once, hidden behind the last micro-batch's backward
// and per run the evaluations and the fixed start; memory per device decides whether a layout is predicted at
// all. docs/predict.md derives each term and shows the check against NVIDIA's v3.0 GPT-3 results.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "parallel/transformer_cost.h"
#include "predict/time_to_train.h"

namespace trainbench::predict {

// MLPerf's GPT-3 175B (the reference's run_gpt3.sh, NVIDIA's config_common.sh): 96 layers, hidden 12288, 96 heads,
// feed-forward 49152, sequences of 2048, the 50257-token vocabulary padded by 128 × t.
parallel::TransformerShape gpt3_175b_shape();
// MLPerf v1.1's BERT-Large phase 2 (NVIDIA's v1.1 run_and_time.sh, the reference preset of src/workloads/bert): 24
// layers, hidden 1024, 16 heads, feed-forward 4096, sequences of 512, the 30522-token vocabulary padded to a multiple
// of 8 × t (run_pretraining.py pads to 8), and the masked-LM head's decoder over the 76 masked positions
// (max_predictions_per_seq, gathered first: dense_seq_output) behind its dense transform.
parallel::TransformerShape bert_large_shape();

struct Layout {
  int tensor = 1, pipeline = 1, virtual_stages = 1;
  int micro_batch_size = 1;      // sequences
  std::string describe() const;  // "tp=4 pp=8 v=12 b=1"
};
// "tp=4,pp=8,v=12,b=1" (v and b default to 1); throws Error naming `flag`.
Layout parse_layout(const std::string& text, const std::string& flag);

struct Cluster {
  int nodes = 1, devices_per_node = 1;
  Link intra, inter;
  bool in_network = false;            // the data-parallel all-reduce summed in the switches (SHARP)
  double switch_latency_seconds = 0;  // in-network: added once per all-reduce
  double device_memory_bytes = 0;     // 0: unknown, every layout taken to fit

  int devices() const { return nodes * devices_per_node; }
};

// What the RCPs count convergence in: GPT-3's epoch_num counts tokens, BERT's train_samples sequences.
enum class ConvergenceUnit { kTokens, kSamples };

// What is trained, and how it is held: Megatron's mixed precision (16-bit weights and activations, fp32
// gradients, master weights and Adam's or LAMB's two moments), sequence parallelism under tensor parallelism.
struct ModelRun {
  parallel::TransformerShape shape;
  double global_batch = 0;  // sequences
  ConvergenceUnit unit = ConvergenceUnit::kTokens;
  // The core attention's scores are recomputed in backward, not stored (GPT-3: Megatron's selective recompute or a
  // fused attention): its forward runs twice and its s² activations are not held. BERT's reference stores them.
  bool recompute_attention = true;
  bool distributed_optimizer = false;
  double overlap =
      2.0 / 3.0;  // share of the last micro-batch's compute (its backward) the data all-reduce hides behind

  double units_per_sequence() const;  // s tokens, or 1 sample
  std::string unit_name() const;      // "tokens" or "samples"
};

// GPT-3 175B in tokens with the attention recomputed, or BERT-Large in samples with the scores stored; throws Error
// naming `flag` for any other benchmark.
ModelRun mlperf_model_run(const std::string& benchmark, const std::string& flag);

struct StepParts {
  double compute = 0, bubble = 0, tensor = 0, pipeline = 0, data = 0, data_exposed = 0;
  double seconds() const { return compute + bubble + tensor + pipeline + data_exposed; }
};

struct LayoutCost {
  Layout layout;
  int data = 1;
  int micro_batches = 1;
  double flops_per_device = 0;  // computed, per step
  double bubble_fraction = 0;
  StepParts step;
  double memory_bytes = 0;  // the fullest stage's device
  int fullest_stage = 0;
  parallel::StageFootprint fullest;
  bool fits = true;
};

// Why `layout` cannot run `run` on `cluster`: the flag to change and what is wrong; nothing when it can.
struct LayoutProblem {
  std::string flag, what;
};
std::optional<LayoutProblem> layout_problem(const ModelRun& run, const Cluster& cluster, const Layout& layout);

// The step of a valid layout (layout_problem is nothing) at `flops_per_second` per device.
LayoutCost layout_cost(const ModelRun& run, const Cluster& cluster, const Layout& layout, double flops_per_second);

// Where the achieved FLOP/s, the convergence, the evaluations and the start-up come from.
struct DeviceCalibration {
  std::string source;
  double flops_per_second = 0;  // achieved per device
  double step_seconds = 0;      // the calibration's own step
  StepParts parts;              // its step, as the model splits it
  Calibration run;              // the log's convergence, evaluations and fixed start (a bench: none)
};

// From published logs (calibrate.h) of `run` at their global batch under `layout` on `cluster`: the step is the
// training time per step (the logs' units, tokens or samples, per second over a step's), less the modelled
// communication and bubble. Throws Error naming the source when nothing is left for compute or the logs count
// another unit.
DeviceCalibration calibrate_from_run(const Calibration& logs, ModelRun run, const Layout& layout,
                                     const Cluster& cluster);
// From a `bench --json` of `layers` layers of `run`'s shape on one device per rank (data parallel only).
DeviceCalibration calibrate_from_bench(const Calibration& bench, const ModelRun& run, int layers);
// The nodes, devices and links of published logs' system.
Cluster cluster_of(const Calibration& logs);

struct ThreeDPrediction {
  LayoutCost cost;
  double global_batch = 0;
  std::string unit;  // the run's unit_name()
  double units = 0;  // to converge
  std::string units_source;
  double steps = 0, evaluations = 0, seconds_per_evaluation = 0;
  // The parts, in seconds; they add up to minutes × 60.
  double fixed_seconds = 0, compute_seconds = 0, bubble_seconds = 0, tensor_seconds = 0, pipeline_seconds = 0,
         data_seconds = 0, evaluation_seconds = 0;
  double minutes = 0;
  std::vector<std::string> notes;
};

// Throws Error naming the flag when the layout does not divide or does not fit.
ThreeDPrediction predict_three_d(const DeviceCalibration& calibration, const ModelRun& run, const Cluster& cluster,
                                 const Layout& layout, const review::RcpTable& rcp);

// Every layout that divides the model and the batch and fits, fastest first.
std::vector<ThreeDPrediction> search_layouts(const DeviceCalibration& calibration, const ModelRun& run,
                                             const Cluster& cluster, const review::RcpTable& rcp);

nlohmann::ordered_json to_json(const StepParts& step);  // seconds, each part and the whole data all-reduce
nlohmann::ordered_json to_json(const DeviceCalibration& calibration);
nlohmann::ordered_json to_json(const ThreeDPrediction& prediction);
std::string format_three_d_text(const ThreeDPrediction& prediction);

}  // namespace trainbench::predict
