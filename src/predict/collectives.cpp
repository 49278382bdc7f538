#include "predict/collectives.h"

#include <algorithm>
#include <cmath>

namespace trainbench::predict {

namespace {

double transfer_seconds(double bytes, const Link& link) {
  return link.bytes_per_second > 0 ? bytes / link.bytes_per_second : 0;
}

}  // namespace

double ring_all_reduce_seconds(double bytes, int ranks, const Link& link) {
  if (ranks <= 1) return 0;
  const double steps = 2.0 * (ranks - 1);
  return steps * link.latency_seconds + transfer_seconds(steps / ranks * bytes, link);
}

double tree_all_reduce_seconds(double bytes, int ranks, const Link& link) {
  if (ranks <= 1) return 0;
  const double hops = 2.0 * std::ceil(std::log2(static_cast<double>(ranks)));
  return hops * link.latency_seconds + transfer_seconds(2.0 * bytes, link);
}

double ring_gather_seconds(double bytes, int ranks, const Link& link) {
  if (ranks <= 1) return 0;
  const double steps = ranks - 1.0;
  return steps * link.latency_seconds + transfer_seconds(steps / ranks * bytes, link);
}

double hierarchical_all_reduce_seconds(double bytes, int nodes, int devices_per_node, const Link& intra,
                                       const Link& inter) {
  const double inside = 2.0 * ring_gather_seconds(bytes, devices_per_node, intra);
  // Each device all-reduces its 1/G shard with its peers on the other nodes, on 1/G of the node's network.
  const double shard = bytes / devices_per_node;
  const Link share{inter.bytes_per_second / devices_per_node, inter.latency_seconds};
  const double across = std::min(ring_all_reduce_seconds(shard, nodes, share), tree_all_reduce_seconds(shard, nodes, share));
  return inside + (nodes > 1 ? across : 0);
}

double all_to_all_seconds(double bytes_per_device, int nodes, int devices_per_node, const Link& intra,
                          const Link& inter) {
  const double devices = static_cast<double>(nodes) * devices_per_node;
  if (devices <= 1) return 0;
  const double to_other_nodes = bytes_per_device * (devices - devices_per_node) / devices * devices_per_node;
  const double inside_node = bytes_per_device * (devices_per_node - 1) / devices;
  const double across = nodes > 1 ? inter.latency_seconds + transfer_seconds(to_other_nodes, inter) : 0;
  const double inside = devices_per_node > 1 ? intra.latency_seconds + transfer_seconds(inside_node, intra) : 0;
  return std::max(across, inside);
}

double exposed_seconds(double exchange_seconds, double compute_seconds, double overlap) {
  return std::max(0.0, exchange_seconds - std::clamp(overlap, 0.0, 1.0) * compute_seconds);
}

}  // namespace trainbench::predict
