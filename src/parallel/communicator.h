#pragma once
// The one interface trainbench's training and probes use to talk between ranks. It wraps LibTorch's c10d
// process groups — Gloo for CPU tensors, NCCL for CUDA tensors when this LibTorch was built with it — with
// a c10d TCPStore for rendezvous, so no training traffic goes over sockets of our own.
//
// Faults: every rank publishes a heartbeat counter in the store from a background thread and, when it
// gives up, its reason. A collective that fails or times out is reported as an Error that names the rank
// that stopped (its reason, or how long its heartbeat has been silent), not only the transport's message.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "parallel/rank_environment.h"

namespace trainbench::parallel {

struct CommunicatorOptions {
  // A collective, barrier or rendezvous that waits longer than this fails. It bounds how long the others
  // wait for a rank that hangs, so it must exceed the longest compute gap between collectives.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds heartbeat_interval{500};
};

// A collective in flight; wait() blocks until it is done and throws Error (naming the failed rank) if
// it failed.
class PendingCollective {
 public:
  PendingCollective() = default;
  explicit PendingCollective(std::function<void()> wait) : wait_(std::move(wait)) {}
  void wait() {
    if (wait_) std::exchange(wait_, nullptr)();
  }

 private:
  std::function<void()> wait_;
};

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll, kSend, kReceive };

// What a communicator's tensor collectives carried: each call's payload (the bytes of the tensor this rank
// passes in; for all-gather its input, for reduce-scatter its input), counted when the call is issued. The
// bytes a ring or tree puts on the wire are a multiple of these that depends on the algorithm.
struct TrafficCount {
  int64_t calls = 0;
  int64_t bytes = 0;
};

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // Rendezvous with the other ranks of `env` (rank 0 hosts the store at master_addr:master_port). A world
  // of one needs no store and no process group; its collectives are local copies.
  static std::shared_ptr<Communicator> connect(const RankEnvironment& env, const CommunicatorOptions& options = {});
  ~Communicator();

  int rank() const { return env_.rank; }
  int world() const { return env_.world; }
  // For a group (subgroup()): its name and the world ranks of its members, in group-rank order; for the
  // world: "world" and 0 … world-1.
  const std::string& name() const { return name_; }
  int world_rank_of(int group_rank) const { return members_.empty() ? group_rank : members_[group_rank]; }
  const RankEnvironment& environment() const { return env_; }
  // "gloo", "nccl" or "single" (one rank); for tensors on `device`.
  std::string backend(const torch::Device& device) const;

  // Small host-side operations on doubles (through Gloo, or NCCL where Gloo is missing): what the harness
  // needs for its barriers and per-block sums (workloads/ranks.h hands them to it).
  void barrier();
  void sum(std::vector<double>& values);  // element-wise over all ranks; every rank gets the result
  void broadcast(std::vector<double>& values, int root);
  // Tells the other ranks why this one is giving up, so their errors can name it and the cause.
  void report_failure(const std::string& reason);

  // Tensor collectives, asynchronous. Every rank must issue the same collectives in the same order with
  // matching shapes. Tensors must be contiguous and stay alive until wait() returns.
  PendingCollective allreduce_sum(torch::Tensor& tensor);                          // in place
  PendingCollective broadcast(torch::Tensor& tensor, int root);                    // in place
  // output = the ranks' inputs concatenated along dim 0 (output.numel() == world * input.numel()).
  PendingCollective allgather(torch::Tensor& output, const torch::Tensor& input);
  // On `root`, output = the ranks' inputs concatenated along dim 0 (output.numel() == world * input.numel());
  // elsewhere output is not touched and may be undefined.
  PendingCollective gather(torch::Tensor& output, const torch::Tensor& input, int root);
  // output = rank's chunk of the sum over ranks of input (input.numel() == world * output.numel()).
  PendingCollective reduce_scatter_sum(torch::Tensor& output, const torch::Tensor& input);
  // Chunk j of input goes to rank j; chunk i of output came from rank i (equal chunks).
  PendingCollective alltoall(torch::Tensor& output, const torch::Tensor& input);
  // Point to point, for pipeline activations and their gradients: `peer` is a rank of this communicator, and
  // `tag` tells apart messages between the same two ranks (a receive takes the send with its tag). A send may
  // complete before the peer receives; wait() on both before the tensor is reused.
  PendingCollective send(const torch::Tensor& tensor, int peer, int tag);
  PendingCollective receive(torch::Tensor& tensor, int peer, int tag);  // into `tensor`, which has the shape sent

  // A communicator over some ranks of this one (tensor-, pipeline- or data-parallel groups): `members` are
  // ranks of this communicator, this one among them; its rank is its index there. Every member must call it
  // with the same name and members, and the other ranks need not call it. Its process groups rendezvous on a
  // c10d PrefixStore named after the group over this world's store, so groups of one job never mix; its
  // failures name the group and the failed ranks by their world rank.
  std::shared_ptr<Communicator> subgroup(const std::string& name, const std::vector<int>& members);

  // Per collective, what this rank has passed to the backend since construction or reset_traffic().
  TrafficCount traffic(Collective op) const;
  void reset_traffic();

  // How the backend carries out `op` for tensors on `device`: "native", or the composition used where the
  // backend has no such primitive (1.13's Gloo has no reduce-scatter: an all-to-all then a local sum).
  std::string algorithm(Collective op, const torch::Device& device) const;

  // Turns a failure inside a collective into a message that names the rank(s) that stopped. Waits up to a
  // few heartbeat intervals to tell a silent rank from a live one.
  std::string explain_failure(const std::string& transport_message);

  struct Backends;

 private:
  Communicator(RankEnvironment env, CommunicatorOptions options);
  void count(Collective op, const torch::Tensor& payload);
  PendingCollective guarded(std::function<void()> wait);
  template <typename Launch>
  PendingCollective launch(const torch::Device& device, Launch&& call);
  void check_usable();

  RankEnvironment env_;
  CommunicatorOptions options_;
  std::unique_ptr<Backends> backends_;
  std::string name_ = "world";
  std::vector<int> members_;              // world ranks, for a group; empty for the world
  std::shared_ptr<Communicator> parent_;  // the world a group was made from: its store, heartbeats and failures
  std::vector<TrafficCount> traffic_;     // by Collective
};

// The rank environment of this process (parallel/rank_environment.h), connected.
std::shared_ptr<Communicator> connect_from_environment(const CommunicatorOptions& options = {});

}  // namespace trainbench::parallel
