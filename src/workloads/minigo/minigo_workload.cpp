// The reinforcement-learning benchmark (MLPerf "minigo"): the v1.1 MiniGo loop. Every generation plays
// self-play games with the latest network (batched MCTS, src/go/), trains on examples sampled from the last
// `window_size` generations with random symmetries, and saves the new network; after training, each saved
// generation plays the fixed target model, and the first one winning at least half of the games decides the
// time (the harness's Evaluation::kAfterTraining).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <unistd.h>

#include <torch/torch.h>

#include "data/generators/dataset_directory.h"
#include "data/random.h"
#include "go/example_file.h"
#include "go/mcts.h"
#include "go/random_evaluator.h"
#include "go/sgf.h"
#include "parallel/communicator.h"
#include "parallel/gather.h"
#include "parallel/gradient_sync.h"
#include "util/error.h"
#include "workloads/common.h"
#include "workloads/minigo/model.h"
#include "workloads/minigo/model_file.h"
#include "workloads/minigo/settings.h"
#include "workloads/trainer.h"

extern const char* const trainbench_presets_minigo;

namespace trainbench::minigo {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultTargetSeed = 1;  // as `trainbench data make` seeds a preset's generated data
constexpr const char* kTargetFile = "target.pt";
// A prepared bootstrap (presets with a `bootstrap` section): the starting network and generation 0's games.
constexpr const char* kStartFile = "start.pt";
constexpr const char* kBootstrapGamesFile = "bootstrap.examples";

MinigoNetOptions net_options(const Settings& preset) {
  return MinigoNetOptions()
      .board_size(preset.board_size)
      .filters(preset.filters)
      .trunk_blocks(preset.trunk_blocks)
      .fc_width(preset.fc_width);
}

// `resign` as (low, high): each game draws its threshold from [low, high]. An Error naming `where` (the
// preset's resign_threshold) when they are out of order.
std::pair<double, double> resign_range(const std::vector<double>& resign, const std::string& where) {
  if (resign.size() != 2 || resign[0] > resign[1])
    fail(where, "expected [low, high] with low <= high (each game draws its threshold between them), got " +
                    nlohmann::json(resign).dump());
  return {resign[0], resign[1]};
}

go::MctsOptions mcts_options(const Settings& preset, int readouts) {
  go::MctsOptions options;
  options.readouts = readouts;
  options.virtual_losses = static_cast<int>(preset.virtual_losses);
  options.value_init_penalty = preset.value_init_penalty;
  options.dirichlet_alpha = preset.dirichlet_alpha;
  options.noise_mix = preset.noise_mix;
  options.target_pruning = preset.target_pruning;
  options.allow_pass = preset.allow_pass;
  return options;
}

// Self-play and matches spread their games over `threads` drivers, each network call on one compute
// thread: the networks are small, so games in parallel use the cores better than intra-op threads do.
// `name` is the preset's, for errors.
go::PlayOptions self_play_options(const Settings& preset, const std::string& name, uint64_t seed, int threads) {
  go::PlayOptions options;
  options.worker_threads = threads;
  options.worker_setup = [] { torch::set_num_threads(1); };
  options.size = static_cast<int>(preset.board_size);
  options.komi = preset.komi;
  options.concurrent_games = static_cast<int>(preset.concurrent_games);
  options.mcts = mcts_options(preset, static_cast<int>(preset.num_readouts));
  options.fast_readouts = static_cast<int>(preset.fast_readouts);
  options.fast_move_probability = preset.fast_move_probability;
  options.soft_pick_moves = static_cast<int>(preset.soft_pick_moves);
  options.restrict_pass_alive_play_threshold = static_cast<int>(preset.restrict_pass_alive_play_threshold);
  std::tie(options.resign_threshold_low, options.resign_threshold_high) =
      resign_range(preset.resign_threshold, name + ": resign_threshold");
  options.disable_resign_fraction = preset.disable_resign_pct / 100.0;
  options.seed = seed;
  return options;
}

// torch::set_num_threads is process-wide: besides the calling thread's count it sets the count every thread
// takes at its first parallel operation. The self-play workers' setting of 1 would so leave the main thread
// (training, `bench`'s inference) on one thread if its first parallel operation came after self-play; this
// keeps the calling thread's count, read before the workers start, and sets it again once they are done.
class KeepComputeThreads {
 public:
  KeepComputeThreads() : threads_(torch::get_num_threads()) {}
  ~KeepComputeThreads() { torch::set_num_threads(threads_); }
  KeepComputeThreads(const KeepComputeThreads&) = delete;
  KeepComputeThreads& operator=(const KeepComputeThreads&) = delete;

 private:
  int threads_;
};

go::PlayOptions match_options(const Settings& preset, const std::string& name, uint64_t seed, int threads) {
  go::PlayOptions options = self_play_options(preset, name, seed, threads);
  options.mcts = mcts_options(preset, static_cast<int>(preset.eval_readouts));
  options.soft_pick_moves = static_cast<int>(preset.eval_soft_pick_moves);
  return options;
}

PiecewiseLr lr_schedule(const Settings& preset, const std::string& name) {
  PiecewiseLr schedule{preset.lr_rates, preset.lr_boundaries};
  if (schedule.rates.size() != schedule.boundaries.size() + 1)
    fail(name + ": lr_rates", "needs one rate more than lr_boundaries: " + std::to_string(schedule.rates.size()) +
                                  " rates for " + std::to_string(schedule.boundaries.size()) + " boundaries");
  return schedule;
}

// A network's weights and BN statistics, as saved at the end of a generation.
using Snapshot = std::vector<torch::Tensor>;
Snapshot snapshot_of(const MinigoNet& net) {
  Snapshot tensors;
  for (const auto& tensor : net->parameters()) tensors.push_back(tensor.detach().clone());
  for (const auto& tensor : net->buffers()) tensors.push_back(tensor.detach().clone());
  return tensors;
}
void restore(MinigoNet& net, const Snapshot& tensors) {
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& tensor : net->parameters()) tensor.copy_(tensors[i++]);
  for (auto& tensor : net->buffers()) tensor.copy_(tensors[i++]);
}

