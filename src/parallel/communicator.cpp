#include "parallel/communicator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unistd.h>

#include <torch/torch.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef TRAINBENCH_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef TRAINBENCH_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "util/error.h"

namespace trainbench::parallel {

namespace {

const std::string kHeartbeatPrefix = "trainbench/heartbeat/";
const std::string kFailurePrefix = "trainbench/failure/";
// How long a store connection made to diagnose or report a failure may take.
constexpr std::chrono::seconds kDiagnosisConnectTimeout{5};
// After a failure is diagnosed, the process ends its log and exits within this margin, or is ended: a
// partitioned node can leave threads blocked on peers that will never answer (docs/reliability.md).
constexpr std::chrono::seconds kShutdownMargin{10};

// Ends the process kShutdownMargin after a failure if it has not ended by then. The caller has the error
// message already; the exit code is the one an Error gets.
void arm_shutdown_watchdog(int rank, const std::string& explanation) {
  static std::once_flag armed;
  std::call_once(armed, [rank, explanation] {
    std::thread([rank, explanation] {
      std::this_thread::sleep_for(kShutdownMargin);
      const std::string line = "trainbench: rank " + std::to_string(rank) + ": still not stopped " +
                               std::to_string(kShutdownMargin.count()) + " s after a communication failure (" + explanation +
                               "); exiting\n";
      (void)!::write(STDERR_FILENO, line.data(), line.size());
      ::_exit(2);
    }).detach();
  });
}

c10::intrusive_ptr<c10d::TCPStore> connect_store(const RankEnvironment& env, bool server, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = server;
  options.waitWorkers = false;  // the process groups' own rendezvous waits for every rank
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
}

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

std::string store_text(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> bytes = store.get(key);
  return std::string(bytes.begin(), bytes.end());
}

// LibTorch 2.x split c10d's ProcessGroup into a wrapper over per-device Backends; the Gloo and NCCL classes
// derive from Backend there and from ProcessGroup in 1.13, with the same collective methods.
#if TORCH_VERSION_MAJOR >= 2
using GroupBase = c10d::Backend;
#else
using GroupBase = c10d::ProcessGroup;
#endif

}  // namespace

// The process groups and the heartbeat publisher; absent for a world of one.
struct Communicator::Backends {
  c10::intrusive_ptr<c10d::TCPStore> store;  // rendezvous; rank 0 hosts it
  c10::intrusive_ptr<GroupBase> cpu_group;   // Gloo
  c10::intrusive_ptr<GroupBase> cuda_group;  // NCCL
  std::string cpu_name, cuda_name;
  // Heartbeats go over their own store connection: a c10d store client is one socket, not meant to be
  // shared between threads.
  c10::intrusive_ptr<c10d::TCPStore> heartbeat_store;
  std::thread heartbeat;
  std::mutex mutex;
  std::condition_variable stop_requested;
  bool stopping = false;
  std::atomic<bool> failed{false};
  std::atomic<bool> store_unreachable{false};  // found while diagnosing: reporting to it would only wait
};

namespace {

// The Gloo and NCCL process groups of `env`'s ranks, rendezvousing under `prefix` in the store (the world's
// groups under "", a subgroup's under its name, so that no two groups of a job read each other's keys).
void create_process_groups(Communicator::Backends& backends, const std::string& prefix, const RankEnvironment& env,
                           const CommunicatorOptions& options) {
#ifdef TRAINBENCH_WITH_GLOO
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"))
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  else if (is_loopback(env.master_addr))
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  backends.cpu_group = c10::make_intrusive<c10d::ProcessGroupGloo>(
      c10::make_intrusive<c10d::PrefixStore>(prefix + "gloo", backends.store), env.rank, env.world, gloo_options);
  backends.cpu_name = "gloo";
#endif
#ifdef TRAINBENCH_WITH_NCCL
  if (torch::cuda::is_available()) {
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = options.timeout;
    backends.cuda_group = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>(prefix + "nccl", backends.store), env.rank, env.world, nccl_options);
    backends.cuda_name = "nccl";
  }
#endif
}

}  // namespace

Communicator::Communicator(RankEnvironment env, CommunicatorOptions options)
    : env_(std::move(env)), options_(options), traffic_(static_cast<size_t>(Collective::kReceive) + 1) {}

