// run, bench, data and benchmarks: the commands that train, measure, generate and list. No LibTorch here:
// ranks come as a RankSession, benchmarks through the registry.
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "cli/commands.h"
#include "harness/runner.h"
#include "parallel/rank_environment.h"
#include "predict/measurements.h"
#include "probes/compute_probe.h"
#include "review/compliance.h"
#include "review/ruleset.h"
#include "review/ruleset_choice.h"
#include "review/scoring.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "workloads/ranks.h"
#include "workloads/registry.h"

namespace trainbench::cli {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultDatasetSeed = 1;
constexpr const char* kCompleteMarker = ".complete";

// Generates a preset's dataset and then marks it complete, so a later run can tell it from an interrupted one.
void generate_dataset(const WorkloadEntry& entry, const Config& config, const fs::path& dir, int64_t seed) {
  entry.make_dataset(config, dir.string(), seed);
  write_file_atomically((dir / kCompleteMarker).string(), "");
}

std::string default_system_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string name;
  for (const char c : std::string(host)) name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return name.empty() ? "local" : name;
}

// The machine's cores, shared among the ranks started on it.
int default_threads() {
  const int local_ranks = parallel::detect_rank_environment().local_world;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local_ranks);
}

// The results folders a run creates (--out, the system's, the benchmark's), created before any training so
// that an unwritable --out fails first. Those still empty when the run ends (it was refused while the workload
// opened its data, before any log was reserved) are removed again: a refused run leaves nothing behind.
class ResultFolders {
 public:
  ResultFolders(const fs::path& dir, const std::string& flag) {
    for (fs::path level = dir; !level.empty() && !fs::exists(level); level = level.parent_path()) created_.push_back(level);
    std::error_code cannot_create;
    if (!fs::create_directories(dir, cannot_create) && cannot_create)
      fail(flag, "cannot create " + dir.string() + ": " + cannot_create.message());
  }
  ~ResultFolders() {
    for (const fs::path& level : created_) {  // deepest first
      std::error_code ignored;
      if (!fs::is_empty(level, ignored) || ignored || !fs::remove(level, ignored)) break;
    }
  }
  ResultFolders(const ResultFolders&) = delete;
  ResultFolders& operator=(const ResultFolders&) = delete;

 private:
  std::vector<fs::path> created_;
};

// Flags shared by run and bench: which benchmark, which preset, which data, which machine settings.
struct WorkloadFlags {
  std::string benchmark;
  std::string preset = "mini";
  std::string data_dir;
  std::string data_root = "trainbench-data";
  std::vector<std::string> overrides;
  std::string precision;  // empty: the preset's
  int threads = default_threads();
  std::string device = "auto";
  bool skip_corrupt = false;
  double comm_timeout = 300;
  bool help_settings = false;
  std::string weights;