// "007": generation numbers in folder names, so that they sort.
std::string generation_name(int64_t generation) {
  char name[32];
  std::snprintf(name, sizeof name, "%03lld", static_cast<long long>(generation));
  return name;
}

// The rules that no range of settings.json can state, checked before the log opens (and before `data make`
// plays a game): the learning-rate schedule's lengths, each resign range's order, komi within the board, and
// filter_amount of a generation's games reaching one example at one recorded move a game.
void check_settings(const Config& config, const Settings& preset) {
  lr_schedule(preset, config.name());
  resign_range(preset.resign_threshold, config.name() + ": resign_threshold");
  if (preset.bootstrap)
    resign_range(preset.bootstrap->resign_threshold, config.name() + ": bootstrap: resign_threshold");
  const int64_t size = preset.board_size;
  if (std::abs(preset.komi) > static_cast<double>(size * size))
    fail(config.name() + ": komi", nlohmann::json(preset.komi).dump() + " is more than the " +
                                       std::to_string(size * size) + " points of the board (board_size " +
                                       std::to_string(size) + "): it would decide every game before the first move");
  const std::pair<const char*, int64_t> generations[] = {
      {"bootstrap_games", preset.bootstrap_games},
      {"min_selfplay_games_per_generation", preset.min_selfplay_games_per_generation}};
  for (const auto& [games, count] : generations)
    if (preset.filter_amount * static_cast<double>(count) < 1)
      fail(config.name() + ": filter_amount",
           nlohmann::json(preset.filter_amount).dump() + " of " + games + " " + std::to_string(count) +
               " is less than one example to train on: raise filter_amount or " + games);
}

// With `sgf_dir` set: an Error naming it unless the folder can be created and a file written in it, so that
// a run is refused before its first block rather than when its first games are written.
void require_writable_sgf_dir(const Settings& preset, const std::string& name) {
  const std::string& root = preset.sgf_dir;
  if (root.empty()) return;
  const std::string where = name + ": sgf_dir " + root;
  std::error_code error;
  fs::create_directories(root, error);
  if (error) fail(where, "cannot be created: " + error.message());
  const fs::path probe = fs::path(root) / (".trainbench-write-check-" + std::to_string(::getpid()));
  std::ofstream out(probe);
  const bool writable = out.is_open();
  out.close();
  fs::remove(probe, error);
  if (!writable) fail(where, "is not writable (no file can be created in it)");
}

// With `sgf_dir` set, games as SGF: <sgf_dir>/<folder>/game-NNNNN.sgf (NNNNN the game's index, so ranks that
// each play a range of a generation's games write disjoint files), the players named model0 and model1.
void write_games(const Settings& preset, const std::string& folder, const std::vector<go::GameRecord>& records,
                 const std::string& model0, const std::string& model1) {
  if (preset.sgf_dir.empty()) return;
  const fs::path dir = fs::path(preset.sgf_dir) / folder;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) fail(dir.string(), "cannot be created (sgf_dir): " + error.message());
  char name[64];
  for (const go::GameRecord& record : records) {
    const std::string result =
        record.resigned ? (record.winner == go::kBlack ? "B+R" : "W+R") : go::result_text(record.score);
    std::snprintf(name, sizeof name, "game-%05d.sgf", record.index);
    std::ofstream out(dir / name);
    out << go::write_sgf(go::sgf_of_game(record.game, result, record.black_model == 0 ? model0 : model1,
                                         record.white_model == 0 ? model0 : model1));
    if (!out) fail((dir / name).string(), "could not be written (sgf_dir)");
  }
}

// Games [first, first + count) of `games` that `rank` of `world` plays: a contiguous range of the indices.
std::pair<int, int> rank_share(int64_t games, int rank, int world) {
  const int64_t first = games * rank / world, end = games * (rank + 1) / world;
  return {static_cast<int>(first), static_cast<int>(end - first)};
}

// Rank 0's weights and batch-norm statistics to every rank.
void broadcast_network(parallel::Communicator& communicator, MinigoNet& net) {
  std::vector<torch::Tensor> tensors = net->parameters();
  for (const torch::Tensor& buffer : net->buffers()) tensors.push_back(buffer);
  parallel::broadcast_from_rank0(communicator, tensors);
}

// The loop the reference runs: self-play with the latest network, then training on a window of the recent
// generations' examples with momentum SGD on a global step that keeps counting across generations.
//
// Over several ranks (`communicator` of more than one), each rank plays its range of a generation's games
// with the same network; the examples are gathered to every rank in game order, so every rank holds the
// window one rank would; training is data-parallel (each rank takes its rows of every batch of the same
// sample, gradients averaged), and rank 0's batch-norm statistics go to the others after it, so all play
// the next generation with one network. `config` (for the training loop and the preset's name in errors) and
// `preset`, its settings, must outlive the loop.
class MinigoLoop {
 public:
  MinigoLoop(const Config& config, const Settings& preset, torch::Device device, uint64_t seed, int threads,
             std::shared_ptr<parallel::Communicator> communicator = nullptr)
      : config_(config),
        preset_(preset),
        device_(device),
        seed_(seed),
        threads_(threads),
        communicator_(std::move(communicator)),
        net_(net_options(preset)),
        schedule_(lr_schedule(preset, config.name())),
        rng_(data::mix_seed(seed, 0x6d696e69)) {
    net_->to(device_);
    net_->eval();  // training switches to train mode and back; self-play needs eval mode
    optimizer_.emplace(net_->parameters(), torch::optim::SGDOptions(schedule_.at(0)).momentum(preset.momentum));
    // The gradient exchange starts by giving every rank rank 0's network.
    if (world() > 1) gradients_.emplace(*communicator_, net_->parameters(), net_->buffers());
    training_.emplace(config, device_, net_->parameters(), gradients_ ? &*gradients_ : nullptr);
  }

