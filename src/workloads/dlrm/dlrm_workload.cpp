#include "workloads/dlrm/dlrm_workload.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <torch/torch.h>

#include "data/auc.h"
#include "data/criteo.h"
#include "data/generators/criteo_synthetic.h"
#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "util/error.h"
#include "workloads/bench_timing.h"
#include "workloads/device.h"
#include "workloads/dlrm/model.h"

namespace trainbench::dlrm {

namespace {

namespace fs = std::filesystem;

std::vector<uint64_t> table_sizes(const Config& config) {
  std::vector<uint64_t> sizes;
  for (const int64_t size : config.integers("table_sizes")) {
    if (size < 1) fail(config.name() + ": table_sizes", "every size must be positive");
    sizes.push_back(static_cast<uint64_t>(size));
  }
  if (sizes.size() != data::kCriteoSparse)
    fail(config.name() + ": table_sizes", "expected 26 sizes (one per categorical feature), got " + std::to_string(sizes.size()));
  return sizes;
}

DlrmOptions model_options(const Config& config) {
  table_sizes(config);  // validates
  return DlrmOptions(config.integers("table_sizes"))
      .embedding_dim(config.integer("embedding_dim"))
      .bottom_mlp(config.integers("bottom_mlp"))
      .top_mlp(config.integers("top_mlp"));
}

DlrmLrSchedule lr_schedule(const Config& config) {
  return {config.number("base_learning_rate"), config.integer("warmup_steps"), config.integer("decay_start_step"),
          config.integer("decay_steps")};
}

// Wraps a reader batch as tensors on `device`: no copy on the CPU (the batch must outlive them).
struct BatchTensors {
  torch::Tensor dense, sparse, labels;
};
BatchTensors as_tensors(data::CriteoBatch& batch, torch::Device device) {
  return {torch::from_blob(batch.dense.data(), {batch.size, data::kCriteoDense}, torch::kFloat32).to(device),
          torch::from_blob(batch.sparse.data(), {batch.size, data::kCriteoSparse}, torch::kInt64).to(device),
          torch::from_blob(batch.labels.data(), {batch.size}, torch::kFloat32).to(device)};
}

class DlrmWorkload : public Workload {
 public:
  explicit DlrmWorkload(WorkloadSettings settings)
      : settings_(std::move(settings)),
        config_(settings_.config),
        device_(resolve_device(settings_.device)),
        communicator_(communicator_or_single(settings_)) {}