  void add_to(CLI::App* command) {
    command->add_option("benchmark", benchmark, "Benchmark (" + benchmark_names() + ")")->required();
    command->add_option("--preset", preset,
                        "Preset: tiny (the test suite's seconds-long gate), mini (generated data, minutes here) or "
                        "reference (the real benchmark)")
        ->capture_default_str();
    std::string data_help = "Dataset directory; default: the preset's generated dataset under --data-root. It holds";
    for (const auto& entry : workload_registry())
      if (entry.uses_dataset()) data_help += "\n  " + entry.name + ": " + entry.dataset;
    const std::string without_data = benchmark_names([](const WorkloadEntry& entry) { return !entry.uses_dataset(); });
    if (!without_data.empty()) data_help += "\n  (" + without_data + ": no dataset)";
    command->add_option("--data", data_dir, data_help);
    command->add_option("--data-root", data_root, "Where generated datasets are kept")->capture_default_str();
    command->add_option("--set", overrides, "Override a preset setting, key=value (repeatable); --help-settings lists them");
    command->add_flag("--help-settings", help_settings,
                      "Print every setting of the preset: its value, what it may be and what it is; then exit");
    command->add_option("--precision", precision,
                        "Training precision, as --set precision=...: fp32, bf16 (autocast, CPU or CUDA) or fp16 (autocast with "
                        "dynamic loss scaling, CUDA); default: the preset's (fp32, reference presets fp16 as NVIDIA trained)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
    command->add_option("--threads", threads, "Compute threads (torch::set_num_threads), at most the CPUs this process may use")
        ->capture_default_str()->check(thread_count());
    command->add_option("--device", device, "Compute device: auto (CUDA when available), cpu or cuda")
        ->capture_default_str()->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    command
        ->add_option("--weights", weights,
                     "Start from this model file (`trainbench checkpoint export`'s format: a state dict under the "
                     "official implementation's names; MiniGo: a .minigo file; GPT-3: a Megatron distributed "
                     "checkpoint directory) instead of the seeded initialization")
        ->check(CLI::ExistingPath);
    command->add_flag("--skip-corrupt", skip_corrupt, "Skip unreadable images and count them in the log instead of failing");
    command->add_option("--comm-timeout", comm_timeout,
                        "With several ranks: seconds a collective may wait for a rank before the run aborts naming it")
        ->capture_default_str()->check(number_above(0));
  }

  // --help-settings: true when the table was printed and the command has nothing more to do.
  bool printed_settings_help(const WorkloadEntry& entry) const {
    if (help_settings) std::cout << settings_help(entry, preset);
    return help_settings;
  }

  // Resolves the dataset: --data, or the preset's generated dataset, which generate_data() makes on first use
  // once the workload has checked its settings.
  WorkloadSettings settings(const WorkloadEntry& entry, bool require_data) const {
    for (const std::string& assignment : overrides) require_utf8("--set " + assignment.substr(0, assignment.find('=')), assignment);
    std::vector<std::string> effective_overrides = overrides;
    if (!precision.empty()) effective_overrides.push_back("precision=" + precision);
    WorkloadSettings settings;
    settings.config = preset_config(entry, preset, effective_overrides);
    settings.threads = threads;
    settings.device = device;
    settings.skip_corrupt = skip_corrupt;
    settings.weights = weights;
    if (!entry.uses_dataset()) {
      if (!data_dir.empty()) fail("--data", entry.name + " has no dataset (it learns from its own self-play)");
    } else if (!data_dir.empty()) {
      settings.data_dir = data_dir;
    } else if (settings.config.values().contains("dataset")) {
      settings.data_dir = generated_dataset_dir(entry).string();
    } else if (require_data) {
      fail("--data", "preset '" + preset + "' of " + entry.name + " trains on the real dataset; pass its directory");
    }
    return settings;
  }

  fs::path generated_dataset_dir(const WorkloadEntry& entry) const {
    return fs::path(data_root) / (entry.name + "-" + preset + "-seed" + std::to_string(kDefaultDatasetSeed));
  }

  // Makes the preset's generated dataset when the run uses it and it is not there yet. With several ranks on
  // one machine, local rank 0 generates and the others wait for its marker.
  void generate_data(const WorkloadEntry& entry, const WorkloadSettings& settings) const {
    if (!data_dir.empty() || settings.data_dir.empty()) return;  // --data, or no dataset
    const fs::path dir = settings.data_dir;
    if (fs::exists(dir / kCompleteMarker)) return;
    if (parallel::detect_rank_environment().local_rank != 0) {
      std::cerr << "Waiting for local rank 0 to generate " << dir.string() << " ...\n";
      while (!fs::exists(dir / kCompleteMarker)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return;
    }
    std::cerr << "Generating the " << entry.name << " " << preset << " dataset in " << dir.string() << " ...\n";
    fs::remove_all(dir);  // an earlier, interrupted generation
    generate_dataset(entry, settings.config, dir, kDefaultDatasetSeed);
  }
};

// "run 0 (seed 7): reached the target (eval_accuracy >= 0.96) in 1.234 minutes at epoch 4, eval 0.9612,
// 5012.3 samples/s -> results/box/resnet/result_0.txt", then where the timed region went and what other
// processes took of its CPUs (with a warning on stderr past 10%).
void print_run_summary(int run, const RunOptions& options, const RunOutcome& outcome) {
  // An interrupted run did not fail to converge: it was stopped, and its summary says so.
  std::string result = outcome.interrupted_by ? "was aborted by signal " + std::to_string(outcome.interrupted_by) + " before reaching the target"
                       : outcome.converged    ? "reached the target"
                                              : "did NOT reach the target";
  result += " (" + outcome.target.text() + ")";
  std::string progress;
  if (!outcome.last_metric.parts().empty())
    progress = " at " + describe_position(outcome.unit, outcome.convergence_epoch) + ", eval " + outcome.last_metric.text();
  else
    progress = ", before its first evaluation";
  std::string rate;
  if (outcome.samples_per_second > 0) {
    char text[64];
    std::snprintf(text, sizeof text, ", %.1f samples/s", outcome.samples_per_second);
    rate = text;
  }
  std::printf("run %d (seed %lld): %s in %.3f minutes%s%s -> %s\n", run, static_cast<long long>(options.seed),
              result.c_str(), outcome.minutes, progress.c_str(), rate.c_str(), outcome.result_path.c_str());
  if (outcome.time_split.total() > 0)
    std::printf("  timed region %.3f s: %s\n", outcome.time_split.total(), outcome.time_split.text().c_str());
  if (outcome.cpu_contention.measured())
    std::printf("  taken from this run's CPUs: %s\n", outcome.cpu_contention.text().c_str());
  if (const std::string warning = outcome.cpu_contention.warning(); !warning.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr, "trainbench: warning: run %d: %s\n", run, warning.c_str());
  }
}

// A directory the command writes into after its work (--save-model): what is there, or the first part of the path
// that is, must be a directory, checked before training rather than after it.
void require_directory_or_absent(const std::string& flag, const fs::path& dir) {
  for (fs::path level = dir; !level.empty(); level = level.parent_path()) {
    std::error_code error;
    const fs::file_status status = fs::status(level, error);
    if (error && error != std::errc::no_such_file_or_directory)
      fail(flag + " " + dir.string(), level.string() + ": " + error.message());
    if (fs::exists(status)) {
      if (!fs::is_directory(status))
        fail(flag + " " + dir.string(), level.string() + " is not a directory (models are written into DIR)");
      return;
    }
    if (level == level.parent_path()) return;
  }
}

// A log that review would refuse says so when the run ends, not when a submitter reviews it: e.g. a setting
// the rules constrain, moved by --set or by the world size (Mask R-CNN's num_image_candidates).
void warn_if_not_compliant(int run, const std::string& log_path) {
  if (review::embedded_ruleset_versions().empty() || log_path.empty() || !fs::exists(log_path)) return;
  // The round whose rules have the log's benchmark (gpt3: 3.0.0; the v1.1 benchmarks: 1.1.0).
  const std::string version = review::choose_ruleset_version(review::logged_benchmarks({log_path}));
  const review::RunReview checked = review::review_log_file(log_path, review::load_ruleset(version));
  if (checked.compliant()) return;
  std::fflush(stdout);
  for (const review::Finding& finding : checked.findings)
    if (finding.severity == review::Severity::kError)
      std::fprintf(stderr, "trainbench: warning: run %d: its log fails review: %s\n", run, review::format_finding(finding).c_str());
  std::fprintf(stderr, "trainbench: warning: run %d: `trainbench review --log %s` lists every finding\n", run,
               printable(log_path, 4096).c_str());
}

// A system name is a folder under --out and the log's submission_platform: one plain path component.
void check_system_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..")
    fail("--system '" + name + "'", "expected a name for the results folder, not empty, '.' or '..'");
  for (const char c : name)
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      fail("--system", "expected a single folder name without '/' or control characters (newline, tab)");
  require_utf8("--system", name);
}

