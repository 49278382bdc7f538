// probe comm: collective bandwidth through the training communicator (probes/comm_probe.h).
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "dist/communicator.h"
#include "probes/comm_probe.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::cli {

namespace {

// "256M" -> 268435456; K, M and G are binary multiples, as in nccl-tests.
int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  size_t end = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &end);
  } catch (const std::exception&) {
  }
  int64_t multiplier = 1;
  if (end + 1 == text.size()) {
    switch (text[end]) {
      case 'K': case 'k': multiplier = 1LL << 10; break;
      case 'M': case 'm': multiplier = 1LL << 20; break;
      case 'G': case 'g': multiplier = 1LL << 30; break;
      default: value = -1;
    }
  } else if (end != text.size()) {
    value = -1;
  }
  if (value < 1) fail(flag + " " + text, "expected a positive byte count such as 8, 64K, 256M or 1G");
  return value * multiplier;
}

}  // namespace

void add_comm_probe_command(CLI::App& probe, CommandContext& context) {
  auto* command = probe.add_subcommand(
      "comm", "Collective bandwidth (nccl-tests style), across the ranks of `trainbench launch` or a cluster launcher");
  auto options = std::make_shared<probes::CommProbeOptions>();
  auto min_text = std::make_shared<std::string>("8"), max_text = std::make_shared<std::string>("256M");
  auto json_path = std::make_shared<std::string>();
  auto timeout_seconds = std::make_shared<double>(300);
  auto check = std::make_shared<int>(1);
  command->add_option("-b,--minbytes", *min_text, "Smallest message size")->capture_default_str();
  command->add_option("-e,--maxbytes", *max_text, "Largest message size")->capture_default_str();
  command->add_option("-f,--stepfactor", options->factor, "Size multiplier between rows")->capture_default_str();
  command->add_option("-n,--iters", options->iterations, "Timed iterations per size")->capture_default_str();
  command->add_option("-w,--warmup_iters", options->warmup_iterations, "Untimed iterations per size")->capture_default_str();
  command->add_option("-d,--datatype", options->dtype, "float, double or int32")->capture_default_str();
  command->add_option("-c,--check", *check, "Check every result element (1) or not (0)")->capture_default_str();
  command->add_option("--ops", options->operations, "Operations to run")->delimiter(',')->capture_default_str();
  command->add_option("--device", options->device, "auto, cpu or cuda")->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command->add_option("--threads", options->threads, "Compute threads per rank (local reductions)")->capture_default_str();
  command->add_option("--json", *json_path, "Also write the results, arguments, environment and versions as JSON");
  command->add_option("--comm-timeout", *timeout_seconds, "Seconds a collective may wait before failing")->capture_default_str();
  command->callback([=, &context] {
    options->min_bytes = parse_byte_size(*min_text, "--minbytes");
    options->max_bytes = parse_byte_size(*max_text, "--maxbytes");
    options->check = *check != 0;
    dist::CommunicatorOptions communicator_options;
    communicator_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_seconds * 1000));
    const auto communicator = dist::connect_from_environment(communicator_options);
    std::ostringstream other_ranks_output;
    std::ostream& out = communicator->rank() == 0 ? std::cout : other_ranks_output;
    const probes::CommProbeResult result = probes::run_comm_probe(*communicator, *options, out);
    if (communicator->rank() == 0 && !json_path->empty()) {
      write_file_atomically(*json_path, result.json.dump(2) + "\n");
      std::cout << "# JSON: " << *json_path << "\n";
    }
    if (result.wrong_total > 0) {
      if (communicator->rank() == 0) std::cerr << "trainbench probe comm: " << result.wrong_total << " wrong elements\n";
      context.exit_code = 1;
    }
  });
}

}  // namespace trainbench::cli
