// probe: measurements of the machine itself (compute peak, storage), as opposed to a benchmark's training.
// Every probe prints a human-readable table and, with --json FILE, writes a machine-readable copy with its
// arguments and environment; a new probe is one more add_*_probe function registered below.
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "probes/comm_probe.h"
#include "probes/compute_probe.h"
#include "probes/environment.h"
#include "probes/storage_probe.h"

namespace trainbench::cli {

namespace {

int all_cores() { return std::max(1u, std::thread::hardware_concurrency()); }

// The flag every probe shares: where its JSON copy goes.
struct ProbeOutput {
  std::string json_path;

  void add_to(CLI::App* command) {
    command
        ->add_option("--json", json_path,
                     "Also write a machine-readable copy (arguments, environment, results) to FILE")
        ->check(output_file());
  }
  void write(const nlohmann::ordered_json& report) const {
    if (json_path.empty()) return;
    probes::write_json_report(json_path, report);
    std::cout << "wrote " << json_path << "\n";
  }
};

void add_compute_probe(CLI::App& probe) {
  auto* command = probe.add_subcommand(
      "compute", "Measured peak FLOP/s: square GEMMs and ResNet-50 convolutions in fp32, and bf16/fp16/tf32 where the device has them");
  auto options = std::make_shared<probes::ComputeProbeOptions>();
  auto output = std::make_shared<ProbeOutput>();
  options->threads = all_cores();
  command->add_option("--device", options->device, "auto (CUDA when available), cpu or cuda")
      ->capture_default_str()->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command->add_option("--threads", options->threads, "Compute threads (torch::set_num_threads)")->capture_default_str()
      ->check(thread_count());
  command->add_option("--seconds", options->seconds, "Timed seconds per row, after warm-up")->capture_default_str()
      ->check(number_above(0));
  output->add_to(command);
  command->callback([=] {
    const probes::ComputeProbeResult result = probes::run_compute_probe(*options, std::cout);
    output->write(probes::to_json(*options, result));
  });
}

void add_storage_probe(CLI::App& probe, CommandContext& context) {
  auto* command = probe.add_subcommand(
      "storage", "Dataset read throughput (whole files, random order, N threads, cold cache when it can be verified) and "
                 "checkpoint write (with fsync) and read-back throughput");
  auto reads = std::make_shared<probes::DatasetReadOptions>();
  auto checkpoint_size = std::make_shared<std::string>("1G");
  auto checkpoint_dir = std::make_shared<std::string>();
  auto no_evict = std::make_shared<bool>(false);
  auto output = std::make_shared<ProbeOutput>();
  reads->threads = all_cores();
  reads->files_max = 10000;
  command->add_option("--dir", reads->dir, "Dataset folder; every file under it, recursively, is a sample")->required();
  command->add_option("--threads", reads->threads, "Reader threads")->capture_default_str()->check(whole_number(1, 1024));
  command->add_option("--files-max", reads->files_max, "Read a seeded random sample of at most this many files (0: all)")
      ->capture_default_str()->check(whole_number(0));
  command->add_option("--seed", reads->seed, "Seed of the read order")->capture_default_str()->check(whole_number(0));
  command->add_option("--checkpoint-size", *checkpoint_size, "Checkpoint size: bytes, or with K, M, G, T (powers of 1024)")
      ->capture_default_str();
  command->add_option("--checkpoint-dir", *checkpoint_dir, "Where the checkpoint is written (default: --dir); it is removed afterwards");
  command->add_flag("--no-evict", *no_evict, "Do not evict the files from the page cache first (the result says warm or cold as measured)");
  output->add_to(command);
  command->callback([=, &context] {
    probes::CheckpointOptions checkpoint;
    checkpoint.bytes = probes::parse_byte_size(*checkpoint_size, "--checkpoint-size");
    checkpoint.dir = checkpoint_dir->empty() ? reads->dir : *checkpoint_dir;
    reads->evict = checkpoint.evict = !*no_evict;
    const probes::DatasetReadResult read_result = probes::probe_dataset_reads(*reads);
    probes::print_dataset_reads(*reads, read_result, std::cout);
    std::cout << std::flush;
    const probes::CheckpointResult checkpoint_result = probes::probe_checkpoint(checkpoint);
    probes::print_checkpoint(checkpoint, checkpoint_result, std::cout);
    if (!checkpoint_result.verified) context.exit_code = 1;

    nlohmann::ordered_json report;
    report["probe"] = "storage";
    report["arguments"] = {{"dir", reads->dir},
                           {"threads", reads->threads},
                           {"files_max", reads->files_max},
                           {"seed", reads->seed},
                           {"evict", reads->evict},
                           {"checkpoint_size", checkpoint.bytes},
                           {"checkpoint_dir", checkpoint.dir},
                           {"checkpoint_chunk_bytes", checkpoint.chunk_bytes}};
    auto environment = probes::host_environment();
    environment["dataset_filesystem"] = probes::filesystem_type(reads->dir);
    environment["checkpoint_filesystem"] = probes::filesystem_type(checkpoint.dir);
    report["environment"] = environment;
    report["dataset_read"] = probes::to_json(read_result);
    report["checkpoint"] = probes::to_json(checkpoint_result);
    output->write(report);
  });
}

void add_comm_probe(CLI::App& probe, CommandContext& context) {
  auto* command = probe.add_subcommand(
      "comm", "Collective bandwidth, nccl-tests style, across the ranks of `trainbench launch` or a cluster launcher");
  auto options = std::make_shared<probes::CommProbeOptions>();
  auto min_text = std::make_shared<std::string>("8"), max_text = std::make_shared<std::string>("256M");
  auto output = std::make_shared<ProbeOutput>();
  auto timeout_seconds = std::make_shared<double>(300);
  auto check = std::make_shared<int>(1);
  command->add_option("-b,--minbytes", *min_text, "Smallest message size (bytes, or with K, M, G)")->capture_default_str();
  command->add_option("-e,--maxbytes", *max_text, "Largest message size")->capture_default_str();
  command->add_option("-f,--stepfactor", options->factor, "Size multiplier between rows")->capture_default_str()->check(number_above(1));
  command->add_option("-n,--iters", options->iterations, "Timed iterations per size")->capture_default_str()->check(whole_number(1));
  command->add_option("-w,--warmup_iters", options->warmup_iterations, "Untimed iterations per size")->capture_default_str()->check(whole_number(0));
  command->add_option("-d,--datatype", options->dtype, "float, double or int32")->capture_default_str();
  command->add_option("-c,--check", *check, "Check every result element (1) or not (0)")->capture_default_str()->check(whole_number(0, 1));
  command->add_option("--ops", options->operations, "Operations to run, comma-separated")->delimiter(',')->capture_default_str();
  command->add_option("--device", options->device, "auto, cpu or cuda")->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command->add_option("--threads", options->threads, "Compute threads per rank (local reductions)")->capture_default_str()->check(thread_count());
  command->add_option("--comm-timeout", *timeout_seconds, "Seconds a collective may wait before failing")->capture_default_str()->check(number_above(0));
  command
      ->add_option("--tensor-parallel", options->tensor_parallel,
                   "Also all-reduce within tensor-parallel groups of this many neighbouring ranks and within the "
                   "data-parallel groups across them, alone and both at once (a 3-D layout's contention; "
                   "docs/parallelism.md); 1: not")
      ->capture_default_str()
      ->check(whole_number(1, 1024));
  output->add_to(command);
  command->callback([=, &context] {
    options->min_bytes = static_cast<int64_t>(probes::parse_byte_size(*min_text, "--minbytes"));
    options->max_bytes = static_cast<int64_t>(probes::parse_byte_size(*max_text, "--maxbytes"));
    options->check = *check != 0;
    probes::CommProbeResult result = probes::run_comm_probe_across_ranks(*options, *timeout_seconds, std::cout);
    const bool lead = result.lead;  // every rank measures; rank 0 prints and writes
    if (lead) {
      nlohmann::ordered_json report{{"probe", "comm"}};
      auto environment = probes::host_environment();
      environment.update(result.json["environment"]);
      report["arguments"] = result.json["arguments"];
      report["environment"] = environment;
      report["versions"] = result.json["versions"];
      report["rows"] = result.json["rows"];
      if (result.json.contains("layout_rows")) report["layout_rows"] = result.json["layout_rows"];
      report["wrong_total"] = result.wrong_total;
      output->write(report);
    }
    if (result.wrong_total > 0) {
      if (lead) std::cerr << "trainbench probe comm: " << result.wrong_total << " wrong elements\n";
      context.exit_code = 1;
    }
  });
}

}  // namespace

void add_probe_commands(CLI::App& app, CommandContext& context) {
  auto* probe = app.add_subcommand("probe", "Measure the machine: compute peak, collective bandwidth, storage throughput");
  probe->require_subcommand(1);
  add_compute_probe(*probe);
  add_comm_probe(*probe, context);
  add_storage_probe(*probe, context);
}

}  // namespace trainbench::cli
