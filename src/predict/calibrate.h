#pragma once
// A calibration from published result logs: a result_<N>.txt, or a folder of them (a submission's
// results/<system>/<benchmark>/). Per run it takes, from the log's own timestamps and values: the time from
// run_start to the first block or epoch (the fixed start), the evaluations (eval_start to eval_stop), the
// training time (the rest), the samples trained (the convergence point x train_samples, or BERT's
// train_samples), and so the samples per second per device. The system description
// (<org>/systems/<system>.json), found beside the results, gives the device count and the links.
#include <nlohmann/json.hpp>
#include <string>

#include "predict/time_to_train.h"
#include "review/ruleset.h"

namespace trainbench::predict {

// Reads a link speed from a system description's free text: the first "<number> GB/s" or "Gb/s" ("Sec" and
// "sec" too), as bytes per second. `count_prefix` ("8x ") multiplies it when present. 0 when none is found.
double link_bytes_per_second(const std::string& text);

// The intra-node link (accelerator_interconnect, a both-directions figure for NVLink/NVSwitch, so halved)
// and the node's network for compute (host_networking's "Compute:" part, one direction per NIC, times
// the NIC count). A link not found is left at 0 and named in `notes`.
void links_from_system_description(const nlohmann::json& description, Link& intra, Link& inter,
                                   std::vector<std::string>& notes);

// Throws trainbench::Error naming the path when it holds no usable run.
Calibration calibrate_from_logs(const std::string& path, const review::Ruleset& ruleset);

}  // namespace trainbench::predict
