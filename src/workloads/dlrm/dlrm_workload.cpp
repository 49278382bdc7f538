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
#include "workloads/dlrm/settings.h"
#include "workloads/trainer.h"

extern const char* const trainbench_presets_dlrm;

namespace trainbench::dlrm {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDataset = "train.bin and eval.bin from `trainbench data prepare dlrm`";

// The preset's settings, with the widths the dot interaction needs, which no range of settings.json can state:
// checked before the log opens, and before bench or export builds the model.
Settings checked_settings(const Config& config) {
  const Settings preset = read_settings<Settings>(config);
  const int64_t dim = preset.embedding_dim;
  if (preset.bottom_mlp.empty() || preset.bottom_mlp.back() != dim)
    fail(config.name() + ": bottom_mlp", "must end in embedding_dim (" + std::to_string(dim) + ") outputs, got " +
                                             nlohmann::json(preset.bottom_mlp).dump());
  if (preset.top_mlp.empty() || preset.top_mlp.back() != 1)
    fail(config.name() + ": top_mlp",
         "must end in 1 output (the click logit), got " + nlohmann::json(preset.top_mlp).dump());
  return preset;
}

// The table sizes as the Criteo reader and preparation take them (settings.json keeps each one positive).
std::vector<uint64_t> table_sizes(const Settings& preset) {
  return {preset.table_sizes.begin(), preset.table_sizes.end()};
}

// The tables' layout over `world` ranks: none when they are replicated (or there is one rank to shard over).
std::optional<ShardPlan> shard_plan(const Settings& preset, int world) {
  if (!preset.shards_tables() || world == 1) return std::nullopt;
  return plan_table_shards(preset.table_sizes, world);
}

// The model rank `rank` of `plan` holds; `seed` keys the tables' initialization (the same on every rank).
DlrmOptions model_options(const Settings& preset, const std::optional<ShardPlan>& plan, int rank, int64_t seed) {
  DlrmOptions options = DlrmOptions(preset.table_sizes)
                            .embedding_dim(preset.embedding_dim)
                            .bottom_mlp(preset.bottom_mlp)
                            .top_mlp(preset.top_mlp)
                            .embedding_seed(static_cast<uint64_t>(seed));
  if (plan) options.shards(plan->on_rank(rank));
  return options;
}

DlrmLrSchedule lr_schedule(const Settings& preset) {
  return {preset.base_learning_rate, preset.warmup_steps, preset.decay_start_step, preset.decay_steps};
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

// The tables' layout a trainer for `purpose` builds: an export writes the whole replicated model, which a
// rank of sharded tables does not hold.
std::optional<ShardPlan> trainer_plan(const Settings& preset, const parallel::ParallelContext& context,
                                      TrainerPurpose purpose) {
  if (purpose == TrainerPurpose::kExport) return std::nullopt;
  return shard_plan(preset, context.world_size());
}

// This rank's seeded model (or --weights, under DLRM_Net's names), on the context's device in training mode.
Dlrm starting_model(const WorkloadSettings& settings, const Settings& preset, const std::optional<ShardPlan>& plan,
                    const parallel::ParallelContext& context) {
  seed_torch(settings);
  Dlrm model(model_options(preset, plan, context.rank(), settings.seed));
  if (!settings.weights.empty()) load_state_dict(settings.weights, official_state(model, "--weights"));
  model->to(context.device);
  model->train();
  return model;
}

// DLRM's model, MLP gradient exchange, tables' layout and loop, as a run, a bench and an export build them.
class DlrmTrainer : public TrainerOf<Settings> {
 public:
  DlrmTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose purpose)
      : TrainerOf(settings, context, checked_settings(settings.config)),
        plan_(trainer_plan(preset_, context, purpose)),
        model_(starting_model(settings, preset_, plan_, context)),
        // The tables are initialized alike on every rank from the shared seed, so only the MLP is broadcast.
        mlp_gradients_(*context.world, model_->mlp_parameters(), {}),
        parallel_(*context.world, mlp_gradients_, plan_),
        loop_(config_, context.device, model_->mlp_parameters(), &mlp_gradients_) {}

  // One update on a batch of this rank's samples at `learning_rate`.
  TrainingStep step(torch::Tensor dense, torch::Tensor sparse, torch::Tensor labels, double learning_rate) {
    return training_step(model_, parallel_, loop_, std::move(dense), std::move(sparse), std::move(labels),
                         learning_rate);
  }
  Dlrm& model() { return model_; }
  Parallelism& parallelism() { return parallel_; }
  TrainingLoop& loop() { return loop_; }
  // The MLP's data-parallel exchange; the tables' rows and vectors travel through parallelism().
  parallel::GradientSync* gradient_exchange() override { return &mlp_gradients_; }

  std::vector<std::string> initialized_tensors() const override { return model_->initialized_tensor_names(); }

  // Under DLRM_Net's names; a rank of sharded tables is refused (an export always builds the replicated model).
  void save_model(const std::string& path) const override {
    save_state_dict(official_state(model_, "--save-model"), path);
  }

  // The full step on a batch already in memory, rows drawn uniformly per table.
  SyntheticStep synthetic_step(BenchRun& run) override {
    const int64_t batch_size = run.local_batch;
    const torch::Device device = context_.device;
    const auto dense = torch::rand({batch_size, data::kCriteoDense}, device) * 5;
    std::vector<torch::Tensor> columns;
    for (const int64_t size : preset_.table_sizes)
      columns.push_back(torch::randint(size, {batch_size, 1}, torch::TensorOptions(torch::kInt64).device(device)));
    const auto sparse = torch::cat(columns, 1);
    const auto labels = torch::randint(2, {batch_size}, device).to(torch::kFloat32);
    return {[this, dense, sparse, labels] { loop_.update(step(dense, sparse, labels, 0.01)); }, "samples",
            3.0 * 2.0 * static_cast<double>(model_->forward_macs()),
            std::to_string(preset_.table_sizes.size()) + " tables, dim " + std::to_string(preset_.embedding_dim) +
                ", " + preset_.embedding_sharding};
  }

 private:
  const std::optional<ShardPlan> plan_;
  Dlrm model_;
  parallel::GradientSync mlp_gradients_;
  Parallelism parallel_;
  TrainingLoop loop_;
};

class DlrmWorkload : public WorkloadBase {
 public:
  explicit DlrmWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(checked_settings(config_)), schedule_(lr_schedule(preset_)) {}

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("samples");
    // Evaluations at 1.05, 1.10, ... as the reference numbers them: epoch_num = 1 + epochs trained.
    const double interval = 1.0 / static_cast<double>(preset_.evals_per_epoch);
    description.schedule.first_block = interval;
    description.schedule.interval = interval;
    description.schedule.max_epochs = static_cast<double>(preset_.max_epochs);
    description.schedule.positional = true;
    description.hyperparameters = {
        {"global_batch_size", preset_.batch_size},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"trainbench_embedding_sharding", preset_.embedding_sharding},
        {"opt_name", "sgd"},
        {"opt_base_learning_rate", schedule_.base_lr},
        {"sgd_opt_base_learning_rate", schedule_.base_lr},
        {"opt_learning_rate_warmup_steps", schedule_.warmup_steps},
        {"lr_decay_start_steps", schedule_.decay_start_step},
        {"sgd_opt_learning_rate_decay_steps", schedule_.decay_steps},
        {"sgd_opt_learning_rate_decay_poly_power", 2},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  std::vector<std::string> build() override {
    require_data_dir(kDataset);
    trainer_ = std::make_unique<DlrmTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override {
    const std::vector<uint64_t> sizes = table_sizes(preset_);
    data::CriteoReaderOptions train_options;
    train_options.global_batch_size = preset_.batch_size;
    local_batch("batch_size");  // each rank's share must be whole
    train_options.rank = communicator_->rank();
    train_options.world_size = communicator_->world();
    train_options.shuffle = true;
    train_options.seed = static_cast<uint64_t>(settings_.seed);
    train_.emplace((fs::path(settings_.data_dir) / "train.bin").string(), train_options, sizes);
    data::CriteoReaderOptions eval_options;
    eval_options.global_batch_size = preset_.eval_batch_size;
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
    trainer_->model()->train();
    // The block covers epochs [first - 1, first - 1 + count) of training; its global batches follow
    // from that, rounded the same way at both ends so consecutive blocks neither skip nor repeat one.
    const int64_t per_epoch = train_->batches_per_epoch();
    const auto batch_at = [&](double epochs) {
      return static_cast<int64_t>(std::llround(epochs * static_cast<double>(per_epoch)));
    };
    const int64_t first = batch_at(block.first_epoch_num - 1);
    const int64_t last = batch_at(block.first_epoch_num - 1 + block.epoch_count);
    TrainingLoop& loop = trainer_->loop();
    Parallelism& parallel = trainer_->parallelism();
    loop.begin_block(control);
    const double row_exchange_before = parallel.row_exchange_seconds;
    for (int64_t step = first; step < last; ++step) {
      if (!input_ || input_step_ != step) start_input(step);
      loop.fetch([&] { batch_ = *input_->next(); });  // batch_'s old buffers go: the last step's tensors are gone
      ++input_step_;
      if (batch_.size == 0) continue;
      const BatchTensors tensors = as_tensors(batch_, device_);
      loop.train(trainer_->step(tensors.dense, tensors.sparse, tensors.labels, schedule_.at(step)));
    }
    control.add_rank_wait(parallel.row_exchange_seconds - row_exchange_before);
    return loop.end_block();  // the mean loss over the steps that trained, as every workload averages
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    torch::NoGradGuard no_grad;
    Dlrm& model = trainer_->model();
    Parallelism& parallel = trainer_->parallelism();
    model->eval();
    std::vector<torch::Tensor> scores, labels;  // this rank's share of the eval set
    eval_->start_epoch(0);
    data::CriteoBatch batch;
    while (eval_->next(batch)) {
      // Every rank reads as many batches; sharded, each lookup is a collective, so an empty one takes part too.
      if (batch.size == 0 && !parallel.sharding) continue;
      const BatchTensors tensors = as_tensors(batch, device_);
      scores.push_back(torch::sigmoid(click_logits(model, parallel, tensors.dense, tensors.sparse)).to(torch::kCPU));
      labels.push_back(tensors.labels.to(torch::kCPU).clone());
      control.check_interrupt();
    }
    model->train();
    return exact_auc(scores, labels);
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  // AUC is exact over the whole eval set, so every rank's scores are gathered, not averaged.
  double exact_auc(const std::vector<torch::Tensor>& scores, const std::vector<torch::Tensor>& labels) const {
    const torch::Tensor pairs = parallel::allgather_concat(
        *communicator_,
        scores.empty() ? torch::empty({0, 2}) : torch::stack({torch::cat(scores), torch::cat(labels)}, 1));
    const torch::Tensor all_scores = pairs.select(1, 0).contiguous(), all_labels = pairs.select(1, 1).contiguous();
    data::AucAccumulator auc;
    auc.add(all_scores.data_ptr<float>(), all_labels.data_ptr<float>(), all_scores.numel());
    return auc.auc();
  }

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

  const Settings preset_;
  const DlrmLrSchedule schedule_;
  std::unique_ptr<DlrmTrainer> trainer_;
  std::optional<data::CriteoBatchReader> train_, eval_;
  data::CriteoBatch batch_;
  int64_t epoch_ = -1;  // the epoch train_ is reading: only the reader thread touches it and train_ once started
  static constexpr int kReadAheadBatches = 4;
  std::optional<data::BatchPipeline<data::CriteoBatch>> input_;  // after train_: joined before the reader goes
  int64_t input_step_ = -1;                                       // the step input_ hands out next
};

// The day files a preset trains and evaluates on: its generated set's, or `days` (24 for Criteo 1TB).
int preset_days(const Config& config, const Settings& preset) {
  if (preset.dataset) return static_cast<int>(preset.dataset->days);
  if (!preset.days) fail(config.name(), "missing setting 'days'");
  return static_cast<int>(*preset.days);
}

void prepare_dataset(const Config& config, const std::string& in_dir, const std::string& out_dir) {
  const Settings preset = read_settings<Settings>(config);
  data::prepare_criteo(in_dir, out_dir, table_sizes(preset), preset_days(config, preset));
}

// Generated day files in <out_dir>/days (with planted.json) and their prepared form in <out_dir>, written
// into a staging folder renamed at the end: a failed make (a full disk) leaves nothing a retry would refuse.
void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const Settings preset = read_settings<Settings>(config);
  if (!preset.dataset)
    fail("--preset " + config.name(),
         "has no generated dataset; prepare the Criteo day files with `trainbench data prepare dlrm`");
  data::CriteoSyntheticOptions options;
  options.days = static_cast<int>(preset.dataset->days);
  options.samples_per_day = preset.dataset->samples_per_day;
  options.eval_samples = preset.dataset->eval_samples;
  options.cardinalities = preset.table_sizes;
  options.zipf_exponent = preset.dataset->zipf_exponent;
  options.missing_dense = preset.dataset->missing_dense;
  options.missing_sparse = preset.dataset->missing_sparse;
  options.bias = preset.dataset->bias;
  options.seed = static_cast<uint64_t>(seed);
  data::write_new_dataset_directory(out_dir, [&](const fs::path& staging) {
    const std::string days = (staging / "days").string();
    data::make_criteo_synthetic(days, options);
    prepare_dataset(config, days, staging.string());
  });
}

// "12.36 GiB", or MiB / KiB for the mini tables.
std::string binary_size(double bytes) {
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
}

// The sharded layout's lines of print_shard_plan: each rank's tables and bytes, and one step's all-to-alls.
void print_sharded_layout(const Settings& preset, const ShardPlan& plan, int ranks, double row_bytes,
                          std::ostream& out) {
  const std::vector<int64_t>& sizes = preset.table_sizes;
  for (int rank = 0; rank < ranks; ++rank) {
    int whole = 0;
    std::vector<std::string> ranges;
    for (const TableShard& shard : plan.on_rank(rank)) {
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
    out << "; " << plan.rows_on_rank(rank) << " rows, "
        << binary_size(static_cast<double>(plan.rows_on_rank(rank)) * row_bytes) << "\n";
  }
  // Each all-to-all chunk carries a rank's samples times the most shards any rank holds, both ways.
  const int64_t batch = preset.batch_size;
  const double exchanged = static_cast<double>(batch) * static_cast<double>(plan.max_shards_per_rank()) * row_bytes;
  out << "  per step each rank sends and receives " << binary_size(exchanged)
      << " of vectors forward and as much gradient backward (" << batch / ranks << " samples x " << ranks
      << " ranks x " << plan.max_shards_per_rank() << " shard slots x dim " << preset.embedding_dim
      << "), after an all-gather of "
      << binary_size(static_cast<double>(batch) * 8.0 * static_cast<double>(sizes.size())) << " of ids\n";
}

// bench --shard-plan N: each rank's tables and bytes over N ranks, and what one step's exchanges carry.
void print_shard_plan(const Config& config, int ranks, std::ostream& out) {
  const Settings preset = read_settings<Settings>(config);
  const std::vector<int64_t>& sizes = preset.table_sizes;
  const double row_bytes = 4.0 * static_cast<double>(preset.embedding_dim);  // fp32 tables in every precision
  int64_t total_rows = 0;
  for (const int64_t size : sizes) total_rows += size;
  const std::string all_rows = std::to_string(total_rows) + " rows, " +
                               binary_size(static_cast<double>(total_rows) * row_bytes);
  const std::optional<ShardPlan> plan = shard_plan(preset, ranks);
  if (plan) {
    out << "embedding_sharding=sharded over " << ranks << " ranks: " << sizes.size() << " tables, " << all_rows
        << " in all\n";
    return print_sharded_layout(preset, *plan, ranks, row_bytes, out);
  }
  out << "embedding_sharding=" << preset.embedding_sharding << " over " << ranks << (ranks == 1 ? " rank" : " ranks")
      << ": every rank holds all " << sizes.size() << " tables, " << all_rows << "\n";
  if (ranks > 1)
    out << "  per step each rank all-gathers the rows its " << preset.batch_size / ranks
        << " samples touched and their gradients: "
        << binary_size(static_cast<double>(preset.batch_size) * static_cast<double>(sizes.size()) * (row_bytes + 8))
        << " received\n";
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"dlrm",
          "Recommendation: DLRM on the Criteo 1TB click logs, target AUC 0.8025",
          trainbench_presets_dlrm,
          kDataset,
          construct_workload<DlrmWorkload>,
          construct_trainer<DlrmTrainer>,
          make_dataset,
          prepare_dataset,
          print_shard_plan};
}

}  // namespace trainbench::dlrm
