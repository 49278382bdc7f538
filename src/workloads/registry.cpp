#include "workloads/registry.h"

#include "util/error.h"
#include "workloads/bert/bert_workload.h"
#include "workloads/resnet/resnet_workload.h"

extern const char* const kResnetPresets;
extern const char* const kBertPresets;

namespace trainbench {

const std::vector<WorkloadEntry>& workload_registry() {
  static const std::vector<WorkloadEntry> entries = {
      {"resnet", "Image classification: ResNet-50 v1.5 on ImageNet (MLPerf Training v1.1 'resnet')", kResnetPresets,
       resnet::create_workload, resnet::make_dataset, resnet::bench},
      {"bert", "Language model: BERT-Large pre-training, masked LM and next sentence (MLPerf Training v1.1 'bert')", kBertPresets,
       bert::create_workload, bert::make_dataset, bert::bench},
  };
  return entries;
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
