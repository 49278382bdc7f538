#include "workloads/ranks.h"

#include <chrono>

#include "parallel/communicator.h"

namespace trainbench {

std::shared_ptr<RankSession> RankSession::join(double timeout_seconds) {
  parallel::CommunicatorOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  return std::shared_ptr<RankSession>(new RankSession(parallel::connect_from_environment(options)));
}

int RankSession::rank() const { return communicator_->rank(); }
int RankSession::world() const { return communicator_->world(); }
void RankSession::barrier() { communicator_->barrier(); }
void RankSession::sum(std::vector<double>& values) { communicator_->sum(values); }
void RankSession::broadcast(std::vector<double>& values, int root) { communicator_->broadcast(values, root); }
void RankSession::report_failure(const std::string& reason) { communicator_->report_failure(reason); }

}  // namespace trainbench
