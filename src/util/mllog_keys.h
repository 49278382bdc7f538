#pragma once
// The names in an MLPerf result log, spelled once for the writer (src/harness), the review (src/review) and
// the prediction (src/predict): the keys mlperf_logging's mllog defines that trainbench writes or reads, their
// metadata fields, and trainbench's own trainbench_* keys with the fields of their values. Rule files name
// keys as data and keep their own spelling; the line format is util/mllog_format.h.
namespace trainbench::mllog_keys {

// The submission, written first.
inline constexpr const char* kSubmissionBenchmark = "submission_benchmark";
inline constexpr const char* kSubmissionOrg = "submission_org";
inline constexpr const char* kSubmissionDivision = "submission_division";
inline constexpr const char* kSubmissionStatus = "submission_status";
inline constexpr const char* kSubmissionPlatform = "submission_platform";

// The lifecycle, in log order.
inline constexpr const char* kCacheClear = "cache_clear";
inline constexpr const char* kInitStart = "init_start";
inline constexpr const char* kInitStop = "init_stop";
inline constexpr const char* kRunStart = "run_start";
inline constexpr const char* kBlockStart = "block_start";
inline constexpr const char* kEpochStart = "epoch_start";  // what logs without blocks mark each epoch with
inline constexpr const char* kEvalStart = "eval_start";
inline constexpr const char* kEvalStop = "eval_stop";
inline constexpr const char* kBlockStop = "block_stop";
inline constexpr const char* kRunStop = "run_stop";

// Values.
inline constexpr const char* kSeed = "seed";
inline constexpr const char* kGlobalBatchSize = "global_batch_size";
inline constexpr const char* kTrainSamples = "train_samples";  // also the convergence unit of BERT's RCPs
inline constexpr const char* kEvalSamples = "eval_samples";
inline constexpr const char* kWeightsInitialization = "weights_initialization";
inline constexpr const char* kThroughput = "throughput";  // trainbench writes it per block: samples per second
inline constexpr const char* kEvalAccuracy = "eval_accuracy";  // the quality metric unless a benchmark names another

// Metadata fields.
inline constexpr const char* kEpochNum = "epoch_num";  // also the convergence unit of the other RCPs
inline constexpr const char* kFirstEpochNum = "first_epoch_num";
inline constexpr const char* kEpochCount = "epoch_count";
inline constexpr const char* kTensor = "tensor";  // of weights_initialization
inline constexpr const char* kStatus = "status";  // of run_stop: kSuccess or kAborted
inline constexpr const char* kSuccess = "success";
inline constexpr const char* kAborted = "aborted";
inline constexpr const char* kError = "error";  // of an aborted run_stop: why (trainbench's own)

// trainbench's own keys, written during init.
inline constexpr const char* kTrainbenchVersion = "trainbench_version";
inline constexpr const char* kTrainbenchLibtorch = "trainbench_libtorch";
inline constexpr const char* kTrainbenchPreset = "trainbench_preset";
inline constexpr const char* kTrainbenchTarget = "trainbench_target";
inline constexpr const char* kTrainbenchOverrides = "trainbench_overrides";
inline constexpr const char* kTrainbenchConfig = "trainbench_config";
inline constexpr const char* kTrainbenchThreads = "trainbench_threads";
inline constexpr const char* kTrainbenchDevice = "trainbench_device";
inline constexpr const char* kTrainbenchRanks = "trainbench_ranks";

// trainbench's own keys, written in the timed region.
inline constexpr const char* kTrainbenchTrainLoss = "trainbench_train_loss";
inline constexpr const char* kTrainbenchSkippedFiles = "trainbench_skipped_files";
inline constexpr const char* kTrainbenchTimeSplit = "trainbench_time_split";
inline constexpr const char* kTrainbenchCpuContention = "trainbench_cpu_contention";
inline constexpr const char* kTrainbenchWarning = "trainbench_warning";

// The parts of trainbench_time_split's value, in the order the harness writes them.
inline constexpr const char* kTrainingCompute = "training_compute";
inline constexpr const char* kInputWait = "input_wait";
inline constexpr const char* kEvaluation = "evaluation";
inline constexpr const char* kRankWait = "rank_wait";
inline constexpr const char* kOther = "other";

// The metadata of trainbench_time_split and trainbench_cpu_contention: their unit, and each part's share.
inline constexpr const char* kUnit = "unit";
inline constexpr const char* kShares = "shares";

// The fields of trainbench_cpu_contention's value and metadata.
inline constexpr const char* kOtherProcesses = "other_processes";
inline constexpr const char* kSteal = "steal";
inline constexpr const char* kCapacity = "capacity";
inline constexpr const char* kCpus = "cpus";
inline constexpr const char* kWarningShare = "warning_share";

}  // namespace trainbench::mllog_keys