  int world() const { return communicator_ ? communicator_->world() : 1; }
  int rank() const { return communicator_ ? communicator_->rank() : 0; }

  MinigoNet& net() { return net_; }
  const MinigoNet& net() const { return net_; }
  parallel::GradientSync* gradients() { return gradients_ ? &*gradients_ : nullptr; }

  // Network `generation`'s self-play, `games` games with the current network (this rank's range of them),
  // straight into the window (the oldest generation leaves beyond window_size); with sgf_dir, its SGF is
  // written. Generation 0 is the bootstrap played in init (presets without a prepared one): the random
  // network's games, passes read only with bootstrap_allow_pass (minigo's bootstrap flags turn allow_pass
  // off, so that its games are played out). Returns the game count over all ranks.
  int play_generation(int64_t generation, int64_t games, go::PlayStats* stats, const std::function<void()>& on_batch) {
    const uint64_t seed = data::mix_seed(seed_, 1, static_cast<uint64_t>(generation));
    go::PlayOptions options = self_play_options(preset_, config_.name(), seed, threads_);
    if (generation == 0) options.mcts.allow_pass = preset_.bootstrap_allow_pass;
    int share = 0;
    std::tie(options.first_game, share) = rank_share(games, rank(), world());
    go::ExampleFile played;
    {
      const KeepComputeThreads keep_threads;
      const auto records = go::self_play(options, share, evaluator(net_, on_batch), &played.examples, stats);
      const std::string player = "network " + std::to_string(generation);
      write_games(preset_, "generation-" + generation_name(generation), records, player, player);
      played.games = static_cast<int>(records.size());
    }
    if (world() > 1) played = gather_examples(played);
    const int played_games = played.games;
    add_to_window(std::move(played.examples));
    return played_games;
  }

  // A prepared generation's examples (the bootstrap `data make` wrote) join the window.
  void add_to_window(go::ExampleSet examples) {
    window_.push_back(std::move(examples));
    while (static_cast<int64_t>(window_.size()) > preset_.window_size) window_.erase(window_.begin());
  }

  // One pass over filter_amount of the window's examples, each under a random symmetry. With `control` (a
  // run's block), the shared training loop's block does the meter and progress, and assembling each batch
  // counts as input wait (self-play before it is training: the reference's loop, the network's own work);
  // without it (the bootstrap, outside any run) the steps are plain updates. Every rank draws the same
  // sample and symmetries and assembles its rows of each batch. Returns the block's report.
  BlockReport train_generation(RunControl* control) {
    if (control) training_->begin_block(*control);
    const std::vector<std::pair<int, int64_t>> sample = sampled_order();
    const int64_t sampled = sampled_examples();
    const int64_t batch = std::min(preset_.batch_size, sampled);
    if (batch == 0) fail(config_.name(), "no training examples in the window (play more games per generation)");
    const int64_t steps = sampled / batch;
    if (batch < world())
      fail(config_.name(), "a training batch of " + std::to_string(batch) + " examples cannot be shared by " +
                               std::to_string(world()) + " ranks (play more games per generation)");
    BatchRows rows(slice_batch(batch, world())[static_cast<size_t>(rank())], static_cast<int>(preset_.board_size));
    for (int64_t step = 0; step < steps; ++step) {
      const auto assemble_batch = [&] { assemble(rows, sample, step * batch, batch); };
      if (control) {
        training_->fetch(assemble_batch);
        training_->train(train_step(rows.features.data(), rows.policies.data(), rows.outcomes.data(), rows.mine.size));
      } else {
        assemble_batch();
        update(rows.features.data(), rows.policies.data(), rows.outcomes.data(), rows.mine.size);
      }
    }
    net_->eval();
    // The weights are equal after every averaged update; the batch-norm statistics saw only each rank's rows.
    if (gradients_) gradients_->broadcast_buffers();
    BlockReport report;
    if (control) report = training_->end_block();
    report.samples = steps * rows.mine.size;
    return report;
  }

  // One plain optimizer update (the bootstrap outside a run, `bench`'s training step) on a batch in memory;
  // returns its loss, which waits for the device.
  double update(const uint8_t* features, const float* policies, const float* outcomes, int64_t batch) {
    return training_->update(train_step(features, policies, outcomes, batch));
  }

  int64_t window_examples() const {
    int64_t examples = 0;
    for (const go::ExampleSet& set : window_) examples += set.count();
    return examples;
  }
  // The examples the next generation trains on: filter_amount of the window's, rounded down.
  int64_t sampled_examples() const {
    return static_cast<int64_t>(std::floor(preset_.filter_amount * static_cast<double>(window_examples())));
  }

 private:
  // This rank's rows of a training batch, as the network takes them.
  struct BatchRows {
    BatchRows(BatchSlice slice, int board_size)
        : mine(slice),
          size(board_size),
          features(static_cast<size_t>(mine.size * go::Position::kPlanes * size * size)),
          policies(static_cast<size_t>(mine.size * (size * size + 1))),
          outcomes(static_cast<size_t>(mine.size)) {}
    BatchSlice mine;
    int size;
    std::vector<uint8_t> features;
    std::vector<float> policies, outcomes;
  };