  WorkloadDescription describe() const override {
    WorkloadDescription description;
    description.benchmark = "dlrm";
    description.preset = config_.name().substr(config_.name().find('/') + 1);
    description.sample_unit = "samples";
    description.threads = settings_.threads;
    description.device = device_.str();
    // Evaluations at 1.05, 1.10, ... as the reference numbers them: epoch_num = 1 + epochs trained.
    const double interval = 1.0 / static_cast<double>(config_.integer("evals_per_epoch"));
    description.schedule = {interval, interval, config_.number("max_epochs"), /*positional=*/true};
    description.target = {"eval_accuracy", config_.number("target"), true};
    const DlrmLrSchedule schedule = lr_schedule(config_);
    description.hyperparameters = {
        {"global_batch_size", config_.integer("batch_size")},
        {"gradient_accumulation_steps", 1},
        {"opt_name", "sgd"},
        {"opt_base_learning_rate", schedule.base_lr},
        {"sgd_opt_base_learning_rate", schedule.base_lr},
        {"opt_learning_rate_warmup_steps", schedule.warmup_steps},
        {"lr_decay_start_steps", schedule.decay_start_step},
        {"sgd_opt_learning_rate_decay_steps", schedule.decay_steps},
        {"sgd_opt_learning_rate_decay_poly_power", 2},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    torch::set_num_threads(settings_.threads);
    torch::manual_seed(settings_.seed);
    if (!fs::is_directory(settings_.data_dir))
      fail(settings_.data_dir, "dataset directory does not exist (expected train.bin and eval.bin from "
                               "`trainbench data prepare dlrm`)");
    model_ = Dlrm(model_options(config_));
    model_->to(device_);
    model_->train();
    // The tables are initialized alike on every rank from the shared seed, so only the MLP is broadcast.
    mlp_gradients_.emplace(*communicator_, model_->mlp_parameters(), std::vector<torch::Tensor>{});
    parallel_.emplace(DataParallel{*communicator_, *mlp_gradients_});
    schedule_ = lr_schedule(config_);
    return model_->initialized_tensor_names();
  }

  DataSummary open_data() override {
    const std::vector<uint64_t> sizes = table_sizes(config_);
    data::CriteoReaderOptions train_options;
    train_options.global_batch_size = config_.integer("batch_size");
    local_batch_size(config_, "batch_size", communicator_->world());  // each rank's share must be whole
    train_options.rank = communicator_->rank();
    train_options.world_size = communicator_->world();
    train_options.shuffle = true;
    train_options.seed = static_cast<uint64_t>(settings_.seed);
    train_.emplace((fs::path(settings_.data_dir) / "train.bin").string(), train_options, sizes);
    data::CriteoReaderOptions eval_options;
    eval_options.global_batch_size = config_.integer("eval_batch_size");
    eval_options.drop_last = false;
    eval_options.rank = communicator_->rank();
    eval_options.world_size = communicator_->world();
    eval_.emplace((fs::path(settings_.data_dir) / "eval.bin").string(), eval_options, sizes);
    DataSummary summary;
    summary.train_samples = train_->samples_per_epoch();
    summary.eval_samples = eval_->samples_per_epoch();
    return summary;
  }

  BlockReport train(const Block& block, RunControl& control) override {
    model_->train();
    // The block covers epochs [first - 1, first - 1 + count) of training; its global batches follow
    // from that, rounded the same way at both ends so consecutive blocks neither skip nor repeat one.
    const int64_t per_epoch = train_->batches_per_epoch();
    const auto batch_at = [&](double epochs) { return static_cast<int64_t>(std::llround(epochs * static_cast<double>(per_epoch))); };
    const int64_t first = batch_at(block.first_epoch_num - 1), last = batch_at(block.first_epoch_num - 1 + block.epoch_count);
    BlockReport report;
    double loss_sum = 0;
    for (int64_t step = first; step < last; ++step) {
      const int64_t epoch = step / per_epoch;
      if (epoch != epoch_) {
        train_->start_epoch(epoch);
        epoch_ = epoch;
      }
      train_->next(batch_);
      if (batch_.size == 0) continue;
      const BatchTensors tensors = as_tensors(batch_, device_);
      const double loss =
          train_step(model_, *parallel_, tensors.dense, tensors.sparse, tensors.labels, schedule_.at(step)).item<double>();
      if (!std::isfinite(loss))
        fail(config_.name(), "training diverged (loss " + std::to_string(loss) + " at step " + std::to_string(step) + ")");
      loss_sum += loss;
      report.samples += batch_.size;
      control.step(batch_.size, loss);
    }
    report.mean_loss = last > first ? loss_sum / static_cast<double>(last - first) : 0;
    return report;
  }

  double evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    model_->eval();
    std::vector<torch::Tensor> scores, labels;  // this rank's share of the eval set
    eval_->start_epoch(0);
    data::CriteoBatch batch;
    while (eval_->next(batch)) {
      if (batch.size == 0) continue;
      const BatchTensors tensors = as_tensors(batch, device_);
      scores.push_back(torch::sigmoid(model_->forward(tensors.dense, tensors.sparse)).to(torch::kCPU));
      labels.push_back(tensors.labels.to(torch::kCPU).clone());
      control.check_interrupt();
    }
    model_->train();
    // AUC is exact over the whole eval set, so every rank's scores are gathered, not averaged.
    const torch::Tensor pairs = dist::allgather_concat(
        *communicator_, scores.empty() ? torch::empty({0, 2}) : torch::stack({torch::cat(scores), torch::cat(labels)}, 1));
    const torch::Tensor all_scores = pairs.select(1, 0).contiguous(), all_labels = pairs.select(1, 1).contiguous();
    data::AucAccumulator auc;
    auc.add(all_scores.data_ptr<float>(), all_labels.data_ptr<float>(), all_scores.numel());
    return auc.auc();
  }

