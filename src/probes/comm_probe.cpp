#include "probes/comm_probe.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>
#include <unistd.h>

#include <torch/torch.h>

#include "parallel/communicator.h"
#include "parallel/device.h"
#include "parallel/plan.h"
#include "util/error.h"
#include "util/provenance.h"

namespace trainbench::probes {

namespace {

using parallel::Collective;
using parallel::Communicator;
using parallel::PendingCollective;

torch::Dtype parse_dtype(const std::string& name) {
  if (name == "float") return torch::kFloat32;
  if (name == "double") return torch::kFloat64;
  if (name == "int32") return torch::kInt32;
  fail("--dtype " + name, "expected float, double or int32");
}

Collective parse_operation(const std::string& name) {
  if (name == "all_reduce") return Collective::kAllReduce;
  if (name == "all_gather") return Collective::kAllGather;
  if (name == "reduce_scatter") return Collective::kReduceScatter;
  if (name == "broadcast") return Collective::kBroadcast;
  if (name == "alltoall") return Collective::kAllToAll;
  fail("--ops " + name, "expected all_reduce, all_gather, reduce_scatter, broadcast or alltoall");
}

// Rank r's input element i: small integers, so every sum is exact in every probed type.
torch::Tensor pattern(int rank, const torch::Tensor& index) { return index.remainder(11) + 3 * (rank + 1); }

// The buffers of one (operation, placement, size) and what the receive buffer must hold afterwards.
struct Case {
  torch::Tensor send, receive, expected;
  std::function<PendingCollective()> run;
};

Case make_case(Communicator& communicator, Collective op, bool in_place, int64_t count, const torch::TensorOptions& options) {
  const int rank = communicator.rank(), world = communicator.world();
  const auto cpu_long = torch::TensorOptions(torch::kInt64);
  const int64_t share = count / world;  // elements each rank contributes or receives, for the sharing operations
  const auto sum_over_ranks = [&](const torch::Tensor& index) {
    torch::Tensor total = torch::zeros(index.sizes(), cpu_long);
    for (int r = 0; r < world; ++r) total += pattern(r, index);
    return total;
  };
  Case c;
  switch (op) {
    case Collective::kAllReduce: {
      const torch::Tensor index = torch::arange(count, cpu_long);
      c.send = pattern(rank, index).to(options);
      c.receive = in_place ? c.send : torch::empty_like(c.send);
      c.expected = sum_over_ranks(index);
      c.run = [&communicator, send = c.send, receive = c.receive, in_place]() mutable {
        if (!in_place) receive.copy_(send);
        return communicator.allreduce_sum(receive);
      };
      break;
    }
    case Collective::kBroadcast: {
      const torch::Tensor index = torch::arange(count, cpu_long);
      c.send = pattern(rank, index).to(options);
      c.receive = in_place ? c.send : torch::empty_like(c.send);
      c.expected = pattern(0, index);
      c.run = [&communicator, send = c.send, receive = c.receive, in_place, rank]() mutable {
        if (!in_place && rank == 0) receive.copy_(send);
        return communicator.broadcast(receive, 0);
      };
      break;
    }
    case Collective::kAllGather: {
      const torch::Tensor index = torch::arange(share, cpu_long);
      c.receive = torch::zeros({count}, options);
      c.send = in_place ? c.receive.narrow(0, rank * share, share) : torch::empty({share}, options);
      c.send.copy_(pattern(rank, index));
      std::vector<torch::Tensor> chunks;
      for (int r = 0; r < world; ++r) chunks.push_back(pattern(r, index));
      c.expected = torch::cat(chunks);
      c.run = [&communicator, send = c.send, receive = c.receive]() mutable { return communicator.allgather(receive, send); };
      break;
    }
    case Collective::kReduceScatter: {
      const torch::Tensor index = torch::arange(count, cpu_long);
      c.send = pattern(rank, index).to(options);
      c.receive = in_place ? c.send.narrow(0, rank * share, share) : torch::empty({share}, options);
      c.expected = sum_over_ranks(torch::arange(rank * share, (rank + 1) * share, cpu_long));
      c.run = [&communicator, send = c.send, receive = c.receive]() mutable {
        return communicator.reduce_scatter_sum(receive, send);
      };
      break;
    }
    case Collective::kAllToAll: {
      c.send = pattern(rank, torch::arange(count, cpu_long)).to(options);
      c.receive = torch::empty_like(c.send);
      std::vector<torch::Tensor> chunks;
      for (int r = 0; r < world; ++r) chunks.push_back(pattern(r, torch::arange(rank * share, (rank + 1) * share, cpu_long)));
      c.expected = torch::cat(chunks);
      c.run = [&communicator, send = c.send, receive = c.receive]() mutable { return communicator.alltoall(receive, send); };
      break;
    }
    case Collective::kSend:
    case Collective::kReceive:  // point-to-point: the pipeline's, not a collective the sweep times
      fail("probe comm", "sends and receives are not swept; the collectives are");
  }
  c.expected = c.expected.to(options);
  return c;
}

// The engine has no in-place all-to-all: the output would overwrite chunks other ranks have yet to receive.
bool supported(Collective op, bool in_place) { return !(op == Collective::kAllToAll && in_place); }

std::string placement_algorithm(Communicator& communicator, Collective op, bool in_place, const torch::Device& device) {
  std::string algorithm = communicator.algorithm(op, device);
  if (!in_place && (op == Collective::kAllReduce || op == Collective::kBroadcast)) algorithm = "copy + in-place";
  return algorithm;
}

double max_over_ranks(Communicator& communicator, double value) {
  torch::Tensor mine = torch::tensor({value}, torch::kFloat64);
  torch::Tensor all = torch::empty({communicator.world()}, torch::kFloat64);
  communicator.allgather(all, mine).wait();
  return all.max().item<double>();
}

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

double bus_bandwidth_factor(const std::string& operation, int ranks) {
  const double n = ranks;
  switch (parse_operation(operation)) {
    case Collective::kAllReduce: return 2 * (n - 1) / n;
    case Collective::kBroadcast: return 1;
    default: return (n - 1) / n;
  }
}

std::vector<int64_t> sweep_sizes(int64_t min_bytes, int64_t max_bytes, double factor, int64_t element_bytes, int ranks) {
  if (min_bytes < 1) fail("--minbytes", "expected at least 1 byte");
  if (max_bytes < min_bytes) fail("--maxbytes", "expected at least --minbytes (" + std::to_string(min_bytes) + ")");
  if (!(factor > 1)) fail("--stepfactor", "expected a factor above 1");
  std::vector<int64_t> sizes;
  const int64_t unit = element_bytes * ranks;  // every rank gets a whole number of elements
  for (double size = static_cast<double>(min_bytes); size <= static_cast<double>(max_bytes) * (1 + 1e-9); size *= factor) {
    const int64_t rounded = std::max<int64_t>(unit, static_cast<int64_t>(size) / unit * unit);
    if (sizes.empty() || rounded != sizes.back()) sizes.push_back(rounded);
  }
  return sizes;
}

namespace {
// After the whole-world sweep, with --tensor-parallel: the layout's groups alone and at once (defined below).
void run_layout_sweep(Communicator& world, const CommProbeOptions& options, CommProbeResult& result, std::ostream& out);
}  // namespace

CommProbeResult run_comm_probe(Communicator& communicator, const CommProbeOptions& options, std::ostream& out) {
  if (options.iterations < 1) fail("--iters", "expected at least 1");
  if (options.warmup_iterations < 0) fail("--warmup_iters", "expected 0 or more");
  if (options.tensor_parallel > 1)  // refused before any measurement
    parallel::make_plan(communicator.world(), options.tensor_parallel, 1, "--tensor-parallel");
  torch::set_num_threads(options.threads);
  const torch::Dtype dtype = parse_dtype(options.dtype);
  const torch::Device device = resolve_device(options.device);
  const auto tensor_options = torch::TensorOptions(dtype).device(device);
  const int64_t element_bytes = torch::elementSize(dtype);
  const int world = communicator.world();
  const std::string backend = communicator.backend(device);

  CommProbeResult result;
  auto& json = result.json;
  json["arguments"] = {{"minbytes", options.min_bytes}, {"maxbytes", options.max_bytes}, {"stepfactor", options.factor},
                       {"iters", options.iterations}, {"warmup_iters", options.warmup_iterations},
                       {"ops", options.operations}, {"datatype", options.dtype}, {"device", device.str()},
                       {"check", options.check}};
  nlohmann::ordered_json environment{{"host", host_name()}, {"ranks", world}, {"backend", backend},
                                     {"rank_source", communicator.environment().source},
                                     {"master_addr", communicator.environment().master_addr},
                                     {"master_port", communicator.environment().master_port},
                                     {"threads", torch::get_num_threads()}};
  for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_ALGO", "NCCL_PROTO", "OMP_NUM_THREADS"})
    if (const char* value = std::getenv(name)) environment[name] = value;
  json["environment"] = environment;
  json["versions"] = {{"trainbench", std::string(provenance::kVersion) + " (" + provenance::kGitRevision + ")"},
                      {"libtorch", provenance::kTorchVersion}};
  json["rows"] = nlohmann::ordered_json::array();

  char line[256];
  std::snprintf(line, sizeof line, "# trainbench probe comm: %s, %d rank(s), %s on %s, sum, %d iterations after %d warm-up\n",
                backend.c_str(), world, options.dtype.c_str(), device.str().c_str(), options.iterations,
                options.warmup_iterations);
  out << line;
  double busbw_sum = 0;
  int busbw_rows = 0;
  for (const std::string& name : options.operations) {
    const Collective op = parse_operation(name);
    std::snprintf(line, sizeof line, "#\n# %s  (out-of-place: %s; in-place: %s)\n", name.c_str(),
                  placement_algorithm(communicator, op, false, device).c_str(),
                  supported(op, true) ? placement_algorithm(communicator, op, true, device).c_str() : "not supported");
    out << line;
    out << "#        size         count    type  root |  out-of-place                          |  in-place\n"
           "#         (B)    (elements)               |   time(us) algbw(GB/s) busbw(GB/s) #wrong |   time(us) algbw(GB/s) busbw(GB/s) #wrong\n";
    const int root = op == Collective::kBroadcast ? 0 : -1;
    for (const int64_t bytes : sweep_sizes(options.min_bytes, options.max_bytes, options.factor, element_bytes, world)) {
      const int64_t count = bytes / element_bytes;
      std::snprintf(line, sizeof line, "%13lld %13lld %7s %5d", static_cast<long long>(bytes), static_cast<long long>(count),
                    options.dtype.c_str(), root);
      std::string text = line;
      for (const bool in_place : {false, true}) {
        if (!supported(op, in_place)) {
          text += " |        n/a         n/a         n/a    n/a";
          continue;
        }
        Case c = make_case(communicator, op, in_place, count, tensor_options);
        const torch::Tensor initial_send = c.send.clone();
        for (int i = 0; i < options.warmup_iterations; ++i) c.run().wait();
        communicator.barrier();
        const auto begin = std::chrono::steady_clock::now();
        for (int i = 0; i < options.iterations; ++i) c.run().wait();
        if (device.is_cuda()) torch::cuda::synchronize();
        const double mean_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() / options.iterations;
        CommProbeRow row{name, in_place ? "in-place" : "out-of-place", bytes, count};
        row.seconds = max_over_ranks(communicator, mean_seconds);
        row.algbw_gbps = bytes / row.seconds / 1e9;
        row.busbw_gbps = row.algbw_gbps * bus_bandwidth_factor(name, world);
        if (options.check) {
          c.send.copy_(initial_send);  // timed in-place runs overwrote the inputs
          c.run().wait();
          std::vector<double> wrong{static_cast<double>(c.receive.ne(c.expected).sum().item<int64_t>())};
          communicator.sum(wrong);
          row.wrong = static_cast<int64_t>(wrong[0]);
          result.wrong_total += row.wrong;
        } else {
          row.wrong = -1;
        }
        std::snprintf(line, sizeof line, " | %10.1f %11.3f %11.3f %6lld", row.seconds * 1e6, row.algbw_gbps, row.busbw_gbps,
                      static_cast<long long>(row.wrong));
        text += line;
        busbw_sum += row.busbw_gbps;
        ++busbw_rows;
        json["rows"].push_back({{"operation", row.operation}, {"placement", row.placement}, {"bytes", row.bytes},
                                {"count", row.count}, {"type", options.dtype}, {"root", root},
                                {"algorithm", placement_algorithm(communicator, op, in_place, device)},
                                {"time_us", row.seconds * 1e6}, {"algbw_GBps", row.algbw_gbps},
                                {"busbw_GBps", row.busbw_gbps}, {"wrong", row.wrong}});
        result.rows.push_back(row);
      }
      out << text << "\n" << std::flush;
    }
  }
  if (options.tensor_parallel > 1) run_layout_sweep(communicator, options, result, out);
  std::snprintf(line, sizeof line, "#\n# Wrong elements: %lld%s\n# Avg bus bandwidth: %.3f GB/s\n",
                static_cast<long long>(result.wrong_total), options.check ? "" : " (not checked)",
                busbw_rows ? busbw_sum / busbw_rows : 0.0);
  out << line;
  json["wrong_total"] = result.wrong_total;
  return result;
}

namespace {

// Mean seconds per iteration until the tensor group's and the data group's all-reduces return, each issued
// only when asked for, both issued together when both are; the slowest rank's.
std::pair<double, double> timed_pair(Communicator& world, Case& tensor, Case& data, bool run_tensor, bool run_data,
                                     const CommProbeOptions& options) {
  const auto once = [&](double& tensor_seconds, double& data_seconds) {
    const auto begin = std::chrono::steady_clock::now();
    PendingCollective tensor_call = run_tensor ? tensor.run() : PendingCollective();
    PendingCollective data_call = run_data ? data.run() : PendingCollective();
    tensor_call.wait();
    tensor_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    data_call.wait();
    data_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  double ignored_tensor = 0, ignored_data = 0, tensor_seconds = 0, data_seconds = 0;
  for (int i = 0; i < options.warmup_iterations; ++i) once(ignored_tensor, ignored_data);
  world.barrier();
  for (int i = 0; i < options.iterations; ++i) once(tensor_seconds, data_seconds);
  return {max_over_ranks(world, tensor_seconds / options.iterations),
          max_over_ranks(world, data_seconds / options.iterations)};
}

// Both groups' in-place all-reduces once more from their original inputs; the wrong elements over all ranks.
int64_t check_pair(Communicator& world, Case& tensor, Case& data, const torch::Tensor& tensor_input,
                   const torch::Tensor& data_input) {
  tensor.send.copy_(tensor_input);
  data.send.copy_(data_input);
  tensor.run().wait();
  data.run().wait();
  std::vector<double> wrong{static_cast<double>(tensor.receive.ne(tensor.expected).sum().item<int64_t>() +
                                                data.receive.ne(data.expected).sum().item<int64_t>())};
  world.sum(wrong);
  return static_cast<int64_t>(wrong[0]);
}

void run_layout_sweep(Communicator& world, const CommProbeOptions& options, CommProbeResult& result,
                      std::ostream& out) {
  const parallel::ParallelPlan plan =
      parallel::make_plan(world.world(), options.tensor_parallel, 1, "--tensor-parallel");
  const int rank = world.rank();
  using parallel::GroupKind;
  const auto tensor_group = world.subgroup("probe-" + parallel::group_name(plan, GroupKind::kTensor, rank),
                                           parallel::group_members(plan, GroupKind::kTensor, rank));
  const auto data_group = world.subgroup("probe-" + parallel::group_name(plan, GroupKind::kData, rank),
                                         parallel::group_members(plan, GroupKind::kData, rank));
  const torch::Dtype dtype = parse_dtype(options.dtype);
  const auto tensor_options = torch::TensorOptions(dtype).device(resolve_device(options.device));
  char line[256];
  std::snprintf(line, sizeof line,
                "#\n# all_reduce in a tensor x data layout: %d tensor-parallel groups of %d neighbouring ranks, %d "
                "data-parallel groups of %d; in place; busbw as above\n",
                plan.data, plan.tensor, plan.tensor, plan.data);
  out << line
      << "#        size |  tp alone             |  dp alone             |  tp beside dp         |  dp beside tp        "
         " "
         "| #wrong\n"
         "#         (B) |   time(us) busbw(GB/s) |   time(us) busbw(GB/s) |   time(us) busbw(GB/s) |   time(us) "
         "busbw(GB/s) |\n";
  result.json["layout_rows"] = nlohmann::ordered_json::array();
  for (const int64_t bytes :
       sweep_sizes(options.min_bytes, options.max_bytes, options.factor, torch::elementSize(dtype), world.world())) {
    const int64_t count = bytes / torch::elementSize(dtype);
    Case tensor = make_case(*tensor_group, Collective::kAllReduce, true, count, tensor_options);
    Case data = make_case(*data_group, Collective::kAllReduce, true, count, tensor_options);
    const torch::Tensor tensor_input = tensor.send.clone(), data_input = data.send.clone();
    LayoutProbeRow row{bytes};
    row.tensor_alone = timed_pair(world, tensor, data, true, false, options).first;
    row.data_alone = timed_pair(world, tensor, data, false, true, options).second;
    std::tie(row.tensor_beside_data, row.data_beside_tensor) = timed_pair(world, tensor, data, true, true, options);
    row.wrong = options.check ? check_pair(world, tensor, data, tensor_input, data_input) : -1;
    if (row.wrong > 0) result.wrong_total += row.wrong;
    const auto busbw = [&](double seconds, int ranks) {
      return bytes / seconds / 1e9 * bus_bandwidth_factor("all_reduce", ranks);
    };
    std::snprintf(line, sizeof line, "%13lld | %10.1f %11.3f | %10.1f %11.3f | %10.1f %11.3f | %10.1f %11.3f | %6lld\n",
                  static_cast<long long>(bytes), row.tensor_alone * 1e6, busbw(row.tensor_alone, plan.tensor),
                  row.data_alone * 1e6, busbw(row.data_alone, plan.data), row.tensor_beside_data * 1e6,
                  busbw(row.tensor_beside_data, plan.tensor), row.data_beside_tensor * 1e6,
                  busbw(row.data_beside_tensor, plan.data), static_cast<long long>(row.wrong));
    out << line << std::flush;
    result.json["layout_rows"].push_back({{"bytes", bytes},
                                          {"tensor_parallel", plan.tensor},
                                          {"data_parallel", plan.data},
                                          {"tp_alone_us", row.tensor_alone * 1e6},
                                          {"dp_alone_us", row.data_alone * 1e6},
                                          {"tp_beside_dp_us", row.tensor_beside_data * 1e6},
                                          {"dp_beside_tp_us", row.data_beside_tensor * 1e6},
                                          {"wrong", row.wrong}});
    result.layout_rows.push_back(row);
  }
}

}  // namespace

CommProbeResult run_comm_probe_across_ranks(const CommProbeOptions& options, double timeout_seconds, std::ostream& out) {
  parallel::CommunicatorOptions communicator_options;
  communicator_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  const auto communicator = parallel::connect_from_environment(communicator_options);
  std::ostringstream other_ranks_output;  // every rank measures; rank 0 prints
  const bool lead = communicator->rank() == 0;
  CommProbeResult result = run_comm_probe(*communicator, options, lead ? out : other_ranks_output);
  result.lead = lead;
  return result;
}

}  // namespace trainbench::probes