  // Every example of the window as (generation in window, example), in a random order (Fisher-Yates): its
  // first sampled_examples() are a uniform sample of filter_amount of the window.
  std::vector<std::pair<int, int64_t>> sampled_order() {
    std::vector<std::pair<int, int64_t>> all;
    for (size_t g = 0; g < window_.size(); ++g)
      for (int64_t i = 0; i < window_[g].count(); ++i) all.emplace_back(static_cast<int>(g), i);
    for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[rng_.below(i)]);
    return all;
  }

  // This rank's rows of the batch of `batch` examples from sample[first]: each under a symmetry drawn for
  // every row on every rank, so that all ranks keep one sequence of draws.
  void assemble(BatchRows& rows, const std::vector<std::pair<int, int64_t>>& sample, int64_t first, int64_t batch) {
    const int size = rows.size, points = size * size, feature_size = go::Position::kPlanes * points;
    for (int64_t b = 0; b < batch; ++b) {
      const int symmetry = static_cast<int>(rng_.below(go::kSymmetries));
      const int64_t row = b - rows.mine.begin;
      if (row < 0 || row >= rows.mine.size) continue;
      const auto [g, i] = sample[static_cast<size_t>(first + b)];
      const go::ExampleSet& set = window_[static_cast<size_t>(g)];
      go::apply_symmetry(symmetry, set.features.data() + i * feature_size, rows.features.data() + row * feature_size,
                         go::Position::kPlanes, size);
      go::apply_symmetry_to_policy(symmetry, set.policies.data() + i * (points + 1),
                                   rows.policies.data() + row * (points + 1), size);
      rows.outcomes[static_cast<size_t>(row)] = set.outcomes[static_cast<size_t>(i)];
    }
  }

  // One optimizer step's TrainingStep on a batch already in memory (train mode until the generation's
  // training ends): lr from the global step.
  TrainingStep train_step(const uint8_t* features, const float* policies, const float* outcomes, int64_t batch) {
    const int64_t size = preset_.board_size, points = size * size;
    const auto planes =
        torch::from_blob(const_cast<uint8_t*>(features), {batch, go::Position::kPlanes, size, size}, torch::kUInt8)
            .to(device_, torch::kFloat32);
    const auto pi = torch::from_blob(const_cast<float*>(policies), {batch, points + 1}, torch::kFloat32).to(device_);
    const auto z = torch::from_blob(const_cast<float*>(outcomes), {batch}, torch::kFloat32).to(device_);
    net_->train();
    return minigo::training_step(net_, *optimizer_, schedule_.at(training_->updates()), planes, pi, z,
                                 preset_.value_cost_weight, preset_.opt_weight_decay);
  }

  static go::BatchEvaluator evaluator(MinigoNet& net, const std::function<void()>& on_batch) {
    return [&net, on_batch](int, const uint8_t* features, int batch, float* policy, float* values) {
      if (on_batch) on_batch();
      net->evaluate(features, batch, policy, values);
    };
  }

  // Every rank's examples of a generation, in rank order, which is game order.
  go::ExampleFile gather_examples(const go::ExampleFile& mine) {
    const int size = static_cast<int>(preset_.board_size);
    go::ExampleFile all;
    all.examples.size = size;
    const auto buffers = parallel::allgather_bytes(*communicator_, go::serialize_examples(mine));
    for (size_t from = 0; from < buffers.size(); ++from) {
      const go::ExampleFile part = go::parse_examples(buffers[from].data(), buffers[from].size(), size,
                                                      "the examples gathered from rank " + std::to_string(from));
      all.examples.append(part.examples);
      all.games += part.games;
    }
    return all;
  }

  const Config& config_;
  const Settings& preset_;
  torch::Device device_;
  uint64_t seed_;
  int threads_;
  std::shared_ptr<parallel::Communicator> communicator_;  // null or a world of one: this process alone
  MinigoNet net_;
  PiecewiseLr schedule_;
  std::optional<torch::optim::SGD> optimizer_;
  std::optional<parallel::GradientSync> gradients_;  // over more than one rank
  std::optional<TrainingLoop> training_;
  data::Rng rng_;
  std::vector<go::ExampleSet> window_;
};

// The fraction of the preset's `eval_games` games that `learner` wins against `target` with its evaluation
// settings (colours alternating, no noise, no fast moves, no resignation); `on_batch` before every network call.
// With `communicator`, each of its ranks plays its range of the games and the wins are summed over the
// ranks; without, this process plays them all. `name` is the preset's, for errors.
double win_rate(const Settings& preset, const std::string& name, MinigoNet& learner, MinigoNet& target, uint64_t seed,
                int threads, const std::function<void()>& on_batch, const std::string& sgf_folder,
                const std::string& learner_name, parallel::Communicator* communicator = nullptr) {
  const int64_t games = preset.eval_games;
  go::PlayOptions options = match_options(preset, name, seed, threads);
  int share = static_cast<int>(games);
  if (communicator)
    std::tie(options.first_game, share) = rank_share(games, communicator->rank(), communicator->world());
  const KeepComputeThreads keep_threads;
  const auto records = go::play_match(
      options, share,
      [&](int model, const uint8_t* features, int batch, float* policy, float* values) {
        if (on_batch) on_batch();
        (model == 0 ? learner : target)->evaluate(features, batch, policy, values);
      },
      nullptr);
  write_games(preset, sgf_folder, records, learner_name, "target");
  std::vector<double> wins{0};
  for (const auto& record : records) wins[0] += record.winner == (record.black_model == 0 ? go::kBlack : go::kWhite);
  if (communicator) communicator->sum(wins);
  return wins[0] / static_cast<double>(games);
}

MinigoNet network_of(const Settings& preset, const Snapshot& tensors, torch::Device device) {
  MinigoNet net(net_options(preset));
  net->to(device);
  restore(net, tensors);
  net->eval();
  return net;
}

