// probe: measurements of the machine itself (compute peak, storage), as opposed to a benchmark's training.
// Every probe prints a human-readable table and, with --json FILE, writes a machine-readable copy with its
// arguments and environment; a new probe is one more add_*_probe function registered below.
#include <iostream>
#include <thread>

#include "cli/commands.h"
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
    command->add_option("--json", json_path, "Also write a machine-readable copy (arguments, environment, results) to FILE");
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
      ->check(CLI::PositiveNumber);
  command->add_option("--seconds", options->seconds, "Timed seconds per row, after warm-up")->capture_default_str()
      ->check(CLI::PositiveNumber);
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
  command->add_option("--threads", reads->threads, "Reader threads")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--files-max", reads->files_max, "Read a seeded random sample of at most this many files (0: all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  command->add_option("--seed", reads->seed, "Seed of the read order")->capture_default_str();
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

}  // namespace

void add_probe_commands(CLI::App& app, CommandContext& context) {
  auto* probe = app.add_subcommand("probe", "Measure the machine: compute peak and storage throughput");
  probe->require_subcommand(1);
  add_compute_probe(*probe);
  add_storage_probe(*probe, context);
}

}  // namespace trainbench::cli
