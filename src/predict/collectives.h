#pragma once
// Cost of the collectives data-parallel training waits on, in the alpha-beta model: a message of S bytes over
// a link costs alpha (latency) per hop plus S / beta (bandwidth). Multi-node all-reduce is hierarchical, as
// NCCL runs it on nodes of several devices: reduce-scatter inside the node, an all-reduce of each device's
// 1/G shard across nodes (every device on its own share of the node's network), all-gather inside the node.
// docs/predict.md gives the derivations.

namespace trainbench::predict {

struct Link {
  double bytes_per_second = 0;  // one direction; 0 means unknown: then the link costs nothing
  double latency_seconds = 0;   // per hop
};

// Ring all-reduce over p ranks: 2(p-1) steps of S/p bytes each.
double ring_all_reduce_seconds(double bytes, int ranks, const Link& link);
// Pipelined double binary tree (NCCL's tree): every rank sends and receives about 2S, and a message
// crosses 2*ceil(log2 p) hops.
double tree_all_reduce_seconds(double bytes, int ranks, const Link& link);
// Ring reduce-scatter or all-gather over p ranks: p-1 steps of S/p bytes.
double ring_gather_seconds(double bytes, int ranks, const Link& link);

// All-reduce of `bytes` over nodes x devices_per_node ranks: intra-node reduce-scatter and all-gather on
// `intra`, and across nodes the cheaper of ring and tree on `inter` shared by the node's devices.
double hierarchical_all_reduce_seconds(double bytes, int nodes, int devices_per_node, const Link& intra,
                                       const Link& inter);

// All-to-all where every device sends `bytes_per_device` spread evenly over all devices (DLRM's embedding
// exchange): the share bound for other nodes crosses the node's network, the rest the intra-node links.
double all_to_all_seconds(double bytes_per_device, int nodes, int devices_per_node, const Link& intra,
                          const Link& inter);

// The part of a gradient exchange that training waits for, when the exchange runs alongside the share
// `overlap` (0..1) of the compute (the backward pass, as gradients become ready bucket by bucket).
double exposed_seconds(double exchange_seconds, double compute_seconds, double overlap);

}  // namespace trainbench::predict