void add_run_command(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand("run", "Time-to-train: train a benchmark to its target and write MLPerf result logs");
  auto flags = std::make_shared<WorkloadFlags>();
  auto runs = std::make_shared<int>(1);
  auto out_dir = std::make_shared<std::string>("results");
  auto system = std::make_shared<std::string>(default_system_name());
  auto seed = std::make_shared<int64_t>(0);
  auto submission = std::make_shared<SubmissionInfo>();
  auto echo_log = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  flags->add_to(command);
  command->add_option("--runs", *runs, "Number of runs (MLPerf: 5 for resnet); prints the olympic mean")
      ->capture_default_str()->check(whole_number(1));
  command->add_option("--out", *out_dir, "Results root: logs go to <out>/<system>/<benchmark>/result_N.txt")->capture_default_str();
  command->add_option("--system", *system, "System name (submission_platform, results folder)")->capture_default_str();
  auto* seed_option = command->add_option("--seed", *seed, "Seed of the first run (run i uses seed+i), 0 or more; default: random")
                          ->check(whole_number(0, INT32_MAX));
  command->add_option("--org", submission->org, "submission_org")->capture_default_str();
  command->add_option("--division", submission->division, "submission_division")
      ->capture_default_str()->check(CLI::IsMember({"closed", "open"}));
  command->add_option("--status", submission->status, "submission_status")
      ->capture_default_str()->check(CLI::IsMember({"onprem", "cloud", "preview", "research"}));
  auto save_model = std::make_shared<std::string>();
  command->add_option(
      "--save-model", *save_model,
      "After each run, write its final model to DIR/<benchmark>_seed<seed>.pt as a state dict under the "
      "official implementation's names (`checkpoint export`'s format; MiniGo: a .minigo file; GPT-3: "
      "DIR/gpt3_seed<seed>, a Megatron distributed checkpoint)");
  command->add_flag("--echo-log", *echo_log, "Also print the :::MLLOG lines to stdout");
  command->add_flag("--quiet", *quiet, "No progress line");
  command->callback([=, &context] {
    check_system_name(*system);
    require_utf8("--org", submission->org);
    if (!save_model->empty()) require_directory_or_absent("--save-model", *save_model);
    const WorkloadEntry& entry = find_workload(flags->benchmark);
    if (flags->printed_settings_help(entry)) return;
    WorkloadSettings settings = flags->settings(entry, true);
    const auto ranks = RankSession::join(flags->comm_timeout);
    settings.communicator = ranks->communicator();
    const bool lead = ranks->rank() == 0;  // only rank 0 writes logs and prints
    const fs::path result_dir = fs::path(*out_dir) / *system / entry.name;
    std::vector<double> shared_seed{static_cast<double>(seed_option->count() > 0 ? *seed : std::random_device{}() & 0x7fffffff)};
    ranks->broadcast(shared_seed, 0);  // every rank must shuffle and augment alike
    const auto first_seed = static_cast<int64_t>(shared_seed[0]);
    // The first run's workload checks its settings (batch over ranks x accumulation, precision on this device)
    // before anything is written or generated, so a refused run leaves no folder behind.
    settings.seed = first_seed;
    std::unique_ptr<Workload> workload = entry.create(settings);
    flags->generate_data(entry, settings);
    std::optional<ResultFolders> folders;
    if (lead) folders.emplace(result_dir, "--out " + *out_dir);  // before any training

    std::vector<review::RunTime> times;
    for (int run = 0; run < *runs; ++run) {
      RunOptions options;
      options.submission = *submission;
      options.submission.platform = *system;
      options.seed = first_seed + run;
      options.result_dir = result_dir.string();  // each run reserves its own result_N.txt
      options.echo_log = *echo_log;
      options.show_progress = !*quiet;
      options.ranks = ranks.get();
      settings.seed = options.seed;
      if (run > 0) workload = entry.create(settings);
      const RunOutcome outcome = run_benchmark(*workload, options);
      const bool saves_model = !save_model->empty() && !outcome.interrupted_by;
      const std::string model_path =
          (fs::path(*save_model) / (entry.name + "_seed" + std::to_string(options.seed) + entry.model_file_suffix))
              .string();
      if (!lead) {
        if (saves_model) workload->save_weights(model_path);  // a split model is gathered from every rank
        if (outcome.interrupted_by) {
          context.exit_code = 128 + outcome.interrupted_by;
          return;
        }
        continue;
      }
      print_run_summary(run, options, outcome);
      warn_if_not_compliant(run, outcome.result_path);
      if (saves_model) {
        fs::create_directories(*save_model);
        workload->save_weights(model_path);
        std::printf("  model -> %s\n", model_path.c_str());
      }
      std::fflush(stdout);
      if (outcome.interrupted_by) {
        std::fprintf(stderr, "trainbench: run %d aborted by signal %d; its log ends with run_stop status aborted\n", run,
                     outcome.interrupted_by);
        context.exit_code = 128 + outcome.interrupted_by;
        return;
      }
      times.push_back({outcome.minutes, outcome.converged});
      if (!outcome.converged) context.exit_code = 1;
    }
    if (lead && times.size() >= 3) {
      const review::OlympicScore score = review::olympic_score(times);
      if (score.mean_minutes)
        std::printf("olympic mean of %d runs (fastest and slowest dropped): %.3f minutes\n", score.runs, *score.mean_minutes);
      else
        std::printf("olympic mean: invalid (%d of %d runs did not converge)\n", score.non_converged, score.runs);
    }
  });
}

