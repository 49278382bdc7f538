#pragma once
// What the harness needs from the processes that train one run together: who it is, a barrier to agree on
// the clock, and small reductions for the figures it logs. Torch-free, so the harness stays plain C++;
// parallel/communicator.h implements it over c10d, and a single process uses SingleRank.
#include <string>
#include <vector>

namespace trainbench {

class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual void barrier() = 0;
  // Element-wise sum over all ranks; every rank gets the result.
  virtual void sum(std::vector<double>& values) = 0;
  // Every rank gets `root`'s values.
  virtual void broadcast(std::vector<double>& values, int root) = 0;
  // Tells the other ranks why this one is giving up, so their errors can name it and the cause.
  virtual void report_failure(const std::string& reason) = 0;
};

class SingleRank : public RankGroup {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  void barrier() override {}
  void sum(std::vector<double>&) override {}
  void broadcast(std::vector<double>&, int) override {}
  void report_failure(const std::string&) override {}
};

}  // namespace trainbench
