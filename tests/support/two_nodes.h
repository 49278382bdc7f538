#pragma once
// Two "nodes" on one machine: two network namespaces joined by a veth pair, for runs whose ranks talk over a
// real network link (their own addresses, interfaces and routes) rather than loopback. Needs root and `ip
// netns`; unavailable() says why not.
#include <cstdlib>
#include <string>
#include <sys/types.h>
#include <unistd.h>

namespace trainbench::testing {

inline int shell(const std::string& command) { return std::system((command + " > /dev/null 2>&1").c_str()); }

// Two namespaces, a veth pair between them with 10.218.<n>.1 and .2; removed by the destructor.
class TwoNodes {
 public:
  TwoNodes() : tag_(std::to_string(::getpid() % 100000)) {
    if (::geteuid() != 0) {
      reason_ = "not root";
      return;
    }
    const std::string subnet = "10.218." + std::to_string(::getpid() % 250) + ".";
    address_a_ = subnet + "1";
    address_b_ = subnet + "2";
    const std::string setup = "ip netns add " + ns_a() + " && ip netns add " + ns_b() + " && ip link add " + veth_a() +
                              " type veth peer name " + veth_b() + " && ip link set " + veth_a() + " netns " + ns_a() +
                              " && ip link set " + veth_b() + " netns " + ns_b() + " && ip -n " + ns_a() + " addr add " +
                              address_a_ + "/24 dev " + veth_a() + " && ip -n " + ns_b() + " addr add " + address_b_ +
                              "/24 dev " + veth_b() + " && ip -n " + ns_a() + " link set " + veth_a() + " up && ip -n " +
                              ns_b() + " link set " + veth_b() + " up && ip -n " + ns_a() + " link set lo up && ip -n " +
                              ns_b() + " link set lo up";
    if (shell(setup) != 0) reason_ = "cannot create two network namespaces joined by a veth pair (`ip netns`, `ip link`)";
  }
  ~TwoNodes() { shell("ip netns del " + ns_a() + "; ip netns del " + ns_b()); }

  const std::string& unavailable() const { return reason_; }
  std::string ns_a() const { return "tb18a" + tag_; }
  std::string ns_b() const { return "tb18b" + tag_; }
  std::string veth_a() const { return "tb18va" + tag_; }
  std::string veth_b() const { return "tb18vb" + tag_; }
  const std::string& address_a() const { return address_a_; }
  // Cuts the link: both directions, and neither side gets a reset.
  void cut() const { shell("ip -n " + ns_a() + " link set " + veth_a() + " down"); }

 private:
  std::string tag_, address_a_, address_b_, reason_;
};

// `command` (a trainbench command line) as node `node_rank` (0: the namespace rank 0 hosts the store in)
// of `nodes`, its Gloo traffic on that node's veth.
inline std::string on_node(const TwoNodes& nodes, int node_rank, const std::string& command) {
  return "ip netns exec " + (node_rank == 0 ? nodes.ns_a() : nodes.ns_b()) + " env GLOO_SOCKET_IFNAME=" +
         (node_rank == 0 ? nodes.veth_a() : nodes.veth_b()) + " " + command;
}

}  // namespace trainbench::testing