// Writes to two stream buffers, so bench's lines show as they come and can be read back afterwards.
struct TeeBuffer : std::streambuf {
  TeeBuffer(std::streambuf* first, std::streambuf* second) : first(first), second(second) {}
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    const bool written = first->sputc(static_cast<char>(c)) != traits_type::eof() &&
                         second->sputc(static_cast<char>(c)) != traits_type::eof();
    return written ? c : traits_type::eof();
  }
  int sync() override { return first->pubsync() == 0 && second->pubsync() == 0 ? 0 : -1; }
  std::streambuf* first;
  std::streambuf* second;
};

struct PlanFlag {
  int64_t tensor = 0, pipeline = 0, data = 0;
};

// bench --plan tp=T,pp=P,dp=D, each a whole number from 1 to 65536.
PlanFlag parse_plan_flag(const std::string& text) {
  PlanFlag plan;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t equals = item.find('=');
    const std::string key = item.substr(0, equals), value = equals == std::string::npos ? "" : item.substr(equals + 1);
    int64_t* field = key == "tp" ? &plan.tensor : key == "pp" ? &plan.pipeline : key == "dp" ? &plan.data : nullptr;
    if (!field) fail("--plan", "expected tp=T,pp=P,dp=D; \"" + item + "\" is none of them");
    if (value.empty() || value.size() > 5 || value.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(value) < 1 || std::stoll(value) > 65536)
      fail("--plan", key + " must be a whole number from 1 to 65536, got \"" + value + "\"");
    *field = std::stoll(value);
  }
  if (!plan.tensor || !plan.pipeline || !plan.data)
    fail("--plan", "expected tp=T,pp=P,dp=D, all three; got \"" + text + "\"");
  if (plan.tensor * plan.pipeline * plan.data > (1 << 20)) fail("--plan", "more than 1,048,576 ranks");
  return plan;
}