struct TargetRun {
  MinigoNet target{nullptr};
  Snapshot untrained;  // the run's network before its first generation
};

// The mini and tiny target: generation `target_generation` of a fixed run of the preset (bootstrap games
// from the random network, then that many generations), built from `seed` and the recipe's `target_run`.
// Always 2 self-play drivers and one compute thread, so a seed gives the same network on any machine and
// whether `data make` or a run's init builds it.
TargetRun build_target(const Config& config, const Settings& preset, torch::Device device, int64_t seed) {
  const DatasetSettings& recipe = preset.dataset.value();
  const int threads_before = torch::get_num_threads();
  torch::set_num_threads(1);
  const uint64_t run_seed =
      data::mix_seed(static_cast<uint64_t>(seed), static_cast<uint64_t>(recipe.target_run));
  torch::manual_seed(run_seed);  // the untrained network
  MinigoLoop loop(config, preset, device, run_seed ^ 0x7461726765740000ULL, 2);
  TargetRun run;
  run.untrained = snapshot_of(loop.net());
  for (int64_t generation = 1; generation <= recipe.target_generation; ++generation) {
    loop.play_generation(generation - 1,
                         generation == 1 ? preset.bootstrap_games : preset.min_selfplay_games_per_generation, nullptr,
                         nullptr);
    loop.train_generation(nullptr);
  }
  torch::set_num_threads(threads_before);
  run.target = loop.net();
  return run;
}

// An Error naming `path` when the network `file` holds is not of the preset's shape.
void require_preset_shape(const MinigoModelFile& file, const MinigoNetOptions& expected, const std::string& path) {
  const MinigoNetOptions& found = file.net->options();
  if (file.input_features == "mlperf07" && found.board_size() == expected.board_size() &&
      found.filters() == expected.filters() && found.trunk_blocks() == expected.trunk_blocks() &&
      found.fc_width() == expected.fc_width())
    return;
  const auto shape = [](const MinigoNetOptions& options) {
    return std::to_string(options.board_size()) + "x" + std::to_string(options.board_size());
  };
  fail(path, "holds a " + shape(found) + " network of " + std::to_string(found.filters()) + " filters, " +
                 std::to_string(found.trunk_blocks()) + " blocks, fc width " + std::to_string(found.fc_width()) +
                 " on " + file.input_features + " features; this preset plays " + shape(expected) + ", " +
                 std::to_string(expected.filters()) + " filters, " + std::to_string(expected.trunk_blocks()) +
                 " blocks, fc width " + std::to_string(expected.fc_width()) + " on mlperf07 features");
}

// A saved network of the preset's shape: a `.minigo` file or bare frozen graph (minigo's own format, as the
// official checkpoint and target are), or a torch::save file as `data make` writes; `missing` says where one
// comes from when `path` does not exist.
MinigoNet load_network(const Settings& preset, const std::string& path, torch::Device device,
                       const std::string& missing) {
  if (!fs::exists(path)) fail(path, missing);
  const MinigoNetOptions expected = net_options(preset);
  MinigoNet net(expected);
  if (is_minigo_model_file(path)) {
    MinigoModelFile file = read_minigo_model(path);
    require_preset_shape(file, expected, path);
    net = file.net;
  } else {
    try {
      torch::load(net, path);
    } catch (const c10::Error& error) {
      fail(path, std::string("is not a MiniGo network of this preset's shape (board_size, filters, trunk_blocks, "
                             "fc_width): ") +
                     error.what_without_backtrace());
    }
  }
  net->to(device);
  net->eval();
  return net;
}

MinigoNet load_target(const Settings& preset, const std::string& path, torch::Device device) {
  return load_network(preset, path, device,
                      "target model not found (make one with `trainbench data make minigo --out DIR`, or give --set "
                      "target_model=PATH)");
}

// The reference's bootstrap (ml_perf/flags/19/bootstrap.flags, run by ml_perf/scripts/bootstrap.sh before
// the benchmark): the self-play flags overlaid with the preset's `bootstrap` section (80 readouts, no fast
// moves, resignation below a per-game threshold in [-1, -0.99], no target pruning), passes read only with
// bootstrap_allow_pass, played by the random model of `--model=random:...` (go/random_evaluator.h).
go::ExampleFile play_prepared_bootstrap(const Settings& preset, const std::string& name, uint64_t seed, int threads) {
  const BootstrapSettings& flags = preset.bootstrap.value();
  go::PlayOptions options = self_play_options(preset, name, data::mix_seed(seed, 1, 0), threads);
  options.mcts.readouts = static_cast<int>(flags.num_readouts);
  options.mcts.allow_pass = preset.bootstrap_allow_pass;
  options.mcts.target_pruning = flags.target_pruning;
  options.fast_move_probability = flags.fast_move_probability;
  std::tie(options.resign_threshold_low, options.resign_threshold_high) =
      resign_range(flags.resign_threshold, name + ": bootstrap: resign_threshold");
  go::ExampleFile file;
  const auto records = go::self_play(options, static_cast<int>(preset.bootstrap_games),
                                     go::random_evaluator(options.size, data::mix_seed(seed, 3)), &file.examples,
                                     nullptr);
  write_games(preset, "generation-000", records, "random model", "random model");
  file.games = static_cast<int>(records.size());
  return file;
}

// Random training positions for `bench`: 0/1 planes, uniform policies, outcomes of +-1.
struct RandomPositions {
  std::vector<uint8_t> features;
  std::vector<float> policies, outcomes;

  RandomPositions(data::Rng& rng, int64_t batch, int64_t points)
      : features(static_cast<size_t>(batch * go::Position::kPlanes * points)),
        policies(static_cast<size_t>(batch * (points + 1)), 1.0f / static_cast<float>(points + 1)),
        outcomes(static_cast<size_t>(batch)) {
    for (auto& value : features) value = static_cast<uint8_t>(rng.below(2));
    for (auto& value : outcomes) value = rng.below(2) ? 1.0f : -1.0f;
  }
};

