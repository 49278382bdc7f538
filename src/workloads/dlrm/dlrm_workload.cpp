// The recommendation benchmark (MLPerf "dlrm"): DLRM on the Criteo 1TB click logs.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>

#include <torch/torch.h>

#include "data/auc.h"
#include "data/batch_pipeline.h"
#include "data/criteo.h"
#include "data/generators/criteo_synthetic.h"
#include "data/generators/dataset_directory.h"
#include "parallel/communicator.h"
#include "parallel/gather.h"
#include "parallel/gradient_sync.h"
#include "util/error.h"
#include "workloads/common.h"
#include "workloads/dlrm/model.h"

extern const char* const trainbench_presets_dlrm;

namespace trainbench::dlrm {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset = "train.bin and eval.bin from `trainbench data prepare dlrm`";

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

// The widths the dot interaction needs, which no range of settings.json can state: checked before the log opens.
void check_mlp_widths(const Config& config) {
  const std::vector<int64_t> bottom = config.integers("bottom_mlp"), top = config.integers("top_mlp");
  const int64_t dim = config.integer("embedding_dim");
  if (bottom.empty() || bottom.back() != dim)
    fail(config.name() + ": bottom_mlp", "must end in embedding_dim (" + std::to_string(dim) + ") outputs, got " +
                                             nlohmann::json(bottom).dump());
  if (top.empty() || top.back() != 1)
    fail(config.name() + ": top_mlp", "must end in 1 output (the click logit), got " + nlohmann::json(top).dump());
}

bool shards_tables(const Config& config) { return config.string("embedding_sharding") == "sharded"; }

// The tables' layout over `world` ranks: none when they are replicated (or there is one rank to shard over).
std::optional<ShardPlan> shard_plan(const Config& config, int world) {
  if (!shards_tables(config) || world == 1) return std::nullopt;
  return plan_table_shards(config.integers("table_sizes"), world);
}

// The model rank `rank` of `plan` holds; `seed` keys the tables' initialization (the same on every rank).
DlrmOptions model_options(const Config& config, const std::optional<ShardPlan>& plan = std::nullopt, int rank = 0,
                          int64_t seed = 0) {
  table_sizes(config);  // validates
  check_mlp_widths(config);
  DlrmOptions options = DlrmOptions(config.integers("table_sizes"))
                            .embedding_dim(config.integer("embedding_dim"))
                            .bottom_mlp(config.integers("bottom_mlp"))
                            .top_mlp(config.integers("top_mlp"))
                            .embedding_seed(static_cast<uint64_t>(seed));
  if (plan) options.shards(plan->on_rank(rank));
  return options;
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

class DlrmWorkload : public WorkloadBase {
 public:
  explicit DlrmWorkload(WorkloadSettings settings) : WorkloadBase(std::move(settings)) { model_options(config_); }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("samples");
    // Evaluations at 1.05, 1.10, ... as the reference numbers them: epoch_num = 1 + epochs trained.
    const double interval = 1.0 / static_cast<double>(config_.integer("evals_per_epoch"));
    description.schedule.first_block = interval;
    description.schedule.interval = interval;
    description.schedule.max_epochs = config_.number("max_epochs");
    description.schedule.positional = true;
    const DlrmLrSchedule schedule = lr_schedule(config_);
    description.hyperparameters = {
        {"global_batch_size", config_.integer("batch_size")},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"trainbench_embedding_sharding", config_.string("embedding_sharding")},
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
    seed_torch(settings_);
    require_data_dir(kDataset);
    std::optional<ShardPlan> plan = shard_plan(config_, communicator_->world());
    model_ = Dlrm(model_options(config_, plan, communicator_->rank(), settings_.seed));
    if (!settings_.weights.empty()) load_state_dict(settings_.weights, official_state(model_, "--weights"));
    model_->to(device_);
    model_->train();
    // The tables are initialized alike on every rank from the shared seed, so only the MLP is broadcast.
    mlp_gradients_.emplace(*communicator_, model_->mlp_parameters(), std::vector<torch::Tensor>{});
    parallel_.emplace(*communicator_, *mlp_gradients_, std::move(plan));
    loop_.emplace(config_, device_, model_->mlp_parameters(), &*mlp_gradients_);
    schedule_ = lr_schedule(config_);
    return model_->initialized_tensor_names();
  }

  // --save-model: the trained model under DLRM_Net's names.
  void save_weights(const std::string& path) const override { save_state_dict(official_state(model_, "--save-model"), path); }

  DataSummary open_data() override {
    const std::vector<uint64_t> sizes = table_sizes(config_);
    data::CriteoReaderOptions train_options;
    train_options.global_batch_size = config_.integer("batch_size");
    local_batch("batch_size");  // each rank's share must be whole
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
    loop_->begin_block(control);
    const double row_exchange_before = parallel_->row_exchange_seconds;
    for (int64_t step = first; step < last; ++step) {
      if (!input_ || input_step_ != step) start_input(step);
      loop_->fetch([&] { batch_ = *input_->next(); });  // batch_'s old buffers go: the last step's tensors are gone
      ++input_step_;
      if (batch_.size == 0) continue;
      const BatchTensors tensors = as_tensors(batch_, device_);
      loop_->train(training_step(model_, *parallel_, *loop_, tensors.dense, tensors.sparse, tensors.labels, schedule_.at(step)));
    }
    control.add_rank_wait(parallel_->row_exchange_seconds - row_exchange_before);
    return loop_->end_block();  // the mean loss over the steps that trained, as every workload averages
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    model_->eval();
    std::vector<torch::Tensor> scores, labels;  // this rank's share of the eval set
    eval_->start_epoch(0);
    data::CriteoBatch batch;
    while (eval_->next(batch)) {
      // Every rank reads as many batches; sharded, each lookup is a collective, so an empty one takes part too.
      if (batch.size == 0 && !parallel_->sharding) continue;
      const BatchTensors tensors = as_tensors(batch, device_);
      scores.push_back(torch::sigmoid(click_logits(model_, *parallel_, tensors.dense, tensors.sparse)).to(torch::kCPU));
      labels.push_back(tensors.labels.to(torch::kCPU).clone());
      control.check_interrupt();
    }
    model_->train();
    // AUC is exact over the whole eval set, so every rank's scores are gathered, not averaged.
    const torch::Tensor pairs = parallel::allgather_concat(
        *communicator_, scores.empty() ? torch::empty({0, 2}) : torch::stack({torch::cat(scores), torch::cat(labels)}, 1));
    const torch::Tensor all_scores = pairs.select(1, 0).contiguous(), all_labels = pairs.select(1, 1).contiguous();
    data::AucAccumulator auc;
    auc.add(all_scores.data_ptr<float>(), all_labels.data_ptr<float>(), all_scores.numel());
    return auc.auc();
  }

 private:
  // Training step `step`'s batch from the reader (global steps run on across epochs and blocks).
  void read_step(int64_t step, data::CriteoBatch& batch) {
    const int64_t epoch = step / train_->batches_per_epoch();
    if (epoch != epoch_) {
      train_->start_epoch(epoch);
      epoch_ = epoch;
    }
    train_->next(batch);
  }
  // Reads training batches from step `step` on, in order, on one reader thread kept kReadAheadBatches batches
  // ahead of the training thread, so the reader's pread and log transform stay off it. The reader runs on
  // across blocks and evaluations (which read eval_), and past the run's last step by up to that depth.
  void start_input(int64_t step) {
    input_.reset();  // joins the reader before another starts: train_ reads sequentially
    input_.emplace(1, kReadAheadBatches);
    input_->start(std::numeric_limits<int64_t>::max(), [this, step](int64_t index, const std::atomic<bool>&) {
      data::CriteoBatch batch;
      read_step(step + index, batch);
      return batch;
    });
    input_step_ = step;
  }

  Dlrm model_{nullptr};
  std::optional<parallel::GradientSync> mlp_gradients_;
  std::optional<Parallelism> parallel_;
  std::optional<TrainingLoop> loop_;
  DlrmLrSchedule schedule_;
  std::optional<data::CriteoBatchReader> train_, eval_;
  data::CriteoBatch batch_;
  int64_t epoch_ = -1;  // the epoch train_ is reading: only the reader thread touches it and train_ once started
  static constexpr int kReadAheadBatches = 4;
  std::optional<data::BatchPipeline<data::CriteoBatch>> input_;  // after train_: joined before the reader goes
  int64_t input_step_ = -1;                                       // the step input_ hands out next
};

// The day files a preset trains and evaluates on: its generated set's, or `days` (24 for Criteo 1TB).
int preset_days(const Config& config) {
  if (config.values().contains("dataset"))
    return static_cast<int>(Config(config.name() + ": dataset", config.values().at("dataset")).integer_at_least("days", 2));
  return static_cast<int>(config.integer_at_least("days", 2));
}

void prepare_dataset(const Config& config, const std::string& in_dir, const std::string& out_dir) {
  data::prepare_criteo(in_dir, out_dir, table_sizes(config), preset_days(config));
}

// Generated day files in <out_dir>/days (with planted.json) and their prepared form in <out_dir>, written
// into a staging folder renamed at the end: a failed make (a full disk) leaves nothing a retry would refuse.
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
  data::write_new_dataset_directory(out_dir, [&](const fs::path& staging) {
    const std::string days = (staging / "days").string();
    data::make_criteo_synthetic(days, options);
    prepare_dataset(config, days, staging.string());
  });
}