 private:
  WorkloadSettings settings_;
  const Config& config_;
  torch::Device device_;
  std::shared_ptr<dist::Communicator> communicator_;
  Dlrm model_{nullptr};
  std::optional<dist::GradientSync> mlp_gradients_;
  std::optional<DataParallel> parallel_;
  DlrmLrSchedule schedule_;
  std::optional<data::CriteoBatchReader> train_, eval_;
  data::CriteoBatch batch_;
  int64_t epoch_ = -1;
};

}  // namespace

std::unique_ptr<Workload> create_workload(const WorkloadSettings& settings) {
  return std::make_unique<DlrmWorkload>(settings);
}

void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  if (!config.values().contains("dataset"))
    fail("--preset " + config.name(), "has no generated dataset; prepare the Criteo day files with `trainbench data prepare dlrm`");
  const Config dataset(config.name() + ": dataset", config.values().at("dataset"));
  data::CriteoSyntheticOptions options;
  options.days = static_cast<int>(dataset.integer("days"));
  options.samples_per_day = dataset.integer("samples_per_day");
  options.eval_samples = dataset.integer("eval_samples");
  options.cardinalities = config.integers("table_sizes");
  options.zipf_exponent = dataset.number("zipf_exponent");
  options.missing_dense = dataset.number("missing_dense");
  options.missing_sparse = dataset.number("missing_sparse");
  options.bias = dataset.number("bias");
  options.seed = static_cast<uint64_t>(seed);
  const std::string days = (fs::path(out_dir) / "days").string();
  data::make_criteo_synthetic(days, options);
  prepare_dataset(config, days, out_dir);
}

void prepare_dataset(const Config& config, const std::string& in_dir, const std::string& out_dir) {
  data::prepare_criteo(in_dir, out_dir, table_sizes(config));
}

void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out) {
  const Config& config = settings.config;
  torch::set_num_threads(settings.threads);
  torch::manual_seed(settings.seed);
  const torch::Device device = resolve_device(settings.device);
  const auto communicator = communicator_or_single(settings);
  const int64_t global_batch = config.integer("batch_size");
  const int64_t batch_size = local_batch_size(config, "batch_size", communicator->world());
  Dlrm model(model_options(config));
  model->to(device);
  model->train();
  dist::GradientSync mlp_gradients(*communicator, model->mlp_parameters(), {});
  DataParallel parallel{*communicator, mlp_gradients};
  // Training throughput: the full step on a batch already in memory, rows drawn uniformly per table.
  const auto dense = torch::rand({batch_size, data::kCriteoDense}, device) * 5;
  std::vector<torch::Tensor> columns;
  for (const int64_t size : config.integers("table_sizes"))
    columns.push_back(torch::randint(size, {batch_size, 1}, torch::TensorOptions(torch::kInt64).device(device)));
  const auto sparse = torch::cat(columns, 1);
  const auto labels = torch::randint(2, {batch_size}, device).to(torch::kFloat32);
  const double step_time = median_step_seconds(bench_settings, [&] {
    train_step(model, parallel, dense, sparse, labels, 0.01).item<double>();  // item() waits for the device
  });
  const double train_flops = 3.0 * 2.0 * static_cast<double>(model->forward_macs());
  char line[384];
  std::snprintf(line, sizeof line,
                "training      %10.1f samples/s  (batch %lld over %d rank(s), %s, %d threads/rank, median of %lld steps: %.5f s/step, %.1f GFLOP/s%s)\n",
                global_batch / step_time, static_cast<long long>(global_batch), communicator->world(), device.str().c_str(),
                settings.threads, static_cast<long long>(bench_settings.steps), step_time,
                train_flops * global_batch / step_time / 1e9,
                share_of_peak(train_flops * global_batch / step_time, bench_settings).c_str());
  out << line;
}

}  // namespace trainbench::dlrm