void add_bench_command(CLI::App& app) {
  auto* command = app.add_subcommand("bench", "Throughput benchmark: training images/s and data-pipeline images/s (no log, no target)");
  auto flags = std::make_shared<WorkloadFlags>();
  auto bench = std::make_shared<BenchSettings>();
  flags->add_to(command);
  command->add_option("--steps", bench->steps, "Timed steps (median reported)")->capture_default_str()->check(whole_number(1));
  command->add_option("--warmup", bench->warmup_steps, "Untimed warm-up steps")->capture_default_str()->check(whole_number(0));
  auto peak_path = std::make_shared<std::string>();
  command->add_option("--peak", *peak_path, "A `trainbench probe compute --json` file: also print achieved FLOP/s as a share of its measured fp32 peak");
  auto json_path = std::make_shared<std::string>();
  command
      ->add_option("--json", *json_path,
                   "Also write the training step (batch, ranks, median step seconds, samples/s) to FILE, for "
                   "`trainbench predict --bench`")
      ->check(output_file());
  command
      ->add_option(
          "--profile", bench->profile_path,
          "After the timed steps, run as many under LibTorch's profiler: write their Chrome trace to this file "
          "and print the operators by self time")
      ->check(output_file());
  command->add_flag("--memory", bench->memory,
                    "Instead of timing: the per-rank peak memory of one training step at the preset's batch, "
                    "gradient_accumulation_steps and precision (CPU: resident high-water; CUDA: the allocator's peak)");
  auto shard_plan_ranks = std::make_shared<int>(0);
  command
      ->add_option("--shard-plan", *shard_plan_ranks,
                   "Instead of timing: how the model's parameters would lie over N ranks with these settings, each "
                   "rank's share in bytes, and what a step exchanges (dlrm's embedding tables; bert's "
                   "tensor_parallel x pipeline_parallel plan; nothing is allocated)")
      ->check(whole_number(1));
  auto plan_text = std::make_shared<std::string>();
  command->add_option("--plan", *plan_text,
                      "Instead of timing: --shard-plan for the layout tp=T,pp=P,dp=D (tensor_parallel T, "
                      "pipeline_parallel P, T x P x D ranks; nothing is allocated)");
  command->callback([=] {
    if (!peak_path->empty()) bench->peak_flops = probes::read_measured_peak(*peak_path, "fp32");
    if (!plan_text->empty()) {
      if (*shard_plan_ranks > 0) fail("--plan", "gives the ranks itself; it cannot be combined with --shard-plan");
      const PlanFlag plan = parse_plan_flag(*plan_text);
      flags->overrides.push_back("tensor_parallel=" + std::to_string(plan.tensor));
      flags->overrides.push_back("pipeline_parallel=" + std::to_string(plan.pipeline));
      *shard_plan_ranks = static_cast<int>(plan.tensor * plan.pipeline * plan.data);
    }
    if (bench->memory && !bench->profile_path.empty()) fail("--memory", "measures one step; it cannot be combined with --profile");
    const WorkloadEntry& entry = find_workload(flags->benchmark);
    if (flags->printed_settings_help(entry)) return;
    if (*shard_plan_ranks > 0) {
      if (!entry.print_shard_plan)
        fail("--shard-plan",
             entry.name +
                 " keeps its whole model on every rank (data parallel); dlrm shards its embedding tables "
                 "and bert splits its layers (tensor_parallel, pipeline_parallel)");
      const Config config = preset_config(entry, flags->preset, flags->overrides);
      std::cout << entry.name << " " << flags->preset << ":\n";
      entry.print_shard_plan(config, *shard_plan_ranks, std::cout);
      return;
    }
    WorkloadSettings settings = flags->settings(entry, false);
    const auto ranks = RankSession::join(flags->comm_timeout);
    settings.communicator = ranks->communicator();
    entry.create(settings);  // the workload's own checks of its settings, before a dataset is generated
    flags->generate_data(entry, settings);
    std::ostringstream other_ranks_output;  // ranks other than 0 measure alongside but do not print
    const bool lead = ranks->rank() == 0;
    // With --json, rank 0's lines go to the screen and to a copy the training line is read back from.
    std::ostringstream copy;
    TeeBuffer tee_buffer(std::cout.rdbuf(), copy.rdbuf());
    std::ostream tee(&tee_buffer);
    std::ostream& out = !lead ? other_ranks_output : json_path->empty() ? std::cout : tee;
    out << entry.name << " " << flags->preset << ":\n";
    bench_benchmark(entry, settings, *bench, out);
    if (!lead || json_path->empty()) return;
    const auto measurement = predict::parse_bench_output(copy.str(), entry.name, flags->preset);
    if (!measurement) fail("--json", "bench printed no training line to read the step time from");
    write_file_atomically(*json_path, predict::to_json(*measurement).dump(2) + "\n");
    std::cout << "wrote " << *json_path << "\n";
  });
}

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Datasets: generate a preset's mini dataset, or prepare a real one");
  data->require_subcommand(1);
  auto* make = data->add_subcommand("make", "Write a preset's generated dataset (deterministic for a seed)");
  auto benchmark = std::make_shared<std::string>();
  auto preset = std::make_shared<std::string>("mini");
  auto out = std::make_shared<std::string>();
  auto seed = std::make_shared<int64_t>(kDefaultDatasetSeed);
  make->add_option("benchmark", *benchmark,
                   "Benchmark (" + benchmark_names([](const WorkloadEntry& entry) { return bool(entry.make_dataset); }) + ")")
      ->required();
  make->add_option("--out", *out, "Output directory (must not exist or be empty)")->required();
  make->add_option("--preset", *preset, "Preset whose dataset to generate")->capture_default_str();
  make->add_option("--seed", *seed, "Dataset seed")->capture_default_str()->check(whole_number(0));
  auto overrides = std::make_shared<std::vector<std::string>>();
  make->add_option("--set", *overrides, "Override a preset setting, e.g. dataset.train_per_class=100 (repeatable)");
  make->callback([=] {
    const WorkloadEntry& entry = find_workload(*benchmark);
    if (!entry.make_dataset) fail(entry.name, "has no dataset to generate (it learns from its own self-play)");
    const Config config = preset_config(entry, *preset, *overrides);
    if (fs::exists(*out) && !fs::is_empty(*out)) fail("--out " + *out, "exists and is not empty; choose a new directory");
    generate_dataset(entry, config, *out, *seed);
    std::cout << "wrote the " << entry.name << " " << *preset << " dataset (seed " << *seed << ") to " << *out << "\n";
  });

  auto* prepare = data->add_subcommand("prepare", "Convert a benchmark's real dataset once into the form it trains from");
  auto prepare_benchmark = std::make_shared<std::string>();
  auto prepare_preset = std::make_shared<std::string>("reference");
  auto in = std::make_shared<std::string>();
  auto prepared = std::make_shared<std::string>();
  auto prepare_overrides = std::make_shared<std::vector<std::string>>();
  prepare->add_option("benchmark", *prepare_benchmark,
                      "Benchmark (" + benchmark_names([](const WorkloadEntry& entry) { return bool(entry.prepare_dataset); }) + ")")
      ->required();
  prepare
      ->add_option("--in", *in,
                   "Directory of the real dataset as published (dlrm: Criteo day files day_0 ... day_23, plain or .gz; "
                   "gpt3: the C4 folder of the reference's README)")
      ->required();
  prepare->add_option("--out", *prepared, "Output directory for the prepared files")->required();
  prepare->add_option("--preset", *prepare_preset, "Preset whose settings (e.g. table sizes) apply")->capture_default_str();
  prepare->add_option("--set", *prepare_overrides, "Override a preset setting, key=value (repeatable)");
  auto spm = std::make_shared<std::string>();
  prepare
      ->add_option("--spm", *spm,
                   "SentencePiece model to tokenize with, as --set tokenizer_model=MODEL (gpt3: the reference's "
                   "c4_en_301_5Mexp2_spm.model, default C4_PATH/tokenizers/c4_spm/sentencepiece.model; rnnt: "
                   "librispeech1023.model, default: trained here)")
      ->check(CLI::ExistingFile);
  prepare->callback([=] {
    const WorkloadEntry& entry = find_workload(*prepare_benchmark);
    if (!entry.prepare_dataset) fail(entry.name, "reads its dataset as published; there is nothing to prepare");
    std::vector<std::string> overrides = *prepare_overrides;
    if (!spm->empty()) {
      if (!preset_config(entry, *prepare_preset, {}).values().contains("tokenizer_model"))
        fail("--spm", entry.name + " tokenizes nothing when it prepares its dataset (gpt3 and rnnt do)");
      overrides.push_back("tokenizer_model=" + *spm);
    }
    const Config config = preset_config(entry, *prepare_preset, overrides);
    entry.prepare_dataset(config, *in, *prepared);
    std::cout << "prepared the " << entry.name << " dataset from " << *in << " in " << *prepared << "\n";
  });
}