void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out) {
  const Config& config = settings.config;
  BenchRun run(settings, bench_settings);
  const torch::Device device = run.device;
  const auto& communicator = run.communicator;
  const int64_t batch_size = run.local_batch;
  std::optional<ShardPlan> plan = shard_plan(config, communicator->world());
  Dlrm model(model_options(config, plan, communicator->rank(), settings.seed));
  model->to(device);
  model->train();
  parallel::GradientSync mlp_gradients(*communicator, model->mlp_parameters(), {});
  Parallelism parallel(*communicator, mlp_gradients, std::move(plan));
  // Training throughput: the full step on a batch already in memory, rows drawn uniformly per table.
  const auto dense = torch::rand({batch_size, data::kCriteoDense}, device) * 5;
  std::vector<torch::Tensor> columns;
  for (const int64_t size : config.integers("table_sizes"))
    columns.push_back(torch::randint(size, {batch_size, 1}, torch::TensorOptions(torch::kInt64).device(device)));
  const auto sparse = torch::cat(columns, 1);
  const auto labels = torch::randint(2, {batch_size}, device).to(torch::kFloat32);
  TrainingLoop loop(config, device, model->mlp_parameters(), &mlp_gradients);
  const double step_time =
      run.training_step_seconds([&] { loop.update(training_step(model, parallel, loop, dense, sparse, labels, 0.01)); });
  run.print_training(out, step_time, "samples", 3.0 * 2.0 * static_cast<double>(model->forward_macs()),
                     std::to_string(config.integers("table_sizes").size()) + " tables, dim " +
                         std::to_string(config.integer("embedding_dim")) + ", " + config.string("embedding_sharding"));
}

