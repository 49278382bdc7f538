#include "workloads/registry.h"

#include "dist/communicator.h"
#include "util/error.h"
#include "workloads/bert/bert_workload.h"
#include "workloads/dlrm/dlrm_workload.h"
#include "workloads/resnet/resnet_workload.h"

extern const char* const kDlrmPresets;
extern const char* const kResnetPresets;
extern const char* const kBertPresets;

namespace trainbench {

const std::vector<WorkloadEntry>& workload_registry() {
  static const std::vector<WorkloadEntry> entries = {
      {"resnet", "Image classification: ResNet-50 v1.5 on ImageNet (MLPerf Training v1.1 'resnet')", kResnetPresets,
       resnet::create_workload, resnet::make_dataset, resnet::bench},
      {"dlrm", "Recommendation: DLRM on Criteo 1TB click logs (MLPerf Training v1.1 'dlrm')", kDlrmPresets,
       dlrm::create_workload, dlrm::make_dataset, dlrm::bench, dlrm::prepare_dataset},
      {"bert", "Language model: BERT-Large pre-training, masked LM and next sentence (MLPerf Training v1.1 'bert')", kBertPresets,
       bert::create_workload, bert::make_dataset, bert::bench},
  };
  return entries;
}

std::shared_ptr<dist::Communicator> communicator_or_single(const WorkloadSettings& settings) {
  return settings.communicator ? settings.communicator : dist::Communicator::connect(dist::RankEnvironment{});
}

int64_t local_batch_size(const Config& config, const std::string& field, int world) {
  const int64_t global = config.integer(field);
  if (global % world != 0)
    fail(config.name() + ": " + field, std::to_string(global) + " (the global batch) is not divisible by the " +
                                           std::to_string(world) + " ranks");
  return global / world;
}

const WorkloadEntry& find_workload(const std::string& name) {
  std::string known;
  for (const auto& entry : workload_registry()) {
    if (entry.name == name) return entry;
    known += (known.empty() ? "" : ", ") + entry.name;
  }
  fail("benchmark '" + name + "'", "unknown (expected one of: " + known + ")");
}

}  // namespace trainbench