// MiniGo's network, momentum SGD, gradient exchange and training loop (a MinigoLoop), as a run, a bench and an
// export build them: seeded, then for a run the prepared bootstrap's starting network and games, then --weights
// (run and export; a bench times the seeded network). Only a run's loop spans the ranks: a bench measures one
// process's self-play and step, as it did before trainers.
class MinigoTrainer : public TrainerOf<Settings> {
 public:
  MinigoTrainer(const WorkloadSettings& settings, const parallel::ParallelContext& context, TrainerPurpose purpose)
      : TrainerOf(settings, context),
        bench_rng_(static_cast<uint64_t>(settings.seed)) {
    seed_torch(settings);
    loop_.emplace(config_, preset_, context.device, static_cast<uint64_t>(settings.seed), settings.threads,
                  purpose == TrainerPurpose::kRun ? context.world : nullptr);
    if (purpose == TrainerPurpose::kRun && preset_.bootstrap) prepared_games_ = load_prepared_bootstrap(context.device);
    if (purpose != TrainerPurpose::kBench && !settings.weights.empty()) {
      MinigoNet loaded = load_network(preset_, settings.weights, context.device, "not found (--weights)");
      // An export writes the network as read, so that a re-saved minigo file keeps its batch-norm epsilon
      // (frozen graphs hold 1.001e-5); a run takes its weights into the loop's network.
      if (purpose == TrainerPurpose::kExport)
        exported_ = loaded;
      else
        restore(loop_->net(), snapshot_of(loaded));
    }
  }

  MinigoLoop& loop() { return *loop_; }
  // The games of a prepared bootstrap's generation 0 (0 where the preset plays its bootstrap in init).
  int prepared_bootstrap_games() const { return prepared_games_; }

  parallel::GradientSync* gradient_exchange() override { return loop_->gradients(); }
  std::vector<std::string> initialized_tensors() const override {
    return loop_->net()->initialized_tensor_names();
  }
  // As the reference's own engine reads its models.
  void save_model(const std::string& path) const override {
    write_minigo_model(exported_ ? exported_ : loop_->net(), path);
  }

  // Self-play games and the inference call MCTS makes, with the preset's (random) network.
  void bench_before_training(BenchRun& run, std::ostream& out) override {
    bench_self_play(run, out);
    bench_inference(run, out);
  }

  // The full step on a batch of random positions already in memory.
  SyntheticStep synthetic_step(BenchRun& run) override {
    const int64_t batch = run.global_batch, size = preset_.board_size;
    const auto positions = std::make_shared<RandomPositions>(bench_rng_, batch, size * size);
    return {[this, positions, batch] {
              loop_->update(positions->features.data(), positions->policies.data(), positions->outcomes.data(), batch);
            },
            "examples", 3.0 * 2.0 * static_cast<double>(loop_->net()->forward_macs()),
            std::to_string(preset_.filters) + " filters, " + std::to_string(preset_.trunk_blocks) + " blocks, " +
                std::to_string(size) + "x" + std::to_string(size)};
  }

 private:
  // The starting network and generation 0's examples from `bootstrap_dir`; returns the bootstrap's game count.
  int load_prepared_bootstrap(const torch::Device& device) {
    const std::string dir = preset_.bootstrap_dir.value_or("");
    if (dir.empty())
      fail(config_.name() + ": bootstrap_dir",
           "this preset starts from a prepared bootstrap: write it with `trainbench data make minigo --preset " +
               config_.preset() + " --out DIR` (with the same --set settings) and give --set bootstrap_dir=DIR");
    const std::string missing = "not found: bootstrap_dir must be a directory `trainbench data make minigo --preset " +
                                config_.preset() + "` wrote";
    MinigoNet start = load_network(preset_, (fs::path(dir) / kStartFile).string(), device, missing);
    restore(loop_->net(), snapshot_of(start));  // every rank loads the same file
    const fs::path games_path = fs::path(dir) / kBootstrapGamesFile;
    if (!fs::exists(games_path)) fail(games_path.string(), missing);
    go::ExampleFile file = go::read_example_file(games_path.string(), static_cast<int>(preset_.board_size));
    loop_->add_to_window(std::move(file.examples));
    return file.games;
  }

  // Self-play: `steps` games (at least concurrent_games) of the preset's search with its (random) network.
  void bench_self_play(BenchRun& run, std::ostream& out) {
    const int64_t games = std::max<int64_t>(run.bench.steps, preset_.concurrent_games);
    go::PlayStats stats;
    const auto begin = std::chrono::steady_clock::now();
    loop_->play_generation(0, games, &stats, nullptr);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    char line[512];
    std::snprintf(line, sizeof line,
                  "self-play     %10.1f moves/s, %.1f network evaluations/s, mean inference batch %.1f  (%lld games "
                  "of %lld concurrent, %lld readouts x %lld virtual losses, %lldx%lld)\n",
                  static_cast<double>(stats.moves) / seconds, static_cast<double>(stats.evaluations) / seconds,
                  stats.mean_batch(), static_cast<long long>(games), static_cast<long long>(preset_.concurrent_games),
                  static_cast<long long>(preset_.num_readouts), static_cast<long long>(preset_.virtual_losses),
                  static_cast<long long>(preset_.board_size), static_cast<long long>(preset_.board_size));
    out << line;
  }

