// The reinforcement-learning benchmark (MLPerf "minigo"): the v1.1 MiniGo loop. Every generation plays
// self-play games with the latest network (batched MCTS, src/go/), trains on examples sampled from the last
// `window_size` generations with random symmetries, and saves the new network; after training, each saved
// generation plays the fixed target model, and the first one winning at least half of the games decides the
// time (the harness's Evaluation::kAfterTraining).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>
#include <utility>

#include <unistd.h>

#include <torch/torch.h>

#include "data/generators/dataset_directory.h"
#include "data/random.h"
#include "parallel/communicator.h"
#include "parallel/gather.h"
#include "parallel/gradient_sync.h"
#include "go/example_file.h"
#include "go/mcts.h"
#include "go/random_evaluator.h"
#include "go/sgf.h"
#include "util/error.h"
#include "workloads/common.h"
#include "workloads/minigo/model.h"
#include "workloads/minigo/model_file.h"

extern const char* const trainbench_presets_minigo;

namespace trainbench::minigo {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultTargetSeed = 1;  // as `trainbench data make` seeds a preset's generated data
constexpr const char* kTargetFile = "target.pt";
// A prepared bootstrap (presets with a `bootstrap` section): the starting network and generation 0's games.
constexpr const char* kStartFile = "start.pt";
constexpr const char* kBootstrapGamesFile = "bootstrap.examples";

MinigoNetOptions net_options(const Config& config) {
  return MinigoNetOptions()
      .board_size(config.integer("board_size"))
      .filters(config.integer("filters"))
      .trunk_blocks(config.integer("trunk_blocks"))
      .fc_width(config.integer("fc_width"));
}

// `flags`' resign_threshold as (low, high): each game draws its threshold from [low, high].
std::pair<double, double> resign_range(const Config& flags) {
  const std::vector<double> resign = flags.numbers("resign_threshold");
  if (resign.size() != 2 || resign[0] > resign[1])
    fail(flags.name() + ": resign_threshold",
         "expected [low, high] with low <= high (each game draws its threshold between them), got " +
             nlohmann::json(resign).dump());
  return {resign[0], resign[1]};
}

go::MctsOptions mcts_options(const Config& config, int readouts) {
  go::MctsOptions options;
  options.readouts = readouts;
  options.virtual_losses = static_cast<int>(config.integer("virtual_losses"));
  options.value_init_penalty = config.number("value_init_penalty");
  options.dirichlet_alpha = config.number("dirichlet_alpha");
  options.noise_mix = config.number("noise_mix");
  options.target_pruning = config.boolean("target_pruning");
  options.allow_pass = config.boolean("allow_pass");
  return options;
}

// Self-play and matches spread their games over `threads` drivers, each network call on one compute
// thread: the networks are small, so games in parallel use the cores better than intra-op threads do.
go::PlayOptions self_play_options(const Config& config, uint64_t seed, int threads) {
  go::PlayOptions options;
  options.worker_threads = threads;
  options.worker_setup = [] { torch::set_num_threads(1); };
  options.size = static_cast<int>(config.integer("board_size"));
  options.komi = config.number("komi");
  options.concurrent_games = static_cast<int>(config.integer("concurrent_games"));
  options.mcts = mcts_options(config, static_cast<int>(config.integer("num_readouts")));
  options.fast_readouts = static_cast<int>(config.integer("fast_readouts"));
  options.fast_move_probability = config.number("fast_move_probability");
  options.soft_pick_moves = static_cast<int>(config.integer("soft_pick_moves"));
  options.restrict_pass_alive_play_threshold = static_cast<int>(config.integer("restrict_pass_alive_play_threshold"));
  std::tie(options.resign_threshold_low, options.resign_threshold_high) = resign_range(config);
  options.disable_resign_fraction = config.number("disable_resign_pct") / 100.0;
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

go::PlayOptions match_options(const Config& config, uint64_t seed, int threads) {
  go::PlayOptions options = self_play_options(config, seed, threads);
  options.mcts = mcts_options(config, static_cast<int>(config.integer("eval_readouts")));
  options.soft_pick_moves = static_cast<int>(config.integer("eval_soft_pick_moves"));
  return options;
}

PiecewiseLr lr_schedule(const Config& config) {
  PiecewiseLr schedule{config.numbers("lr_rates"), config.integers("lr_boundaries")};
  if (schedule.rates.size() != schedule.boundaries.size() + 1)
    fail(config.name() + ": lr_rates",
         "needs one rate more than lr_boundaries: " + std::to_string(schedule.rates.size()) + " rates for " +
             std::to_string(schedule.boundaries.size()) + " boundaries");
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
void check_settings(const Config& config) {
  lr_schedule(config);
  resign_range(config);
  if (config.values().contains("bootstrap")) resign_range(Config(config.name() + ": bootstrap", config.values().at("bootstrap")));
  const int64_t size = config.integer("board_size");
  const double komi = config.number("komi");
  if (std::abs(komi) > static_cast<double>(size * size))
    fail(config.name() + ": komi", nlohmann::json(komi).dump() + " is more than the " + std::to_string(size * size) +
                                       " points of the board (board_size " + std::to_string(size) +
                                       "): it would decide every game before the first move");
  const double filter_amount = config.number("filter_amount");
  for (const std::string games : {"bootstrap_games", "min_selfplay_games_per_generation"})
    if (filter_amount * static_cast<double>(config.integer(games)) < 1)
      fail(config.name() + ": filter_amount", nlohmann::json(filter_amount).dump() + " of " + games + " " +
                                                  std::to_string(config.integer(games)) +
                                                  " is less than one example to train on: raise filter_amount or " + games);
}

// With `sgf_dir` set: an Error naming it unless the folder can be created and a file written in it, so that
// a run is refused before its first block rather than when its first games are written.
void require_writable_sgf_dir(const Config& config) {
  const std::string root = config.string("sgf_dir");
  if (root.empty()) return;
  const std::string where = config.name() + ": sgf_dir " + root;
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
void write_games(const Config& config, const std::string& folder, const std::vector<go::GameRecord>& records,
                 const std::string& model0, const std::string& model1) {
  const std::string root = config.string("sgf_dir");
  if (root.empty()) return;
  const fs::path dir = fs::path(root) / folder;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) fail(dir.string(), "cannot be created (sgf_dir): " + error.message());
  char name[64];
  for (size_t i = 0; i < records.size(); ++i) {
    const go::GameRecord& record = records[i];
    const std::string result = record.resigned ? (record.winner == go::kBlack ? "B+R" : "W+R") : go::result_text(record.score);
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
// the next generation with one network.
class MinigoLoop {
 public:
  MinigoLoop(const Config& config, torch::Device device, uint64_t seed, int threads,
             std::shared_ptr<parallel::Communicator> communicator = nullptr)
      : config_(config),
        device_(device),
        seed_(seed),
        threads_(threads),
        communicator_(std::move(communicator)),
        net_(net_options(config)),
        schedule_(lr_schedule(config)),
        rng_(data::mix_seed(seed, 0x6d696e69)) {
    net_->to(device_);
    net_->eval();  // training switches to train mode and back; self-play needs eval mode
    optimizer_.emplace(net_->parameters(), torch::optim::SGDOptions(schedule_.at(0)).momentum(config.number("momentum")));
    // The gradient exchange starts by giving every rank rank 0's network.
    if (world() > 1) gradients_.emplace(*communicator_, net_->parameters(), net_->buffers());
    training_.emplace(config, device_, net_->parameters(), gradients_ ? &*gradients_ : nullptr);
  }

  int world() const { return communicator_ ? communicator_->world() : 1; }
  int rank() const { return communicator_ ? communicator_->rank() : 0; }

  MinigoNet& net() { return net_; }
  const MinigoNet& net() const { return net_; }

  // Network `generation`'s self-play, `games` games with the current network (this rank's range of them),
  // straight into the window (the oldest generation leaves beyond window_size); with sgf_dir, its SGF is
  // written. Generation 0 is the bootstrap played in init (presets without a prepared one): the random
  // network's games, passes read only with bootstrap_allow_pass (minigo's bootstrap flags turn allow_pass
  // off, so that its games are played out). Returns the game count over all ranks.
  int play_generation(int64_t generation, int64_t games, go::PlayStats* stats, const std::function<void()>& on_batch) {
    go::PlayOptions options = self_play_options(config_, data::mix_seed(seed_, 1, static_cast<uint64_t>(generation)), threads_);
    if (generation == 0) options.mcts.allow_pass = config_.boolean("bootstrap_allow_pass");
    int share = 0;
    std::tie(options.first_game, share) = rank_share(games, rank(), world());
    go::ExampleFile played;
    {
      const KeepComputeThreads keep_threads;
      const auto records = go::self_play(options, share, evaluator(net_, on_batch), &played.examples, stats);
      const std::string player = "network " + std::to_string(generation);
      write_games(config_, "generation-" + generation_name(generation), records, player, player);
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
    while (static_cast<int64_t>(window_.size()) > config_.integer("window_size")) window_.erase(window_.begin());
  }

  // One pass over filter_amount of the window's examples, each under a random symmetry. With `control` (a
  // run's block), the shared training loop's block does the meter and progress, and assembling each batch
  // counts as input wait (self-play before it is training: the reference's loop, the network's own work);
  // without it (the bootstrap, outside any run) the steps are plain updates. Every rank draws the same
  // sample and symmetries and assembles its rows of each batch. Returns the block's report.
  BlockReport train_generation(RunControl* control) {
    if (control) training_->begin_block(*control);
    std::vector<std::pair<int, int64_t>> all;  // (generation in window, example)
    for (size_t g = 0; g < window_.size(); ++g)
      for (int64_t i = 0; i < window_[g].count(); ++i) all.emplace_back(static_cast<int>(g), i);
    // Fisher-Yates: a uniform sample of filter_amount of the window, in random order.
    for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[rng_.below(i)]);
    const int64_t sampled = sampled_examples();
    const int64_t batch = std::min(config_.integer("batch_size"), sampled);
    if (batch == 0) fail(config_.name(), "no training examples in the window (play more games per generation)");
    const int64_t steps = sampled / batch;
    if (batch < world())
      fail(config_.name(), "a training batch of " + std::to_string(batch) + " examples cannot be shared by " +
                               std::to_string(world()) + " ranks (play more games per generation)");
    const BatchSlice mine = slice_batch(batch, world())[static_cast<size_t>(rank())];
    const int size = static_cast<int>(config_.integer("board_size")), points = size * size;
    const int feature_size = go::Position::kPlanes * points;
    std::vector<uint8_t> features(static_cast<size_t>(mine.size * feature_size));
    std::vector<float> policies(static_cast<size_t>(mine.size * (points + 1))), outcomes(static_cast<size_t>(mine.size));
    for (int64_t step = 0; step < steps; ++step) {
      const auto assemble_batch = [&] {
        for (int64_t b = 0; b < batch; ++b) {
          const int symmetry = static_cast<int>(rng_.below(go::kSymmetries));  // drawn for every row on every rank
          const int64_t row = b - mine.begin;
          if (row < 0 || row >= mine.size) continue;
          const auto [g, i] = all[static_cast<size_t>(step * batch + b)];
          const go::ExampleSet& set = window_[static_cast<size_t>(g)];
          go::apply_symmetry(symmetry, set.features.data() + i * feature_size, features.data() + row * feature_size,
                             go::Position::kPlanes, size);
          go::apply_symmetry_to_policy(symmetry, set.policies.data() + i * (points + 1),
                                       policies.data() + row * (points + 1), size);
          outcomes[static_cast<size_t>(row)] = set.outcomes[static_cast<size_t>(i)];
        }
      };
      if (control) {
        training_->fetch(assemble_batch);
        training_->train(train_step(features.data(), policies.data(), outcomes.data(), mine.size));
      } else {
        assemble_batch();
        training_->update(train_step(features.data(), policies.data(), outcomes.data(), mine.size));
      }
    }
    net_->eval();
    // The weights are equal after every averaged update; the batch-norm statistics saw only each rank's rows.
    if (gradients_) gradients_->broadcast_buffers();
    BlockReport report;
    if (control) report = training_->end_block();
    report.samples = steps * mine.size;
    return report;
  }

  // One optimizer step's TrainingStep on a batch already in memory (train mode until the generation's
  // training ends): lr from the global step.
  TrainingStep train_step(const uint8_t* features, const float* policies, const float* outcomes, int64_t batch) {
    const int64_t size = config_.integer("board_size"), points = size * size;
    const auto planes = torch::from_blob(const_cast<uint8_t*>(features), {batch, go::Position::kPlanes, size, size}, torch::kUInt8)
                            .to(device_, torch::kFloat32);
    const auto pi = torch::from_blob(const_cast<float*>(policies), {batch, points + 1}, torch::kFloat32).to(device_);
    const auto z = torch::from_blob(const_cast<float*>(outcomes), {batch}, torch::kFloat32).to(device_);
    net_->train();
    return minigo::training_step(net_, *optimizer_, schedule_.at(training_->updates()), planes, pi, z,
                                 config_.number("value_cost_weight"), config_.number("opt_weight_decay"));
  }

  static go::BatchEvaluator evaluator(MinigoNet& net, const std::function<void()>& on_batch) {
    return [&net, on_batch](int, const uint8_t* features, int batch, float* policy, float* values) {
      if (on_batch) on_batch();
      net->evaluate(features, batch, policy, values);
    };
  }

  // Every rank's examples of a generation, in rank order, which is game order.
  go::ExampleFile gather_examples(const go::ExampleFile& mine) {
    const int size = static_cast<int>(config_.integer("board_size"));
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

  int64_t window_examples() const {
    int64_t examples = 0;
    for (const go::ExampleSet& set : window_) examples += set.count();
    return examples;
  }
  // The examples the next generation trains on: filter_amount of the window's, rounded down.
  int64_t sampled_examples() const {
    return static_cast<int64_t>(std::floor(config_.number("filter_amount") * static_cast<double>(window_examples())));
  }

 private:
  const Config& config_;
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
// ranks; without, this process plays them all.
double win_rate(const Config& config, MinigoNet& learner, MinigoNet& target, uint64_t seed, int threads,
                const std::function<void()>& on_batch, const std::string& sgf_folder, const std::string& learner_name,
                parallel::Communicator* communicator = nullptr) {
  const int64_t games = config.integer("eval_games");
  go::PlayOptions options = match_options(config, seed, threads);
  int share = static_cast<int>(games);
  if (communicator) std::tie(options.first_game, share) = rank_share(games, communicator->rank(), communicator->world());
  const KeepComputeThreads keep_threads;
  const auto records = go::play_match(
      options, share,
      [&](int model, const uint8_t* features, int batch, float* policy, float* values) {
        if (on_batch) on_batch();
        (model == 0 ? learner : target)->evaluate(features, batch, policy, values);
      },
      nullptr);
  write_games(config, sgf_folder, records, learner_name, "target");
  std::vector<double> wins{0};
  for (const auto& record : records) wins[0] += record.winner == (record.black_model == 0 ? go::kBlack : go::kWhite);
  if (communicator) communicator->sum(wins);
  return wins[0] / static_cast<double>(games);
}

MinigoNet network_of(const Config& config, const Snapshot& tensors, torch::Device device) {
  MinigoNet net(net_options(config));
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
TargetRun build_target(const Config& config, torch::Device device, int64_t seed) {
  const Config recipe(config.name() + ": dataset", config.values().at("dataset"));
  const int threads_before = torch::get_num_threads();
  torch::set_num_threads(1);
  const uint64_t run_seed = data::mix_seed(static_cast<uint64_t>(seed), static_cast<uint64_t>(recipe.integer("target_run")));
  torch::manual_seed(run_seed);  // the untrained network
  MinigoLoop loop(config, device, run_seed ^ 0x7461726765740000ULL, 2);
  TargetRun run;
  run.untrained = snapshot_of(loop.net());
  const int64_t generations = recipe.integer("target_generation");
  for (int64_t generation = 1; generation <= generations; ++generation) {
    loop.play_generation(generation - 1,
                         config.integer(generation == 1 ? "bootstrap_games" : "min_selfplay_games_per_generation"), nullptr,
                         nullptr);
    loop.train_generation(nullptr);
  }
  torch::set_num_threads(threads_before);
  run.target = loop.net();
  return run;
}

// A saved network of the preset's shape: a `.minigo` file or bare frozen graph (minigo's own format, as the
// official checkpoint and target are), or a torch::save file as `data make` writes; `missing` says where one
// comes from when `path` does not exist.
MinigoNet load_network(const Config& config, const std::string& path, torch::Device device, const std::string& missing) {
  if (!fs::exists(path)) fail(path, missing);
  const MinigoNetOptions expected = net_options(config);
  MinigoNet net(expected);
  if (is_minigo_model_file(path)) {
    MinigoModelFile file = read_minigo_model(path);
    const MinigoNetOptions& found = file.net->options();
    if (file.input_features != "mlperf07" || found.board_size() != expected.board_size() || found.filters() != expected.filters() ||
        found.trunk_blocks() != expected.trunk_blocks() || found.fc_width() != expected.fc_width())
      fail(path, "holds a " + std::to_string(found.board_size()) + "x" + std::to_string(found.board_size()) + " network of " +
                     std::to_string(found.filters()) + " filters, " + std::to_string(found.trunk_blocks()) + " blocks, fc width " +
                     std::to_string(found.fc_width()) + " on " + file.input_features + " features; this preset plays " +
                     std::to_string(expected.board_size()) + "x" + std::to_string(expected.board_size()) + ", " +
                     std::to_string(expected.filters()) + " filters, " + std::to_string(expected.trunk_blocks()) +
                     " blocks, fc width " + std::to_string(expected.fc_width()) + " on mlperf07 features");
    net = file.net;
  } else {
    try {
      torch::load(net, path);
    } catch (const c10::Error& error) {
      fail(path, std::string("is not a MiniGo network of this preset's shape (board_size, filters, trunk_blocks, fc_width): ") +
                     error.what_without_backtrace());
    }
  }
  net->to(device);
  net->eval();
  return net;
}

MinigoNet load_target(const Config& config, const std::string& path, torch::Device device) {
  return load_network(config, path, device,
                      "target model not found (make one with `trainbench data make minigo --out DIR`, or give --set target_model=PATH)");
}

// The reference's bootstrap (ml_perf/flags/19/bootstrap.flags, run by ml_perf/scripts/bootstrap.sh before
// the benchmark): the self-play flags overlaid with the preset's `bootstrap` section (80 readouts, no fast
// moves, resignation below a per-game threshold in [-1, -0.99], no target pruning), passes read only with
// bootstrap_allow_pass, played by the random model of `--model=random:...` (go/random_evaluator.h).
go::ExampleFile play_prepared_bootstrap(const Config& config, uint64_t seed, int threads) {
  const Config flags(config.name() + ": bootstrap", config.values().at("bootstrap"));
  go::PlayOptions options = self_play_options(config, data::mix_seed(seed, 1, 0), threads);
  options.mcts.readouts = static_cast<int>(flags.integer("num_readouts"));
  options.mcts.allow_pass = config.boolean("bootstrap_allow_pass");
  options.mcts.target_pruning = flags.boolean("target_pruning");
  options.fast_move_probability = flags.number("fast_move_probability");
  std::tie(options.resign_threshold_low, options.resign_threshold_high) = resign_range(flags);
  go::ExampleFile file;
  const auto records = go::self_play(options, static_cast<int>(config.integer("bootstrap_games")),
                                     go::random_evaluator(options.size, data::mix_seed(seed, 3)), &file.examples, nullptr);
  write_games(config, "generation-000", records, "random model", "random model");
  file.games = static_cast<int>(records.size());
  return file;
}

class MinigoWorkload : public WorkloadBase {
 public:
  explicit MinigoWorkload(WorkloadSettings settings) : WorkloadBase(std::move(settings)) { check_settings(config_); }

  WorkloadDescription describe() const override {
    WorkloadDescription description = base_description("examples");
    description.uses_dataset = false;
    description.schedule.first_block = 1;
    description.schedule.interval = 1;
    description.schedule.max_epochs = static_cast<double>(config_.integer("max_generations"));
    description.schedule.unit = ScheduleUnit::kGenerations;
    description.schedule.evaluation = Evaluation::kAfterTraining;
    const std::vector<double> resign = config_.numbers("resign_threshold");
    description.hyperparameters = {
        {"train_batch_size", config_.integer("batch_size")},
        {"lr_rates", config_.numbers("lr_rates")},
        {"lr_boundaries", config_.integers("lr_boundaries")},
        {"opt_weight_decay", config_.number("opt_weight_decay")},
        {"filter_amount", config_.number("filter_amount")},
        {"num_readouts", config_.integer("num_readouts")},
        {"value_init_penalty", config_.number("value_init_penalty")},
        {"virtual_losses", config_.integer("virtual_losses")},
        {"holdout_pct", 0.0},
        {"disable_resign_pct", config_.number("disable_resign_pct")},
        {"resign_threshold", resign},
        {"min_selfplay_games_per_generation", config_.integer("min_selfplay_games_per_generation")},
        {"window_size", config_.integer("window_size")},
        {"eval_games", config_.integer("eval_games")},
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
    seed_torch(settings_);
    require_writable_sgf_dir(config_);
    loop_.emplace(config_, device_, static_cast<uint64_t>(settings_.seed), settings_.threads, communicator_);
    const bool prepared = config_.values().contains("bootstrap");
    if (prepared) bootstrap_games_ = load_prepared_bootstrap();
    if (!settings_.weights.empty())  // instead of the seeded (or the prepared bootstrap's) starting network
      restore(loop_->net(), snapshot_of(load_network(config_, settings_.weights, device_, "not found (--weights)")));
    target_ = resolve_target();
    // Every rank resolved the same target; rank 0's copy makes it one network even where ranks' CPUs round
    // differently while building it from the recipe.
    broadcast_network(*communicator_, target_);
    if (!prepared) bootstrap_games_ = loop_->play_generation(0, config_.integer("bootstrap_games"), nullptr, nullptr);
    // Generation 1 trains on the bootstrap alone: refused here, before the first block, if that is nothing.
    if (loop_->sampled_examples() == 0)
      fail(config_.name() + ": filter_amount",
           nlohmann::json(config_.number("filter_amount")).dump() + " of the bootstrap's " +
               std::to_string(loop_->window_examples()) + " examples (" + std::to_string(bootstrap_games_) +
               " games) is not one example to train generation 1 on: raise filter_amount or bootstrap_games");
    return loop_->net()->initialized_tensor_names();
  }

  DataSummary open_data() override { return {}; }

  // --save-model: the last generation's network, as the reference's own engine reads its models.
  void save_weights(const std::string& path) const override { write_minigo_model(loop_->net(), path); }

  // Generation g: network g - 1's self-play (none in generation 1, which trains on the bootstrap games), then
  // network g's training on a window that holds those games, as ml_perf/train_loop.py's train() waits for
  // min_games_per_iteration games of network g - 1 before it samples; network g is saved when the block ends,
  // and that is the time run_stop takes if it is the first to pass.
  BlockReport train(const Block& block, RunControl& control) override {
    const auto generation = static_cast<int64_t>(block.first_epoch_num);
    int games = bootstrap_games_;
    double self_play_seconds = 0;
    if (generation > 1) {
      const auto begin = std::chrono::steady_clock::now();
      games = loop_->play_generation(generation - 1, config_.integer("min_selfplay_games_per_generation"), nullptr,
                                     [&] { control.check_interrupt(); });
      self_play_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    }
    BlockReport report = loop_->train_generation(&control);
    report.logged = {{"actual_selfplay_games_per_generation", games}};
    // Self-play's rate over all ranks, the exchange of the games included: what more ranks buy.
    if (self_play_seconds > 0) report.logged.push_back({"trainbench_selfplay_games_per_second", games / self_play_seconds});
    saved_.push_back(snapshot_of(loop_->net()));
    return report;
  }

  Metric evaluate(const Block& block, RunControl& control) override {
    const auto generation = static_cast<size_t>(block.first_epoch_num);
    MinigoNet learner = network_of(config_, saved_.at(generation - 1), device_);
    return win_rate(config_, learner, target_, data::mix_seed(static_cast<uint64_t>(settings_.seed), 2, generation),
                    settings_.threads, [&] { control.check_interrupt(); }, "evaluation-" + generation_name(generation),
                    "network " + std::to_string(generation), communicator_.get());
  }

 private:
  // The starting network and generation 0's examples from `bootstrap_dir`; returns the bootstrap's game count.
  int load_prepared_bootstrap() {
    const std::string dir = config_.string("bootstrap_dir");
    if (dir.empty())
      fail(config_.name() + ": bootstrap_dir",
           "this preset starts from a prepared bootstrap: write it with `trainbench data make minigo --preset " +
               config_.preset() + " --out DIR` (with the same --set settings) and give --set bootstrap_dir=DIR");
    const std::string missing = "not found: bootstrap_dir must be a directory `trainbench data make minigo --preset " +
                                config_.preset() + "` wrote";
    MinigoNet start = load_network(config_, (fs::path(dir) / kStartFile).string(), device_, missing);
    restore(loop_->net(), snapshot_of(start));  // every rank loads the same file
    const fs::path games_path = fs::path(dir) / kBootstrapGamesFile;
    if (!fs::exists(games_path)) fail(games_path.string(), missing);
    go::ExampleFile file = go::read_example_file(games_path.string(), static_cast<int>(config_.integer("board_size")));
    loop_->add_to_window(std::move(file.examples));
    return file.games;
  }

  // The target: --set target_model=PATH, else the one `data make minigo` wrote (the quality gate passes its
  // directory), else built here from the preset's recipe with the seed `data make` uses by default.
  MinigoNet resolve_target() {
    const std::string path = config_.string("target_model");
    if (!path.empty()) return load_target(config_, path, device_);
    if (!settings_.data_dir.empty()) return load_target(config_, (fs::path(settings_.data_dir) / kTargetFile).string(), device_);
    if (!config_.values().contains("dataset"))
      fail(config_.name() + ": target_model",
           "the reference preset needs the target model: --set target_model=PATH, the official target.minigo "
           "(ml_perf/README.md: gs://minigo-pub/ml_perf/0.7/target.*, frozen by freeze_graph.py)");
    return build_target(config_, device_, kDefaultTargetSeed).target;
  }

  std::optional<MinigoLoop> loop_;
  MinigoNet target_{nullptr};
  int bootstrap_games_ = 0;
  std::vector<Snapshot> saved_;
};

// `trainbench data make minigo` for a preset with a `bootstrap` section (the reference): the starting network
// (start.pt, the random initialisation of `seed`, as a run of that seed starts) and the bootstrap games
// (bootstrap.examples), with bootstrap.json naming preset, seed and flags. The target is not made here: the
// reference's is the official one, given with --set target_model=PATH.
void make_bootstrap(const Config& config, const std::string& out_dir, int64_t seed) {
  torch::manual_seed(seed);
  const MinigoNet start(net_options(config));
  torch::save(start, (fs::path(out_dir) / kStartFile).string());
  // Fixed, so that the network's batches, and with them its rounding, are the same on any machine.
  const int threads = 2;
  const go::ExampleFile file = play_prepared_bootstrap(config, static_cast<uint64_t>(seed), threads);
  go::write_example_file((fs::path(out_dir) / kBootstrapGamesFile).string(), file);
  std::ofstream((fs::path(out_dir) / "bootstrap.json"))
      << nlohmann::json{{"preset", config.preset()},
                        {"seed", seed},
                        {"self_play_threads", threads},
                        {"board_size", config.integer("board_size")},
                        {"games", file.games},
                        {"examples", file.examples.count()},
                        {"allow_pass", config.boolean("bootstrap_allow_pass")},
                        {"flags", config.values().at("bootstrap")}}
             .dump(2)
      << "\n";
}

// The preset's target network, saved as target.pt with a note of its recipe and of its strength: the win
// rate of its run's untrained network against it, in the preset's evaluation games (what a learner must turn
// into at least 0.5).
void make_target(const Config& config, const std::string& out_dir, int64_t seed) {
  TargetRun run = build_target(config, torch::kCPU, seed);
  torch::save(run.target, (fs::path(out_dir) / kTargetFile).string());
  MinigoNet untrained = network_of(config, run.untrained, torch::kCPU);
  const double untrained_win_rate = win_rate(config, untrained, run.target, static_cast<uint64_t>(seed) ^ 0x756e747261696e00ULL, 2, nullptr,
                                             "untrained-against-target", "untrained network");
  std::ofstream((fs::path(out_dir) / "target.json"))
      << nlohmann::json{{"preset", config.preset()},
                        {"seed", seed},
                        {"recipe", config.values().at("dataset")},
                        {"untrained_win_rate", untrained_win_rate},
                        {"eval_games", config.integer("eval_games")}}
             .dump(2)
      << "\n";
}

// `trainbench data make minigo`: the target (make_target), or for a preset with a `bootstrap` section the
// prepared bootstrap (make_bootstrap). Written into a staging folder renamed at the end, so that a failed
// make leaves nothing behind that a retry would refuse.
void make_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const bool prepared = config.values().contains("bootstrap");
  if (!prepared && !config.values().contains("dataset"))
    fail("--preset " + config.name(),
         "has no generated target; the reference's target model is given with --set target_model=PATH (the official target.minigo)");
  check_settings(config);
  require_writable_sgf_dir(config);
  data::write_new_dataset_directory(out_dir, [&](const fs::path& staging) {
    fs::create_directories(staging);
    if (prepared)
      make_bootstrap(config, staging.string(), seed);
    else
      make_target(config, staging.string(), seed);
  });
}

// Self-play games and the inference call MCTS makes, with the preset's (random) network.
void bench_self_play_and_inference(BenchRun& run, MinigoLoop& loop, data::Rng& rng, std::ostream& out) {
  const Config& config = run.settings.config;
  const WorkloadSettings& settings = run.settings;
  const BenchSettings& bench_settings = run.bench;
  const int64_t size = config.integer("board_size"), points = size * size;
  // Self-play: `steps` games of the preset's search with its (random) network.
  go::PlayStats stats;
  const auto begin = std::chrono::steady_clock::now();
  loop.play_generation(0, std::max<int64_t>(bench_settings.steps, config.integer("concurrent_games")), &stats, nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  char line[512];
  std::snprintf(line, sizeof line,
                "self-play     %10.1f moves/s, %.1f network evaluations/s, mean inference batch %.1f  (%lld games of %lld "
                "concurrent, %lld readouts x %lld virtual losses, %lldx%lld)\n",
                static_cast<double>(stats.moves) / seconds, static_cast<double>(stats.evaluations) / seconds, stats.mean_batch(),
                static_cast<long long>(std::max<int64_t>(bench_settings.steps, config.integer("concurrent_games"))),
                static_cast<long long>(config.integer("concurrent_games")), static_cast<long long>(config.integer("num_readouts")),
                static_cast<long long>(config.integer("virtual_losses")), static_cast<long long>(config.integer("board_size")),
                static_cast<long long>(config.integer("board_size")));
  out << line;
  // Inference: one self-play driver's full batch (its concurrent games x virtual losses) through the
  // evaluator MCTS calls, uint8 planes in, probabilities and values out; bench/peers/minigo_inference.py
  // times python3-torch on the same batch.
  const int64_t inference_batch =
      std::max<int64_t>(1, config.integer("concurrent_games") / settings.threads) * config.integer("virtual_losses");
  std::vector<uint8_t> planes(static_cast<size_t>(inference_batch * go::Position::kPlanes * points));
  for (auto& value : planes) value = static_cast<uint8_t>(rng.below(2));
  std::vector<float> priors(static_cast<size_t>(inference_batch * (points + 1))), values(static_cast<size_t>(inference_batch));
  const double call_time = run.median_step_seconds(
      [&] { loop.net()->evaluate(planes.data(), static_cast<int>(inference_batch), priors.data(), values.data()); });
  std::snprintf(line, sizeof line,
                "inference     %10.1f positions/s  (batch %lld: %lld games / %d threads x %lld virtual losses, %d threads, "
                "median of %lld calls: %.5f s/call)\n",
                static_cast<double>(inference_batch) / call_time, static_cast<long long>(inference_batch),
                static_cast<long long>(config.integer("concurrent_games")), settings.threads,
                static_cast<long long>(config.integer("virtual_losses")), settings.threads,
                static_cast<long long>(bench_settings.steps), call_time);
  out << line;
}

void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out) {
  const Config& config = settings.config;
  BenchRun run(settings, bench_settings);
  MinigoLoop loop(config, run.device, static_cast<uint64_t>(settings.seed), settings.threads);
  const int64_t size = config.integer("board_size"), points = size * size;
  data::Rng rng(static_cast<uint64_t>(settings.seed));
  if (!run.memory_only()) bench_self_play_and_inference(run, loop, rng, out);
  // Training: the full step on a batch of random positions already in memory.
  const int64_t batch = run.global_batch;
  std::vector<uint8_t> features(static_cast<size_t>(batch * go::Position::kPlanes * points));
  for (auto& value : features) value = static_cast<uint8_t>(rng.below(2));
  std::vector<float> policies(static_cast<size_t>(batch * (points + 1)), 1.0f / static_cast<float>(points + 1));
  std::vector<float> outcomes(static_cast<size_t>(batch));
  for (auto& value : outcomes) value = rng.below(2) ? 1.0f : -1.0f;
  const double step_time =
      run.training_step_seconds([&] { loop.train_step(features.data(), policies.data(), outcomes.data(), batch); });
  run.print_training(out, step_time, "examples", 3.0 * 2.0 * static_cast<double>(loop.net()->forward_macs()),
                     std::to_string(config.integer("filters")) + " filters, " + std::to_string(config.integer("trunk_blocks")) +
                         " blocks, " + std::to_string(size) + "x" + std::to_string(size));
}

// checkpoint export: the network a run of `settings` starts from (the seeded initialization, as build()
// makes it, or --weights), as a `.minigo` file.
void export_weights(const WorkloadSettings& settings, const std::string& out_path) {
  seed_torch(settings);
  MinigoNet net(net_options(settings.config));
  if (!settings.weights.empty()) net = load_network(settings.config, settings.weights, torch::kCPU, "not found (--weights)");
  write_minigo_model(net, out_path);
}

}  // namespace

WorkloadEntry registry_entry() {
  return {"minigo",
          "Reinforcement learning: MiniGo self-play (batched MCTS) and training on 19x19 Go, target a 50% win rate "
          "against a fixed target model",
          trainbench_presets_minigo,
          "",
          construct_workload<MinigoWorkload>,
          bench,
          make_dataset,
          nullptr,
          export_weights,
          /*print_shard_plan=*/nullptr,
          ".minigo"};
}

}  // namespace trainbench::minigo