// bench --shard-plan N: each rank's tables and bytes over N ranks, and what one step's exchanges carry.
void print_shard_plan(const Config& config, int ranks, std::ostream& out) {
  const std::vector<int64_t> sizes = config.integers("table_sizes");
  const int64_t dim = config.integer("embedding_dim");
  const double row_bytes = 4.0 * static_cast<double>(dim);  // fp32 tables in every precision
  const auto gib = [](double bytes) {  // "12.36 GiB", or MiB / KiB for the mini tables
    const char* units[] = {"KiB", "MiB", "GiB"};
    int unit = 0;
    bytes /= 1024.0;
    while (unit < 2 && bytes >= 1024.0) {
      bytes /= 1024.0;
      ++unit;
    }
    std::ostringstream text;
    text << std::fixed << std::setprecision(2) << bytes << " " << units[unit];
    return text.str();
  };
  int64_t total_rows = 0;
  for (const int64_t size : sizes) total_rows += size;
  const int64_t batch = config.integer("batch_size");
  const std::optional<ShardPlan> plan = shard_plan(config, ranks);
  if (!plan) {
    out << "embedding_sharding=" << config.string("embedding_sharding") << " over " << ranks
        << (ranks == 1 ? " rank" : " ranks") << ": every rank holds all " << sizes.size() << " tables, " << total_rows
        << " rows, " << gib(static_cast<double>(total_rows) * row_bytes) << "\n";
    if (ranks > 1)
      out << "  per step each rank all-gathers the rows its " << batch / ranks << " samples touched and their gradients: "
          << gib(static_cast<double>(batch) * static_cast<double>(sizes.size()) * (row_bytes + 8)) << " received\n";
    return;
  }
  out << "embedding_sharding=sharded over " << ranks << " ranks: " << sizes.size() << " tables, " << total_rows << " rows, "
      << gib(static_cast<double>(total_rows) * row_bytes) << " in all\n";
  for (int rank = 0; rank < ranks; ++rank) {
    int whole = 0;
    std::vector<std::string> ranges;
    for (const TableShard& shard : plan->on_rank(rank)) {
      if (shard.rows == sizes[static_cast<size_t>(shard.table)])
        ++whole;
      else
        ranges.push_back(std::to_string(shard.table) + "[" + std::to_string(shard.first_row) + ", " +
                         std::to_string(shard.first_row + shard.rows) + ")");
    }
    out << "  rank " << rank << ": " << whole << " whole table" << (whole == 1 ? "" : "s");
    if (!ranges.empty()) {
      out << ", row ranges of table";
      for (const std::string& range : ranges) out << " " << range;
    }
    out << "; " << plan->rows_on_rank(rank) << " rows, " << gib(static_cast<double>(plan->rows_on_rank(rank)) * row_bytes) << "\n";
  }
  // Each all-to-all chunk carries a rank's samples times the most shards any rank holds, both ways.
  const double exchanged = static_cast<double>(batch) * static_cast<double>(plan->max_shards_per_rank()) * row_bytes;
  out << "  per step each rank sends and receives " << gib(exchanged) << " of vectors forward and as much gradient"
      << " backward (" << batch / ranks << " samples x " << ranks << " ranks x " << plan->max_shards_per_rank()
      << " shard slots x dim " << dim << "), after an all-gather of " << gib(static_cast<double>(batch) * 8.0 * static_cast<double>(sizes.size()))
      << " of ids\n";
}

// checkpoint export: the model a run of `settings` starts from (its tables keyed by the seed, as build() makes
// them), replicated, under DLRM_Net's names.
void export_weights(const WorkloadSettings& settings, const std::string& out_path) {
  seed_torch(settings);
  Dlrm model(model_options(settings.config, std::nullopt, 0, settings.seed));
  if (!settings.weights.empty()) load_state_dict(settings.weights, official_state(model, "--weights"));
  save_state_dict(official_state(model, "checkpoint export"), out_path);
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"dlrm", "Recommendation: DLRM on the Criteo 1TB click logs, target AUC 0.8025", trainbench_presets_dlrm,
          kDataset, construct_workload<DlrmWorkload>, bench, make_dataset, prepare_dataset, export_weights,
          print_shard_plan};
}

}  // namespace trainbench::dlrm