void add_benchmarks_command(CLI::App& app) {
  auto* command = app.add_subcommand("benchmarks", "List the benchmarks, their presets and datasets");
  auto markdown = std::make_shared<bool>(false);
  command->add_flag("--markdown", *markdown, "Print the Markdown table of docs/benchmarks.md");
  command->callback([=] {
    if (*markdown) {
      std::cout << benchmark_table_markdown();
      return;
    }
    for (const auto& entry : workload_registry()) {
      std::printf("%-9s %s (presets: %s)\n", entry.name.c_str(), entry.summary.c_str(), preset_list(entry).c_str());
    }
  });
}

}  // namespace

// How long an export's ranks wait for each other (building and gathering a model; no training).
constexpr double kExportTimeoutSeconds = 600;

void add_checkpoint_command(CLI::App& app) {
  auto* checkpoint = app.add_subcommand("checkpoint", "Model weights in and out as PyTorch state dicts, under the official implementation's names");
  checkpoint->require_subcommand(1);
  auto* command = checkpoint->add_subcommand(
      "export", "Write the model a run starts from (the seeded initialization, or --weights) as a state dict that "
                "Python's torch.load reads and the official model class loads with strict=True");
  auto benchmark = std::make_shared<std::string>();
  auto preset = std::make_shared<std::string>("mini");
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto weights = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto seed = std::make_shared<int64_t>(0);
  command->add_option("benchmark", *benchmark,
                      "Benchmark (" + benchmark_names() + ")")
      ->required();
  command->add_option("--preset", *preset, "Preset whose model to build")->capture_default_str();
  command->add_option("--set", *overrides, "Override a preset setting, key=value (repeatable)");
  command->add_option("--seed", *seed, "Seed of the initialization, as run's --seed")->capture_default_str()->check(whole_number(0, INT32_MAX));
  command->add_option("--weights", *weights, "Start from this model file instead (e.g. to check or re-save one)")
      ->check(CLI::ExistingPath);
  command
      ->add_option("--out", *out,
                   "The file to write (a .pt state dict; MiniGo: a .minigo file; GPT-3: a new "
                   "distributed-checkpoint directory)")
      ->required()
      ->check(output_file());
  command->callback([=] {
    const WorkloadEntry& entry = find_workload(*benchmark);
    WorkloadSettings settings;
    settings.config = preset_config(entry, *preset, *overrides);
    settings.seed = *seed;
    settings.weights = *weights;
    // Under `trainbench launch` the ranks build a split model's parts (tensor_parallel, pipeline_parallel) and
    // rank 0 writes the whole model gathered from them.
    const auto ranks = RankSession::join(kExportTimeoutSeconds);
    settings.communicator = ranks->communicator();
    export_model(entry, settings, *out);
    if (ranks->rank() != 0) return;
    std::cout << "wrote the " << entry.name << " " << *preset << " model (" << (weights->empty() ? "seed " + std::to_string(*seed) : *weights)
              << ") to " << *out << "\n";
  });
}

void add_training_commands(CLI::App& app, CommandContext& context) {
  add_run_command(app, context);
  add_checkpoint_command(app);
  add_bench_command(app);
  add_data_command(app);
  add_benchmarks_command(app);
}

}  // namespace trainbench::cli