  // Inference: one self-play driver's full batch (its concurrent games x virtual losses) through the
  // evaluator MCTS calls, uint8 planes in, probabilities and values out; bench/peers/minigo_inference.py
  // times python3-torch on the same batch.
  void bench_inference(BenchRun& run, std::ostream& out) {
    const int threads = run.settings.threads;
    const int64_t points = preset_.board_size * preset_.board_size;
    const int64_t batch = std::max<int64_t>(1, preset_.concurrent_games / threads) * preset_.virtual_losses;
    std::vector<uint8_t> planes(static_cast<size_t>(batch * go::Position::kPlanes * points));
    for (auto& value : planes) value = static_cast<uint8_t>(bench_rng_.below(2));
    std::vector<float> priors(static_cast<size_t>(batch * (points + 1))), values(static_cast<size_t>(batch));
    const double call_time = run.median_step_seconds(
        [&] { loop_->net()->evaluate(planes.data(), static_cast<int>(batch), priors.data(), values.data()); });
    char line[512];
    std::snprintf(line, sizeof line,
                  "inference     %10.1f positions/s  (batch %lld: %lld games / %d threads x %lld virtual losses, %d "
                  "threads, median of %lld calls: %.5f s/call)\n",
                  static_cast<double>(batch) / call_time, static_cast<long long>(batch),
                  static_cast<long long>(preset_.concurrent_games), threads,
                  static_cast<long long>(preset_.virtual_losses), threads, static_cast<long long>(run.bench.steps),
                  call_time);
    out << line;
  }

  std::optional<MinigoLoop> loop_;  // built after seeding
  int prepared_games_ = 0;
  MinigoNet exported_{nullptr};  // an export's --weights, as read
  data::Rng bench_rng_;          // bench's random inference planes, then its training positions
};

class MinigoWorkload : public WorkloadBase {
 public:
  explicit MinigoWorkload(WorkloadSettings settings)
      : WorkloadBase(std::move(settings)), preset_(read_settings<Settings>(config_)) {
    check_settings(config_, preset_);
    // target_model is read from the working directory, not the dataset's.
    if (!preset_.target_model.empty())
      require_preset_path(settings_, "target_model", fs::absolute(preset_.target_model).string());
  }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("examples");
    description.uses_dataset = false;
    description.schedule.first_block = 1;
    description.schedule.interval = 1;
    description.schedule.max_epochs = static_cast<double>(preset_.max_generations);
    description.schedule.unit = ScheduleUnit::kGenerations;
    description.schedule.evaluation = Evaluation::kAfterTraining;
    description.hyperparameters = {
        {"train_batch_size", preset_.batch_size},
        {"lr_rates", preset_.lr_rates},
        {"lr_boundaries", preset_.lr_boundaries},
        {"opt_weight_decay", preset_.opt_weight_decay},
        {"filter_amount", preset_.filter_amount},
        {"num_readouts", preset_.num_readouts},
        {"value_init_penalty", preset_.value_init_penalty},
        {"virtual_losses", preset_.virtual_losses},
        {"holdout_pct", 0.0},
        {"disable_resign_pct", preset_.disable_resign_pct},
        {"resign_threshold", preset_.resign_threshold},
        {"min_selfplay_games_per_generation", preset_.min_selfplay_games_per_generation},
        {"window_size", preset_.window_size},
        {"eval_games", preset_.eval_games},
        {"gradient_accumulation_steps", step_settings_.accumulation_steps},
        {"trainbench_precision", precision_name(step_settings_.precision)},
        {"trainbench_model", config_.string("summary")},
    };
    return description;
  }

  // Untimed: the starting network, the bootstrap games (generation 0 of the window) and the target model.
  // A preset with a `bootstrap` section (the reference) loads the ones `data make` prepared, as the reference
  // starts from its checkpoint, so that init is loading files; the others play the random network's
  // bootstrap here.
  std::vector<std::string> build() override {
    require_writable_sgf_dir(preset_, config_.name());
    trainer_ = std::make_unique<MinigoTrainer>(settings_, parallel_context(), TrainerPurpose::kRun);
    MinigoLoop& loop = trainer_->loop();
    target_ = resolve_target();
    // Every rank resolved the same target; rank 0's copy makes it one network even where ranks' CPUs round
    // differently while building it from the recipe.
    broadcast_network(*communicator_, target_);
    bootstrap_games_ = preset_.bootstrap ? trainer_->prepared_bootstrap_games()
                                         : loop.play_generation(0, preset_.bootstrap_games, nullptr, nullptr);
    // Generation 1 trains on the bootstrap alone: refused here, before the first block, if that is nothing.
    if (loop.sampled_examples() == 0)
      fail(config_.name() + ": filter_amount",
           nlohmann::json(preset_.filter_amount).dump() + " of the bootstrap's " +
               std::to_string(loop.window_examples()) + " examples (" + std::to_string(bootstrap_games_) +
               " games) is not one example to train generation 1 on: raise filter_amount or bootstrap_games");
    return trainer_->initialized_tensors();
  }

  DataSummary open_data() override { return {}; }

  // Generation g: network g - 1's self-play (none in generation 1, which trains on the bootstrap games), then
  // network g's training on a window that holds those games, as ml_perf/train_loop.py's train() waits for
  // min_games_per_iteration games of network g - 1 before it samples; network g is saved when the block ends,
  // and that is the time run_stop takes if it is the first to pass.
  BlockReport train(const Block& block, RunControl& control) override {
    MinigoLoop& loop = trainer_->loop();
    const auto generation = static_cast<int64_t>(block.first_epoch_num);
    int games = bootstrap_games_;
    double self_play_seconds = 0;
    if (generation > 1) {
      const auto begin = std::chrono::steady_clock::now();
      games = loop.play_generation(generation - 1, preset_.min_selfplay_games_per_generation, nullptr,
                                   [&] { control.check_interrupt(); });
      self_play_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    }
    BlockReport report = loop.train_generation(&control);
    report.logged = {{"actual_selfplay_games_per_generation", games}};
    // Self-play's rate over all ranks, the exchange of the games included: what more ranks buy.
    if (self_play_seconds > 0)
      report.logged.push_back({"trainbench_selfplay_games_per_second", games / self_play_seconds});
    saved_.push_back(snapshot_of(loop.net()));
    return report;
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    const auto generation = static_cast<size_t>(block.first_epoch_num);
    MinigoNet learner = network_of(preset_, saved_.at(generation - 1), device_);
    return win_rate(preset_, config_.name(), learner, target_,
                    data::mix_seed(static_cast<uint64_t>(settings_.seed), 2, generation), settings_.threads,
                    [&] { control.check_interrupt(); }, "evaluation-" + generation_name(generation),
                    "network " + std::to_string(generation), communicator_.get());
  }

 private:
  const Trainer& trainer() const override { return *trainer_; }

  // The target: --set target_model=PATH, else the one `data make minigo` wrote (the quality gate passes its
  // directory), else built here from the preset's recipe with the seed `data make` uses by default.
  MinigoNet resolve_target() {
    if (!preset_.target_model.empty()) return load_target(preset_, preset_.target_model, device_);
    if (!settings_.data_dir.empty())
      return load_target(preset_, (fs::path(settings_.data_dir) / kTargetFile).string(), device_);
    if (!preset_.dataset)
      fail(config_.name() + ": target_model",
           "the reference preset needs the target model: --set target_model=PATH, the official target.minigo "
           "(ml_perf/README.md: gs://minigo-pub/ml_perf/0.7/target.*, frozen by freeze_graph.py)");
    return build_target(config_, preset_, device_, kDefaultTargetSeed).target;
  }

  const Settings preset_;
  std::unique_ptr<MinigoTrainer> trainer_;
  MinigoNet target_{nullptr};
  int bootstrap_games_ = 0;
  std::vector<Snapshot> saved_;
};

