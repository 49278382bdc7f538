// libFuzzer target: any bytes as a BERT HDF5 shard. trainbench checks the datasets' names, types and
// shapes; the result is samples whose arrays agree with each other, or an Error naming the file.
#include <cstdlib>

#include "data/bert_shards.h"
#include "fuzz_entry.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string path = trainbench::fuzz::write_scratch_file("shard.hdf5", data, size);
  try {
    const trainbench::data::BertSamples samples = trainbench::data::read_bert_shard(path);
    const auto n = static_cast<size_t>(samples.size());
    const auto sequences = n * static_cast<size_t>(samples.seq_length);
    const auto predictions = n * static_cast<size_t>(samples.max_predictions);
    if (samples.input_ids.size() != sequences || samples.input_mask.size() != sequences ||
        samples.segment_ids.size() != sequences || samples.masked_lm_positions.size() != predictions ||
        samples.masked_lm_ids.size() != predictions)
      std::abort();
  } catch (const trainbench::Error&) {
  }
  return 0;
}
