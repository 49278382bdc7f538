#pragma once
// The list of benchmarks the CLI knows. Adding a benchmark is one folder under workloads/ (its sources,
// presets.json and settings.json, picked up by CMake), a `registry_entry()` in that folder, and one name in
// registry.cpp. Nothing here includes LibTorch, so the CLI compiles quickly.
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "harness/config.h"
#include "harness/setting_rules.h"
#include "harness/workload.h"

namespace trainbench {

namespace parallel {
class Communicator;
struct ParallelContext;
}  // namespace parallel
class Trainer;

// What a benchmark's trainer is built for (workloads/trainer.h). The weights it starts from differ: a run also
// reads the preset's own starting files (BERT's init_checkpoint, the detectors' backbones); an export writes
// the seeded initialization or --weights; a bench times the seeded model.
enum class TrainerPurpose { kRun, kBench, kExport };

// Everything a workload is built from: its effective config plus the run's environment.
struct WorkloadSettings {
  Config config;
  std::string data_dir;          // empty for a benchmark without a dataset
  int threads = 1;               // compute threads (torch::set_num_threads)
  std::string device = "auto";   // "cpu", "cuda", or "auto" (CUDA when this LibTorch has a GPU)
  int64_t seed = 0;
  bool skip_corrupt = false;     // skip unreadable samples (counted in the log) instead of failing
  // --weights: a model file in `checkpoint export`'s format to start from instead of the seeded
  // initialization; empty: none.
  std::string weights;
  // The ranks training together (data parallel). Null means this process alone. The preset's batch
  // size is the global batch; each rank trains batch_size / world of it.
  std::shared_ptr<parallel::Communicator> communicator;
};

struct BenchSettings {
  int64_t steps = 20;
  int64_t warmup_steps = 3;
  double peak_flops = 0;  // measured fp32 peak FLOP/s (bench --peak, from `probe compute --json`); 0: none given
  // bench --profile: after the timed steps, as many more run under LibTorch's profiler; rank 0 writes their
  // Chrome trace here and prints the operators by self time. Empty: no profile.
  std::string profile_path;
  // bench --memory: one training step instead of the timed ones, and its per-rank peak memory; the bench's
  // other measurements (inference, evaluation, data pipeline) are skipped so that nothing else is resident.
  bool memory = false;
};

struct WorkloadEntry {
  std::string name;     // submission_benchmark
  std::string summary;  // one line for help texts and the generated benchmark table
  const char* presets_json = nullptr;
  // What the benchmark trains on, for help texts: "an ImageNet-layout tree", ...; empty when it has no
  // dataset (MiniGo learns from its own self-play), in which case --data is refused.
  std::string dataset;
  std::function<std::unique_ptr<Workload>(const WorkloadSettings&)> create;
  // The benchmark's one factory of its model, optimizer, gradient exchange and step (workloads/trainer.h):
  // the workload's build(), bench_benchmark() and export_model() all build through it.
  std::function<std::unique_ptr<Trainer>(const WorkloadSettings&, const parallel::ParallelContext&, TrainerPurpose)>
      make_trainer;
  // Writes the preset's generated dataset into a directory; empty for benchmarks without a dataset.
  std::function<void(const Config&, const std::string& out_dir, int64_t seed)> make_dataset;
  // Converts the real dataset in in_dir once into the form the workload trains from (in out_dir); empty
  // for workloads that read their dataset as published.
  std::function<void(const Config&, const std::string& in_dir, const std::string& out_dir)> prepare_dataset;
  // bench --shard-plan N: how the model's parameters lie over N ranks, and each rank's bytes. Empty for the
  // benchmarks that replicate their whole model on every rank.
  std::function<void(const Config&, int ranks, std::ostream&)> print_shard_plan = nullptr;
  // The file name ending of the models export_model and --save-model write: a state dict, or for MiniGo, whose
  // reference is TensorFlow, minigo's own `.minigo` container.
  std::string model_file_suffix = ".pt";

  bool uses_dataset() const { return !dataset.empty(); }
};

// WorkloadEntry::create for a workload class constructed from its settings.
template <typename WorkloadType>
std::unique_ptr<Workload> construct_workload(const WorkloadSettings& settings) {
  return std::make_unique<WorkloadType>(settings);
}

// `trainbench bench <benchmark>`: the training step's throughput on a synthetic batch, and what else the
// benchmark measures (data pipeline, inference, ...); a benchmark, not a run: no log, no target.
void bench_benchmark(const WorkloadEntry& entry, const WorkloadSettings& settings, const BenchSettings& bench,
                     std::ostream& out);
// `checkpoint export`: writes the model a run of these settings starts from (the seeded initialization, or
// --weights) as a PyTorch state dict under the official implementation's names (workloads/checkpoint.h), or
// as MiniGo's `.minigo` file (minigo/model_file.h); --weights and --save-model use the same format.
void export_model(const WorkloadEntry& entry, const WorkloadSettings& settings, const std::string& out_path);

const std::vector<WorkloadEntry>& workload_registry();
// Throws Error naming the known benchmarks when `name` is not one of them.
const WorkloadEntry& find_workload(const std::string& name);
// What each setting of the benchmark's presets may be: the shared src/workloads/settings.json with the
// benchmark folder's own settings.json.
SettingRules setting_rules(const WorkloadEntry& entry);
// A preset with the user's --set overrides, checked against the benchmark's setting rules: what every run,
// bench and dataset generation starts from, so a value outside its rule is refused before anything is read.
Config preset_config(const WorkloadEntry& entry, const std::string& preset, const std::vector<std::string>& overrides);
// --help-settings: the preset's settings, each with what it may be and what it is.
std::string settings_help(const WorkloadEntry& entry, const std::string& preset);
// "mini, reference, tiny": the entry's presets, each wrapped in `quote` (e.g. "`" for Markdown).
std::string preset_list(const WorkloadEntry& entry, const std::string& quote = "");
// "resnet, bert, dlrm": for help texts; with a filter, only the entries it accepts.
std::string benchmark_names(const std::function<bool(const WorkloadEntry&)>& filter = nullptr);
// The Markdown table of docs/benchmarks.md: benchmark, what it is, presets, dataset.
std::string benchmark_table_markdown();

}  // namespace trainbench