// `trainbench data make minigo` for a preset with a `bootstrap` section (the reference): the starting network
// (start.pt, the random initialisation of `seed`, as a run of that seed starts) and the bootstrap games
// (bootstrap.examples), with bootstrap.json naming preset, seed and flags (the section as the preset gives it).
// The target is not made here: the reference's is the official one, given with --set target_model=PATH.
void make_bootstrap(const Config& config, const Settings& preset, const std::string& out_dir, int64_t seed) {
  torch::manual_seed(seed);
  const MinigoNet start(net_options(preset));
  torch::save(start, (fs::path(out_dir) / kStartFile).string());
  // Fixed, so that the network's batches, and with them its rounding, are the same on any machine.
  const int threads = 2;
  const go::ExampleFile file = play_prepared_bootstrap(preset, config.name(), static_cast<uint64_t>(seed), threads);
  go::write_example_file((fs::path(out_dir) / kBootstrapGamesFile).string(), file);
  std::ofstream((fs::path(out_dir) / "bootstrap.json"))
      << nlohmann::json{{"preset", config.preset()},
                        {"seed", seed},
                        {"self_play_threads", threads},
                        {"board_size", preset.board_size},
                        {"games", file.games},
                        {"examples", file.examples.count()},
                        {"allow_pass", preset.bootstrap_allow_pass},
                        {"flags", config.values().at("bootstrap")}}
             .dump(2)
      << "\n";
}

// The preset's target network, saved as target.pt with a note of its recipe (the `dataset` section as the
// preset gives it) and of its strength: the win rate of its run's untrained network against it, in the
// preset's evaluation games (what a learner must turn into at least 0.5).
void make_target(const Config& config, const Settings& preset, const std::string& out_dir, int64_t seed) {
  TargetRun run = build_target(config, preset, torch::kCPU, seed);
  torch::save(run.target, (fs::path(out_dir) / kTargetFile).string());
  MinigoNet untrained = network_of(preset, run.untrained, torch::kCPU);
  const double untrained_win_rate =
      win_rate(preset, config.name(), untrained, run.target, static_cast<uint64_t>(seed) ^ 0x756e747261696e00ULL, 2,
               nullptr, "untrained-against-target", "untrained network");
  std::ofstream((fs::path(out_dir) / "target.json"))
      << nlohmann::json{{"preset", config.preset()},
                        {"seed", seed},
                        {"recipe", config.values().at("dataset")},
                        {"untrained_win_rate", untrained_win_rate},
                        {"eval_games", preset.eval_games}}
             .dump(2)
      << "\n";
}

// `trainbench data make minigo`: the target (make_target), or for a preset with a `bootstrap` section the
// prepared bootstrap (make_bootstrap). Written into a staging folder renamed at the end, so that a failed
// make leaves nothing behind that a retry would refuse.
void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const Settings preset = read_settings<Settings>(config);
  if (!preset.bootstrap && !preset.dataset)
    fail("--preset " + config.name(), "has no generated target; the reference's target model is given with --set "
                                      "target_model=PATH (the official target.minigo)");
  check_settings(config, preset);
  require_writable_sgf_dir(preset, config.name());
  data::write_new_dataset_directory(out_dir, [&](const fs::path& staging) {
    fs::create_directories(staging);
    if (preset.bootstrap)
      make_bootstrap(config, preset, staging.string(), seed);
    else
      make_target(config, preset, staging.string(), seed);
  });
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"minigo",
          "Reinforcement learning: MiniGo self-play (batched MCTS) and training on 19x19 Go, target a 50% win rate "
          "against a fixed target model",
          trainbench_presets_minigo,
          "",
          construct_workload<MinigoWorkload>,
          construct_trainer<MinigoTrainer>,
          make_dataset,
          nullptr,
          /*print_shard_plan=*/nullptr,
          ".minigo"};
}

}  // namespace trainbench::minigo
