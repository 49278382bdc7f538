#include "parallel/rank_environment.h"

#include <cstdlib>

#include "util/error.h"

namespace trainbench::parallel {

namespace {

// Far above any world a launcher starts, and far below int's limit.
constexpr long kMostRanks = 1'000'000;

int parse_int(const EnvironmentLookup& lookup, const std::string& name, int minimum) {
  const std::string text = *lookup(name);
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') fail("environment variable " + name, "expected an integer, got \"" + text + "\"");
  if (value < minimum || value > kMostRanks)
    fail("environment variable " + name,
         "expected an integer from " + std::to_string(minimum) + " to " + std::to_string(kMostRanks) + ", got " + text);
  return static_cast<int>(value);
}

int optional_int(const EnvironmentLookup& lookup, const std::string& name, int minimum, int fallback) {
  return lookup(name) ? parse_int(lookup, name, minimum) : fallback;
}

// Slurm writes tasks per node as "4(x2),3": the count on this node's entry is enough for local_world when
// all nodes match, which is how data-parallel jobs are launched; otherwise the first entry is used.
int first_tasks_per_node(const std::string& text) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || value < 1)
    fail("environment variable SLURM_STEP_TASKS_PER_NODE", "expected e.g. \"4(x2)\", got \"" + text + "\"");
  return static_cast<int>(value);
}

void check_rank(const RankEnvironment& env, const std::string& rank_name, const std::string& world_name) {
  if (env.rank >= env.world)
    fail("environment variable " + rank_name,
         std::to_string(env.rank) + " is not below " + world_name + " = " + std::to_string(env.world));
  if (env.local_rank >= env.local_world)
    fail("local rank " + std::to_string(env.local_rank), "is not below the local world size " + std::to_string(env.local_world) +
                                                             " (from " + env.source + ")");
}

void apply_master_overrides(const EnvironmentLookup& lookup, RankEnvironment& env) {
  if (auto addr = lookup("MASTER_ADDR")) {
    if (addr->empty()) fail("environment variable MASTER_ADDR", "is empty (expected a host name or address)");
    env.master_addr = *addr;
  }
  env.master_port = optional_int(lookup, "MASTER_PORT", 1, env.master_port);
  if (env.master_port > 65535) fail("environment variable MASTER_PORT", "expected a port 1..65535, got " + std::to_string(env.master_port));
}

// torchrun's variables win over a scheduler's, which a job may set too (mpirun or srun starting torchrun-style
// ranks with -x RANK=...): they must then agree, or one launcher's ranks would be read as another's.
void check_agrees_with(const EnvironmentLookup& lookup, const RankEnvironment& env, const std::string& rank_name,
                       const std::string& world_name) {
  if (!lookup(rank_name) || !lookup(world_name)) return;
  const int rank = parse_int(lookup, rank_name, 0), world = parse_int(lookup, world_name, 1);
  if (rank != env.rank || world != env.world)
    fail("environment variables RANK/WORLD_SIZE and " + rank_name + "/" + world_name,
         "disagree (rank " + std::to_string(env.rank) + " of " + std::to_string(env.world) + " against rank " +
             std::to_string(rank) + " of " + std::to_string(world) + "); unset one launcher's variables");
}

}  // namespace

std::string first_slurm_host(const std::string& node_list) {
  const size_t bracket = node_list.find('[');
  const size_t comma = node_list.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return node_list.substr(0, comma);
  const std::string prefix = node_list.substr(0, bracket);
  const size_t end = node_list.find_first_of(",-]", bracket + 1);
  if (end == std::string::npos) fail("Slurm node list \"" + node_list + "\"", "has an unclosed '['");
  return prefix + node_list.substr(bracket + 1, end - bracket - 1);
}

RankEnvironment detect_rank_environment(const EnvironmentLookup& lookup) {
  RankEnvironment env;
  if (lookup("RANK") || lookup("WORLD_SIZE")) {
    if (!lookup("RANK") || !lookup("WORLD_SIZE"))
      fail("environment variables RANK and WORLD_SIZE", "must be set together (torchrun convention)");
    env.source = "RANK/WORLD_SIZE (torchrun convention)";
    env.world = parse_int(lookup, "WORLD_SIZE", 1);
    env.rank = parse_int(lookup, "RANK", 0);
    env.local_rank = optional_int(lookup, "LOCAL_RANK", 0, env.rank);
    env.local_world = optional_int(lookup, "LOCAL_WORLD_SIZE", 1, env.world);
    apply_master_overrides(lookup, env);
    check_rank(env, "RANK", "WORLD_SIZE");
    check_agrees_with(lookup, env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    if (lookup("SLURM_STEP_NUM_TASKS")) check_agrees_with(lookup, env, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS");
    return env;
  }
  // SLURM_STEP_NUM_TASKS is set for tasks srun starts, not for the batch script itself, which would
  // otherwise look like rank 0 of a world that never arrives.
  if (lookup("SLURM_PROCID") && lookup("SLURM_STEP_NUM_TASKS")) {
    env.source = "SLURM_* (srun)";
    const std::string world_name = "SLURM_STEP_NUM_TASKS";
    env.world = parse_int(lookup, world_name, 1);
    env.rank = parse_int(lookup, "SLURM_PROCID", 0);
    env.local_rank = optional_int(lookup, "SLURM_LOCALID", 0, 0);
    env.local_world = lookup("SLURM_STEP_TASKS_PER_NODE") ? first_tasks_per_node(*lookup("SLURM_STEP_TASKS_PER_NODE")) : 1;
    if (auto nodes = lookup("SLURM_STEP_NODELIST") ? lookup("SLURM_STEP_NODELIST") : lookup("SLURM_JOB_NODELIST"))
      env.master_addr = first_slurm_host(*nodes);
    apply_master_overrides(lookup, env);
    check_rank(env, "SLURM_PROCID", world_name);
    return env;
  }
  if (lookup("OMPI_COMM_WORLD_RANK")) {
    env.source = "OMPI_COMM_WORLD_* (Open MPI mpirun)";
    env.world = parse_int(lookup, "OMPI_COMM_WORLD_SIZE", 1);
    env.rank = parse_int(lookup, "OMPI_COMM_WORLD_RANK", 0);
    env.local_rank = optional_int(lookup, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 0);
    env.local_world = optional_int(lookup, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, env.world);
    apply_master_overrides(lookup, env);
    if (env.local_world < env.world && !lookup("MASTER_ADDR"))
      fail("environment variable MASTER_ADDR", "is needed when mpirun spans several nodes (pass -x MASTER_ADDR=<rank 0's host>)");
    check_rank(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    return env;
  }
  return env;
}

RankEnvironment detect_rank_environment() {
  return detect_rank_environment([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace trainbench::parallel