std::shared_ptr<Communicator> Communicator::subgroup(const std::string& name, const std::vector<int>& members) {
  const std::string what = "group " + name;
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty() || sorted.front() < 0 || sorted.back() >= env_.world ||
      std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail(what, "members must be distinct ranks of " + name_ + " (0 to " + std::to_string(env_.world - 1) + ")");
  const auto self = std::find(members.begin(), members.end(), env_.rank);
  if (self == members.end()) fail(what, "rank " + std::to_string(env_.rank) + " is not one of its members");
  RankEnvironment env = env_;
  env.rank = static_cast<int>(self - members.begin());
  env.world = static_cast<int>(members.size());
  std::shared_ptr<Communicator> group(new Communicator(env, options_));
  group->name_ = name;
  for (const int member : members) group->members_.push_back(world_rank_of(member));
  group->parent_ = parent_ ? parent_ : shared_from_this();
  if (env.world == 1) return group;
  auto backends = std::make_unique<Backends>();
  backends->store = group->parent_->backends_->store;
  try {
    create_process_groups(*backends, "group/" + name + "/", env, options_);
  } catch (const std::exception& error) {
    fail(what + " (world rank " + std::to_string(world_rank_of(env_.rank)) + ")",
         std::string("rendezvous failed: ") + error.what());
  }
  group->backends_ = std::move(backends);
  return group;
}

void Communicator::count(Collective op, const torch::Tensor& payload) {
  TrafficCount& counted = traffic_[static_cast<size_t>(op)];
  ++counted.calls;
  counted.bytes += static_cast<int64_t>(payload.numel()) * static_cast<int64_t>(payload.element_size());
}

TrafficCount Communicator::traffic(Collective op) const { return traffic_[static_cast<size_t>(op)]; }

void Communicator::reset_traffic() { std::fill(traffic_.begin(), traffic_.end(), TrafficCount{}); }

