// launch: start the local ranks of a data-parallel job and supervise them (parallel/launcher.h).
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "parallel/launcher.h"

namespace trainbench::cli {

void add_launch_command(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand(
      "launch",
      "Run a trainbench command as several data-parallel ranks: trainbench launch --nproc 2 -- run resnet --preset mini");
  auto options = std::make_shared<parallel::LaunchOptions>();
  auto grace_seconds = std::make_shared<double>(30);
  command->add_option("--nproc", options->processes_per_node, "Ranks to start on this machine")
      ->capture_default_str()->check(whole_number(1, 4096));
  command->add_option("--nnodes", options->nodes, "Machines in the job (run this command once on each)")
      ->capture_default_str()->check(whole_number(1));
  command->add_option("--node-rank", options->node_rank, "This machine's index, 0..nnodes-1")->capture_default_str()
      ->check(whole_number(0));
  command->add_option("--master-addr", options->master_addr, "Address of node 0, where rank 0 hosts the rendezvous store")
      ->capture_default_str();
  command->add_option("--master-port", options->master_port, "Rendezvous port (default: a free local port on one node)")
      ->check(whole_number(1, 65535));
  command->add_option("--grace", *grace_seconds,
                      "Seconds the other ranks get to stop on their own after one fails, before they are terminated")
      ->capture_default_str()->check(number_at_least(0));
  command->add_option("command", options->arguments, "The trainbench command each rank runs (after --)")->required();
  command->callback([options, grace_seconds, &context] {
    options->program = std::filesystem::read_symlink("/proc/self/exe").string();
    options->grace = std::chrono::milliseconds(static_cast<int64_t>(*grace_seconds * 1000));
    context.exit_code = parallel::launch_ranks(*options, std::cerr);
  });
}

}  // namespace trainbench::cli
