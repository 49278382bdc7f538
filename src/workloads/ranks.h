#pragma once
// The ranks this process trains with (started by a launcher: trainbench launch, torchrun, srun, mpirun; or
// alone, a world of one), as the CLI and the harness see them. Torch-free: the CLI holds it without
// LibTorch headers, the harness uses it as its RankGroup, and workloads get the c10d communicator inside.
#include <memory>
#include <string>
#include <vector>

#include "harness/rank_group.h"

namespace trainbench {

namespace parallel {
class Communicator;
}

class RankSession : public RankGroup {
 public:
  // Joins the other ranks of this process's rank environment; a collective that waits longer than
  // timeout_seconds fails naming the rank that stopped.
  static std::shared_ptr<RankSession> join(double timeout_seconds);

  const std::shared_ptr<parallel::Communicator>& communicator() const { return communicator_; }

  int rank() const override;
  int world() const override;
  void barrier() override;
  void sum(std::vector<double>& values) override;
  void broadcast(std::vector<double>& values, int root) override;
  void report_failure(const std::string& reason) override;

 private:
  explicit RankSession(std::shared_ptr<parallel::Communicator> communicator) : communicator_(std::move(communicator)) {}
  std::shared_ptr<parallel::Communicator> communicator_;
};

}  // namespace trainbench