std::shared_ptr<Communicator> Communicator::connect(const RankEnvironment& env, const CommunicatorOptions& options) {
  std::shared_ptr<Communicator> communicator(new Communicator(env, options));
  if (env.world == 1) return communicator;
  auto backends = std::make_unique<Backends>();
  const std::string where = "rendezvous at " + env.master_addr + ":" + std::to_string(env.master_port) + " (rank " +
                            std::to_string(env.rank) + " of " + std::to_string(env.world) + ", from " + env.source + ")";
  try {
    backends->store = connect_store(env, env.rank == 0, options.timeout);
    create_process_groups(*backends, "", env, options);
    if (!backends->cpu_group && !backends->cuda_group)
      fail(where, "this build has neither Gloo nor NCCL (configure with libgloo-dev, or LibTorch with CUDA and NCCL)");
    backends->heartbeat_store = connect_store(env, false, options.timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    fail(where, std::string("failed: ") + error.what());
  }
  Backends* state = backends.get();
  const int rank = env.rank;
  const auto interval = options.heartbeat_interval;
  state->heartbeat = std::thread([state, rank, interval] {
    const std::string key = kHeartbeatPrefix + std::to_string(rank);
    for (;;) {
      // Not under the mutex: across a network partition add() blocks, and stopping must not wait for it.
      try {
        state->heartbeat_store->add(key, 1);
      } catch (const std::exception&) {
        return;  // the store is gone (rank 0 ended); the next collective reports it
      }
      std::unique_lock<std::mutex> lock(state->mutex);
      if (state->stop_requested.wait_for(lock, interval, [state] { return state->stopping; })) return;
    }
  });
  communicator->backends_ = std::move(backends);
  return communicator;
}

Communicator::~Communicator() {
  if (!backends_) return;
  if (parent_) {
    // A group's process groups wait for their queued work when destroyed; after a failure that may never end.
    if (backends_->failed || parent_->backends_->failed) (void)backends_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(backends_->mutex);
    backends_->stopping = true;
  }
  backends_->stop_requested.notify_all();
  if (backends_->failed) {
    // After a failure the heartbeat may be blocked on a store that is gone, and destroying a process group
    // waits for the collectives queued on it, each up to the timeout, on peers that may never answer (a
    // network partition). The process is about to end: leave them to its exit rather than wait.
    backends_->heartbeat.detach();
    (void)backends_.release();
    return;
  }
  if (backends_->heartbeat.joinable()) backends_->heartbeat.join();
  // Rank 0 hosts the store: leaving first would cut the others off before their last barrier returns,
  // so every rank agrees to leave once they are all here — unless a rank already failed.
  if (!backends_->failed && env_.world > 1) {
    try {
      barrier();
    } catch (const std::exception&) {
    }
  }
}

std::string Communicator::backend(const torch::Device& device) const {
  if (env_.world == 1) return "single";
  if (device.is_cuda() && backends_->cuda_group) return backends_->cuda_name;
  return backends_->cpu_group ? backends_->cpu_name : backends_->cuda_name;
}

std::string Communicator::algorithm(Collective op, const torch::Device& device) const {
  if (op == Collective::kReduceScatter && backend(device) == "gloo") return "alltoall+local sum";
  return "native";
}

void Communicator::check_usable() {
  if (backends_ && backends_->failed)
    throw Error("rank " + std::to_string(env_.rank) + ": an earlier collective failed; the process group is unusable");
}

std::string Communicator::explain_failure(const std::string& transport_message) {
  if (!backends_) return transport_message;
  if (parent_) {
    backends_->failed = true;
    std::string members;
    for (const int member : members_) members += (members.empty() ? "" : ",") + std::to_string(member);
    return "in group " + name_ + " (world ranks " + members + "): " + parent_->explain_failure(transport_message);
  }
  backends_->failed = true;
  std::string explanation;
  try {
    // A fresh short-timeout connection: the shared ones may be mid-operation or broken.
    RankEnvironment env = env_;
    auto store = connect_store(env, false, kDiagnosisConnectTimeout);
    std::vector<int64_t> before(env_.world);
    for (int rank = 0; rank < env_.world; ++rank) before[rank] = store->add(kHeartbeatPrefix + std::to_string(rank), 0);
    std::this_thread::sleep_for(options_.heartbeat_interval * 4);
    for (int rank = 0; rank < env_.world; ++rank) {
      if (rank == env_.rank) continue;
      const std::string failure_key = kFailurePrefix + std::to_string(rank);
      std::string finding;
      if (store->check({failure_key}))
        finding = "rank " + std::to_string(rank) + " failed: " + store_text(*store, failure_key);
      else if (store->add(kHeartbeatPrefix + std::to_string(rank), 0) == before[rank])
        finding = "rank " + std::to_string(rank) + " stopped responding (no heartbeat for " +
                  std::to_string(4 * options_.heartbeat_interval.count()) + " ms: it died or hangs)";
      if (!finding.empty()) explanation += (explanation.empty() ? "" : "; ") + finding;
    }
  } catch (const std::exception&) {
    backends_->store_unreachable = true;
    explanation = "rank 0, which hosts the rendezvous store at " + env_.master_addr + ":" + std::to_string(env_.master_port) +
                  ", is unreachable (it died, hangs, or the network between us is down)";
  }
  if (explanation.empty()) explanation = "no other rank reported a failure";
  arm_shutdown_watchdog(env_.rank, explanation);
  return explanation + " [rank " + std::to_string(env_.rank) + " saw: " + transport_message + "]";
}

void Communicator::report_failure(const std::string& reason) {
  if (parent_) {
    if (backends_) backends_->failed = true;
    parent_->report_failure(reason);
    return;
  }
  if (!backends_) return;
  backends_->failed = true;
  if (backends_->store_unreachable) return;  // the others learn of this rank from its silent heartbeat
  try {
    auto store = connect_store(env_, false, kDiagnosisConnectTimeout);
    store->set(kFailurePrefix + std::to_string(env_.rank), std::vector<uint8_t>(reason.begin(), reason.end()));
  } catch (const std::exception&) {
    // The store is gone too; the others learn of this rank from its silent heartbeat.
  }
}

PendingCollective Communicator::guarded(std::function<void()> wait) {
  return PendingCollective([this, wait = std::move(wait)] {
    try {
      wait();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& error) {
      throw Error("communication failed: " + explain_failure(error.what()));
    }
  });
}


namespace {

// Keeps the tensors a c10d call refers to alive until it is waited for, then rethrows its failure.
template <typename Work>
std::function<void()> waiter(Work work, std::vector<torch::Tensor> keep_alive = {},
                             std::function<void()> after = nullptr) {
  return [work, keep_alive = std::move(keep_alive), after = std::move(after)] {
    work->wait();
    if (after) after();
  };
}

}  // namespace

template <typename Launch>
PendingCollective Communicator::launch(const torch::Device& device, Launch&& call) {
  check_usable();
  GroupBase* group = nullptr;
  if (device.is_cuda() && backends_->cuda_group) group = backends_->cuda_group.get();
  else if (backends_->cpu_group) group = backends_->cpu_group.get();
  else fail("tensor on " + device.str(), "no process group for this device (" + backends_->cuda_name + " needs CUDA tensors)");
  try {
    return guarded(call(*group));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    throw Error("communication failed: " + explain_failure(error.what()));
  }
}

PendingCollective Communicator::allreduce_sum(torch::Tensor& tensor) {
  if (env_.world == 1) return {};
  count(Collective::kAllReduce, tensor);
  return launch(tensor.device(), [&](GroupBase& group) {
    std::vector<torch::Tensor> tensors{tensor};
    return waiter(group.allreduce(tensors), tensors);
  });
}

PendingCollective Communicator::broadcast(torch::Tensor& tensor, int root) {
  if (env_.world == 1) return {};
  count(Collective::kBroadcast, tensor);
  return launch(tensor.device(), [&](GroupBase& group) {
    std::vector<torch::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return waiter(group.broadcast(tensors, options), tensors);
  });
}

PendingCollective Communicator::allgather(torch::Tensor& output, const torch::Tensor& input) {
  TORCH_CHECK(output.numel() == input.numel() * env_.world, "allgather: output must hold world x input elements");
  if (env_.world == 1) {
    output.view(-1).copy_(input.view(-1));
    return {};
  }
  count(Collective::kAllGather, input);
  return launch(input.device(), [&](GroupBase& group) {
    std::vector<torch::Tensor> inputs{input};
    std::vector<std::vector<torch::Tensor>> outputs{output.view(-1).chunk(env_.world)};
    for (auto& chunk : outputs[0]) chunk = chunk.view(input.sizes());
    std::vector<torch::Tensor> keep{input, output};
    return waiter(group.allgather(outputs, inputs), keep);
  });
}

PendingCollective Communicator::gather(torch::Tensor& output, const torch::Tensor& input, int root) {
  const bool receives = env_.rank == root;
  TORCH_CHECK(!receives || output.numel() == input.numel() * env_.world, "gather: output must hold world x input elements on the root");
  if (env_.world == 1) {
    output.view(-1).copy_(input.view(-1));
    return {};
  }
  return launch(input.device(), [&](GroupBase& group) {
    std::vector<torch::Tensor> inputs{input};
    // c10d wants the root's list of per-rank outputs, and no list at all on the other ranks.
    std::vector<std::vector<torch::Tensor>> outputs;
    std::vector<torch::Tensor> keep{input};
    if (receives) {
      outputs.push_back(output.view(-1).chunk(env_.world));
      for (auto& chunk : outputs[0]) chunk = chunk.view(input.sizes());
      keep.push_back(output);
    }
    c10d::GatherOptions options;
    options.rootRank = root;
    return waiter(group.gather(outputs, inputs, options), keep);
  });
}

PendingCollective Communicator::alltoall(torch::Tensor& output, const torch::Tensor& input) {
  TORCH_CHECK(output.numel() == input.numel() && input.numel() % env_.world == 0,
              "alltoall: input and output must have equal sizes divisible by world");
  if (env_.world == 1) {
    output.view(-1).copy_(input.view(-1));
    return {};
  }
  count(Collective::kAllToAll, input);
  return launch(input.device(), [&](GroupBase& group) {
    torch::Tensor in = input.view(-1), out = output.view(-1);
    std::vector<int64_t> equal_split;  // empty: equal chunks
    return waiter(group.alltoall_base(out, in, equal_split, equal_split), {in, out});
  });
}

PendingCollective Communicator::reduce_scatter_sum(torch::Tensor& output, const torch::Tensor& input) {
  TORCH_CHECK(input.numel() == output.numel() * env_.world, "reduce_scatter: input must hold world x output elements");
  if (env_.world == 1) {
    output.view(-1).copy_(input.view(-1));
    return {};
  }
  count(Collective::kReduceScatter, input);
  if (algorithm(Collective::kReduceScatter, input.device()) == "native") {
    return launch(input.device(), [&](GroupBase& group) {
      std::vector<torch::Tensor> outputs{output};
      std::vector<std::vector<torch::Tensor>> inputs{input.view(-1).chunk(env_.world)};
      for (auto& chunk : inputs[0]) chunk = chunk.view(output.sizes());
      std::vector<torch::Tensor> keep{input, output};
      return waiter(group.reduce_scatter(outputs, inputs), keep);
    });
  }
  // All-to-all moves each rank's chunk j to rank j — the same (n-1)/n of the buffer per rank that a
  // reduce-scatter moves — and the sum is local.
  torch::Tensor received = torch::empty_like(input.view(-1));
  torch::Tensor target = output;
  return launch(input.device(), [&](GroupBase& group) {
    torch::Tensor in = input.view(-1);
    std::vector<int64_t> equal_split;
    return waiter(group.alltoall_base(received, in, equal_split, equal_split), {in, received},
                  [received, target, world = env_.world]() mutable {
                    torch::Tensor flat_target = target.view(-1);
                    torch::sum_out(flat_target, received.view({world, -1}), 0);
                  });
  });
}

namespace {

// A point-to-point peer must be another rank of the group, and the tensor contiguous.
void check_point_to_point(const std::string& group, const RankEnvironment& env, const torch::Tensor& tensor, int peer,
                          const char* what) {
  if (peer < 0 || peer >= env.world || peer == env.rank)
    fail(group + " " + what, "peer " + std::to_string(peer) + " is not another rank of " + std::to_string(env.world));
  TORCH_CHECK(tensor.is_contiguous(), what, ": the tensor must be contiguous");
}

}  // namespace

PendingCollective Communicator::send(const torch::Tensor& tensor, int peer, int tag) {
  check_point_to_point(name_, env_, tensor, peer, "send");
  count(Collective::kSend, tensor);
  return launch(tensor.device(), [&](GroupBase& group) {
    std::vector<torch::Tensor> tensors{tensor};
    return waiter(group.send(tensors, peer, tag), tensors);
  });
}

PendingCollective Communicator::receive(torch::Tensor& tensor, int peer, int tag) {
  check_point_to_point(name_, env_, tensor, peer, "receive");
  count(Collective::kReceive, tensor);
  return launch(tensor.device(), [&](GroupBase& group) {
    std::vector<torch::Tensor> tensors{tensor};
    return waiter(group.recv(tensors, peer, tag), tensors);
  });
}

void Communicator::barrier() {
  if (env_.world == 1) return;
  launch(torch::Device(backends_->cpu_group ? torch::kCPU : torch::kCUDA), [&](GroupBase& group) {
    return waiter(group.barrier());
  }).wait();
}

// Host-side values travel as one float64 tensor on the device of whichever backend the build has.
void Communicator::sum(std::vector<double>& values) {
  if (env_.world == 1 || values.empty()) return;
  const torch::Device device(backends_->cpu_group ? torch::kCPU : torch::kCUDA);
  torch::Tensor tensor = torch::tensor(values, torch::kFloat64).to(device);
  allreduce_sum(tensor).wait();
  tensor = tensor.cpu();
  std::copy(tensor.data_ptr<double>(), tensor.data_ptr<double>() + values.size(), values.begin());
}

void Communicator::broadcast(std::vector<double>& values, int root) {
  if (env_.world == 1 || values.empty()) return;
  const torch::Device device(backends_->cpu_group ? torch::kCPU : torch::kCUDA);
  torch::Tensor tensor = torch::tensor(values, torch::kFloat64).to(device);
  broadcast(tensor, root).wait();
  tensor = tensor.cpu();
  std::copy(tensor.data_ptr<double>(), tensor.data_ptr<double>() + values.size(), values.begin());
}

std::shared_ptr<Communicator> connect_from_environment(const CommunicatorOptions& options) {
  return Communicator::connect(detect_rank_environment(), options);
}

}  // namespace trainbench::parallel
