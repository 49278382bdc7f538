#include "go/mcts.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <thread>

#include "util/error.h"

namespace trainbench::go {

namespace {

double standard_normal(data::Rng& rng) {
  const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Marsaglia and Tsang's gamma sampler; for shape < 1 the boost Gamma(a) = Gamma(a + 1) * U^(1/a).
double gamma_sample(double shape, data::Rng& rng) {
  if (shape < 1) return gamma_sample(shape + 1, rng) * std::pow(1.0 - rng.uniform(), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = standard_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - rng.uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double game_value(const Position& position) {
  const double score = position.score();
  return score > 0 ? 1.0 : score < 0 ? -1.0 : 0.0;
}

}  // namespace

// ---- SearchTree ----

SearchTree::SearchTree(int size, const MctsOptions& options)
    : size_(size), points_(size * size), options_(options), scratch_(size), scratch_features_(static_cast<size_t>(feature_size())) {
  max_game_length = 2 * points_;
  const size_t nodes = static_cast<size_t>(options.readouts + options.virtual_losses + 2);
  nodes_.reserve(nodes);
  priors_.reserve(nodes * static_cast<size_t>(points_ + 1));
  children_.reserve(nodes * static_cast<size_t>(points_ + 1));
  leaves_.reserve(static_cast<size_t>(options.virtual_losses));
}

void SearchTree::reset(const Game& game) {
  game_ = &game;
  nodes_.clear();
  priors_.clear();
  children_.clear();
  new_node(-1, game.position().to_play());
}

int SearchTree::new_node(int parent, Color to_play) {
  Node node;
  node.parent = parent;
  node.to_play = to_play;
  nodes_.push_back(node);
  return static_cast<int>(nodes_.size()) - 1;
}

void SearchTree::advance(Move move) {
  const int32_t kept = nodes_[0].edges >= 0 ? children_[nodes_[0].edges + move] : -1;
  if (kept < 0 || nodes_[kept].edges < 0) {
    reset(*game_);
    return;
  }
  // Breadth first from the kept child: copied_from_[i] is the old index of new node i.
  spare_nodes_.clear();
  spare_priors_.clear();
  spare_children_.clear();
  copied_from_.clear();
  copied_from_.push_back(kept);
  spare_nodes_.push_back(nodes_[kept]);
  spare_nodes_[0].parent = -1;
  for (size_t i = 0; i < spare_nodes_.size(); ++i) {
    const Node& old = nodes_[copied_from_[i]];
    if (old.edges < 0) continue;
    spare_nodes_[i].edges = static_cast<int32_t>(spare_priors_.size());
    for (int e = 0; e <= points_; ++e) {
      spare_priors_.push_back(priors_[old.edges + e]);
      int32_t child = children_[old.edges + e];
      if (child >= 0) {
        copied_from_.push_back(child);
        spare_nodes_.push_back(nodes_[child]);
        spare_nodes_.back().parent = static_cast<int32_t>(i);
        child = static_cast<int32_t>(spare_nodes_.size()) - 1;
      }
      spare_children_.push_back(child);
    }
  }
  nodes_.swap(spare_nodes_);
  priors_.swap(spare_priors_);
  children_.swap(spare_children_);
}

bool SearchTree::root_expanded() const { return nodes_[0].edges >= 0 && !nodes_[0].pending; }

double SearchTree::root_value() const { return nodes_[0].value_sum / (1.0 + nodes_[0].visits); }

double SearchTree::child_q(const Node& parent, int32_t child) const {
  const double mover = sign(parent.to_play);
  if (child < 0 || nodes_[child].visits == 0)
    return mover * parent.value_sum / (1.0 + parent.visits) - options_.value_init_penalty;
  return mover * nodes_[child].value_sum / (1.0 + nodes_[child].visits);
}

double SearchTree::action_score(const Node& parent, int edge_index, double exploration) const {
  const int32_t child = children_[parent.edges + edge_index];
  const double visits = child < 0 ? 0 : nodes_[child].visits;
  return child_q(parent, child) + exploration * priors_[parent.edges + edge_index] / (1.0 + visits);
}

int SearchTree::select_leaves(int count, uint8_t* features, data::Rng& rng) {
  leaves_.clear();
  const PositionSet& seen = game_->seen();
  for (int k = 0; k < count; ++k) {
    scratch_ = game_->position();
    path_hashes_.clear();
    int32_t node = 0;
    while (!nodes_[node].pending && nodes_[node].edges >= 0) {
      const Node& parent = nodes_[node];
      const double n = parent.visits;
      const double exploration = 2.0 * (std::log((1.0 + n + options_.c_puct_base) / options_.c_puct_base) + options_.c_puct_init) *
                                 std::sqrt(std::max(1.0, n - 1.0));
      int best = -1;
      double best_score = -1e30;
      const int last = options_.allow_pass ? points_ : points_ - 1;
      // After a pass, the answering pass (which ends the game with its exact score) is read first, as
      // minigo's SelectLeaf does "to avoid situations where we auto-lose by passing too early".
      const int32_t answering_pass = children_[parent.edges + points_];
      if (options_.allow_pass && scratch_.consecutive_passes() == 1 && (answering_pass < 0 || nodes_[answering_pass].visits == 0))
        best = points_;
      for (int e = 0; e <= last && best != points_; ++e) {
        if (priors_[parent.edges + e] < 0) continue;
        const double score = action_score(parent, e, exploration);
        if (score > best_score) {
          best_score = score;
          best = e;
        }
      }
      if (best < 0) best = points_;  // no legal point: pass (always legal)
      scratch_.play(static_cast<Move>(best));
      path_hashes_.push_back(scratch_.stone_hash());
      int32_t child = children_[parent.edges + best];
      if (child < 0) {
        child = new_node(node, scratch_.to_play());
        children_[nodes_[node].edges + best] = child;
        node = child;
        break;
      }
      node = child;
    }
    if (nodes_[node].pending) break;  // another selection of this round waits on it; evaluate what we have
    // A virtual loss on the path: one more visit, lost for the player who moved into each node.
    for (int32_t at = node; at >= 0; at = nodes_[at].parent) {
      nodes_[at].visits += 1;
      nodes_[at].value_sum += static_cast<float>(sign(nodes_[at].to_play));
    }
    if (scratch_.consecutive_passes() >= 2 || scratch_.move_number() >= max_game_length) {
      backup(node, game_value(scratch_));
      continue;
    }
    Node& leaf = nodes_[node];
    leaf.pending = true;
    leaf.edges = static_cast<int32_t>(priors_.size());
    for (int e = 0; e <= points_; ++e) {
      bool legal = scratch_.is_legal_locally(static_cast<Move>(e));
      if (legal && e < points_) {
        const uint64_t hash = scratch_.hash_after(static_cast<Move>(e));
        legal = !seen.contains(hash) && std::find(path_hashes_.begin(), path_hashes_.end(), hash) == path_hashes_.end();
      }
      priors_.push_back(legal ? 0.0f : -1.0f);
      children_.push_back(-1);
    }
    const int symmetry = options_.random_symmetry ? static_cast<int>(rng.below(kSymmetries)) : 0;
    uint8_t* out = features + static_cast<size_t>(leaves_.size()) * static_cast<size_t>(feature_size());
    if (symmetry == 0) {
      scratch_.features(out);
    } else {
      scratch_.features(scratch_features_.data());
      apply_symmetry(symmetry, scratch_features_.data(), out, Position::kPlanes, size_);
    }
    leaves_.push_back({node, symmetry});
  }
  return static_cast<int>(leaves_.size());
}

void SearchTree::apply_evaluations(const float* policy, const float* values) {
  for (size_t k = 0; k < leaves_.size(); ++k) {
    Node& leaf = nodes_[leaves_[k].node];
    const float* probabilities = policy + k * static_cast<size_t>(points_ + 1);
    for (int e = 0; e < points_; ++e)
      if (priors_[leaf.edges + e] >= 0) priors_[leaf.edges + e] = probabilities[symmetry_point(leaves_[k].symmetry, e, size_)];
    if (priors_[leaf.edges + points_] >= 0) priors_[leaf.edges + points_] = probabilities[points_];
    leaf.pending = false;
    backup(leaves_[k].node, values[k]);
  }
  leaves_.clear();
}

void SearchTree::backup(int32_t node, double value) {
  for (int32_t at = node; at >= 0; at = nodes_[at].parent)
    nodes_[at].value_sum += static_cast<float>(value - sign(nodes_[at].to_play));
}

void SearchTree::add_root_noise(data::Rng& rng) {
  const Node& root = nodes_[0];
  double total = 0;
  std::vector<double>& noise = per_move_;
  noise.assign(static_cast<size_t>(points_ + 1), 0.0);
  for (int e = 0; e <= points_; ++e)
    if (priors_[root.edges + e] >= 0) total += noise[e] = gamma_sample(options_.dirichlet_alpha, rng);
  if (total <= 0) return;
  for (int e = 0; e <= points_; ++e)
    if (priors_[root.edges + e] >= 0)
      priors_[root.edges + e] = static_cast<float>((1 - options_.noise_mix) * priors_[root.edges + e] + options_.noise_mix * noise[e] / total);
}

int SearchTree::child_visits(Move move) const {
  const int32_t child = children_[nodes_[0].edges + move];
  return child < 0 ? 0 : nodes_[child].visits;
}

Move SearchTree::pick_move(bool soft, data::Rng& rng, const std::array<Color, kMaxPoints>* restricted) const {
  const Node& root = nodes_[0];
  if (soft) {
    // Points only, as minigo's SoftPickMove, so that sampling never passes early in the game.
    double total = 0;
    for (int e = 0; e < points_; ++e)
      if (priors_[root.edges + e] >= 0) total += std::pow(child_visits(static_cast<Move>(e)), 0.98);
    if (total <= 0) return static_cast<Move>(points_);
    double target = rng.uniform() * total;
    for (int e = 0; e < points_; ++e) {
      if (priors_[root.edges + e] < 0) continue;
      const double weight = std::pow(child_visits(static_cast<Move>(e)), 0.98);
      if (weight > 0 && (target -= weight) < 0) return static_cast<Move>(e);
    }
  }
  int best = points_;
  int best_visits = -1;
  float best_prior = -1;
  for (int e = 0; e <= points_; ++e) {
    if (priors_[root.edges + e] < 0 || (restricted && e < points_ && (*restricted)[e] != kEmpty)) continue;
    const int visits = child_visits(static_cast<Move>(e));
    if (visits > best_visits || (visits == best_visits && priors_[root.edges + e] > best_prior)) {
      best = e;
      best_visits = visits;
      best_prior = priors_[root.edges + e];
    }
  }
  return static_cast<Move>(best);
}

// Target pruning as minigo's ReshapeFinalVisits: visits a child got only through exploration (more than
// it needs for its action score to stay below the best child's) are taken away, and a child left with
// one visit or none records none.
void SearchTree::visit_distribution(float* pi, const std::array<Color, kMaxPoints>* restricted) const {
  const Node& root = nodes_[0];
  std::vector<double>& counts = per_move_;
  counts.assign(static_cast<size_t>(points_ + 1), 0.0);
  int best = -1;
  for (int e = 0; e <= points_; ++e) {
    if (priors_[root.edges + e] < 0) continue;
    counts[e] = child_visits(static_cast<Move>(e));
    if (best < 0 || counts[e] > counts[best]) best = e;
  }
  if (options_.target_pruning && best >= 0) {
    const double n = root.visits;
    const double exploration = 2.0 * (std::log((1.0 + n + options_.c_puct_base) / options_.c_puct_base) + options_.c_puct_init) *
                               std::sqrt(std::max(1.0, n - 1.0));
    const double best_score = action_score(root, best, exploration);
    for (int e = 0; e <= points_; ++e) {
      if (e == best || counts[e] <= 0) continue;
      const double gap = best_score - child_q(root, children_[root.edges + e]);
      if (gap <= 0) continue;
      const double needed = std::floor(exploration * priors_[root.edges + e] / gap - 1.0);
      counts[e] = std::min(counts[e], std::max(0.0, needed));
      if (counts[e] <= 1) counts[e] = 0;
    }
    if (restricted) {
      bool any = false;
      for (int e = 0; e <= points_; ++e) {
        if (e < points_ && (*restricted)[e] != kEmpty) counts[e] = 0;
        any = any || counts[e] > 0;
      }
      if (!any) counts[points_] = 1;
    }
  }
  double total = 0;
  for (const double count : counts) total += count;
  int legal = 0;
  for (int e = 0; e <= points_; ++e) legal += priors_[root.edges + e] >= 0;
  for (int e = 0; e <= points_; ++e)
    pi[e] = total > 0 ? static_cast<float>(counts[e] / total) : (priors_[root.edges + e] >= 0 ? 1.0f / legal : 0.0f);
}

// ---- Examples ----

void ExampleSet::append(const ExampleSet& other) {
  size = other.size;
  features.insert(features.end(), other.features.begin(), other.features.end());
  policies.insert(policies.end(), other.policies.begin(), other.policies.end());
  outcomes.insert(outcomes.end(), other.outcomes.begin(), other.outcomes.end());
}

// ---- Drivers ----

namespace {

enum class Mode { kSelfPlay, kMatch };

struct Slot {
  // One tree per model: in a match each player searches (and keeps) its own tree, as two minigo players do.
  Slot(int size, const MctsOptions& options, int models)
      : game(size), trees(static_cast<size_t>(models), SearchTree(size, options)) {}
  Game game;
  std::vector<SearchTree> trees;
  data::Rng rng{0};  // the current game's, seeded from its index when it starts
  bool active = false;
  int game_index = 0;
  int black_model = 0, white_model = 0;
  double resign_threshold = -2;  // below -1: never resigns
  int target_readouts = 0;
  bool noise = false, record = false, noised = false;
  // Passes in a row by Black and by White; a count stops at restrict_pass_alive_play_threshold, as minigo's.
  std::array<int, 2> consecutive_passes{};
  ExampleSet examples;  // this game's recorded moves; outcomes filled in at the end
  std::vector<Color> movers;
};

class GameDriver {
 public:
  // Plays games [first_game, end_game) (their indices decide the colours of a match and seed their randomness).
  GameDriver(const PlayOptions& options, Mode mode, int first_game, int end_game, const BatchEvaluator& evaluate,
             ExampleSet* examples, PlayStats* stats)
      : options_(options), mode_(mode), games_(end_game), evaluate_(evaluate), examples_(examples), stats_(stats),
        next_game_(first_game) {
    const int games = end_game - first_game;
    if (options.size < 2 || options.size > kMaxSize) fail("board size " + std::to_string(options.size), "expected 2 to 19");
    if (options.mcts.virtual_losses < 1) fail("virtual_losses", "must be at least 1");
    if (options.mcts.readouts < 1) fail("readouts", "must be at least 1");
    const int concurrent = std::max(1, std::min(options.concurrent_games, games));
    slots_.reserve(static_cast<size_t>(concurrent));  // the trees point at their slot's game: no reallocation
    for (int i = 0; i < concurrent; ++i) slots_.emplace_back(options.size, options.mcts, mode == Mode::kMatch ? 2 : 1);
    points_ = options.size * options.size;
    feature_size_ = Position::kPlanes * points_;
    if (examples_) examples_->size = options.size;
  }

  std::vector<GameRecord> run() {
    for (Slot& slot : slots_) start_game(slot);
    std::array<Batch, 2> batches;
    while (true) {
      bool any = false;
      for (Batch& batch : batches) batch.clear();
      for (size_t s = 0; s < slots_.size(); ++s) {
        Slot& slot = slots_[s];
        while (slot.active && mover_tree(slot).root_expanded() && mover_tree(slot).root_visits() >= slot.target_readouts)
          finish_move(slot);
        if (!slot.active) continue;
        any = true;
        Batch& batch = batches[mover_model(slot)];
        const size_t needed = (batch.count + static_cast<size_t>(options_.mcts.virtual_losses)) * static_cast<size_t>(feature_size_);
        if (batch.features.size() < needed) batch.features.resize(needed);
        // No more leaves than the move's readouts still need, so that a move gets exactly its readouts.
        SearchTree& tree = mover_tree(slot);
        const int wanted = tree.root_expanded() ? std::min(options_.mcts.virtual_losses, slot.target_readouts - tree.root_visits())
                                                : options_.mcts.virtual_losses;
        const int selected = tree.select_leaves(wanted, batch.features.data() + batch.count * static_cast<size_t>(feature_size_), slot.rng);
        if (selected > 0) batch.entries.push_back({s, static_cast<size_t>(selected)});
        batch.count += static_cast<size_t>(selected);
      }
      if (!any) break;
      for (size_t model = 0; model < batches.size(); ++model) {
        Batch& batch = batches[model];
        if (batch.count == 0) continue;
        batch.policy.resize(batch.count * static_cast<size_t>(points_ + 1));
        batch.values.resize(batch.count);
        evaluate_(static_cast<int>(model), batch.features.data(), static_cast<int>(batch.count), batch.policy.data(), batch.values.data());
        if (stats_) {
          stats_->evaluations += static_cast<int64_t>(batch.count);
          stats_->batches += 1;
        }
        size_t offset = 0;
        for (const auto& [s, count] : batch.entries) {
          Slot& slot = slots_[s];
          slot.trees[model].apply_evaluations(batch.policy.data() + offset * static_cast<size_t>(points_ + 1),
                                              batch.values.data() + offset);
          offset += count;
          maybe_add_noise(slot);
        }
      }
    }
    // Game order: the games of a driver end in an order that depends on their lengths.
    std::sort(records_.begin(), records_.end(), [](const GameRecord& a, const GameRecord& b) { return a.index < b.index; });
    std::sort(game_examples_.begin(), game_examples_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    if (examples_)
      for (const auto& [index, examples] : game_examples_) examples_->append(examples);
    return std::move(records_);
  }

 private:
  struct Batch {
    std::vector<uint8_t> features;
    std::vector<float> policy, values;
    std::vector<std::pair<size_t, size_t>> entries;  // (slot, leaves)
    size_t count = 0;
    void clear() {
      entries.clear();
      count = 0;
    }
  };

  int mover_model(const Slot& slot) const {
    return slot.game.position().to_play() == kBlack ? slot.black_model : slot.white_model;
  }
  SearchTree& mover_tree(Slot& slot) { return slot.trees[static_cast<size_t>(mover_model(slot))]; }

  void maybe_add_noise(Slot& slot) {
    if (!slot.noise || slot.noised || !mover_tree(slot).root_expanded()) return;
    mover_tree(slot).add_root_noise(slot.rng);
    slot.noised = true;
  }

  void start_game(Slot& slot) {
    if (next_game_ >= games_) {
      slot.active = false;
      return;
    }
    slot.active = true;
    slot.game_index = next_game_++;
    slot.rng = data::Rng(data::mix_seed(options_.seed, static_cast<uint64_t>(slot.game_index)));
    slot.game = Game(options_.size, options_.komi);
    for (SearchTree& tree : slot.trees) tree.max_game_length = options_.max_game_length > 0 ? options_.max_game_length : 2 * points_;
    slot.examples.features.clear();
    slot.examples.policies.clear();
    slot.examples.outcomes.clear();
    slot.movers.clear();
    slot.consecutive_passes = {0, 0};
    if (mode_ == Mode::kMatch) {
      const bool first_black = slot.game_index % 2 == 0;
      slot.black_model = first_black ? 0 : 1;
      slot.white_model = first_black ? 1 : 0;
      slot.resign_threshold = -2;
    } else {
      slot.black_model = slot.white_model = 0;
      const bool resign = options_.resign && slot.rng.uniform() >= options_.disable_resign_fraction;
      slot.resign_threshold =
          resign ? slot.rng.uniform(options_.resign_threshold_low, options_.resign_threshold_high) : -2;
    }
    start_move(slot, -1);
  }

  // The next search: `played` is the move just played (-1 at the start of a game). Every tree keeps the
  // subtree of that move, except that self-play clears it before a full move when fast moves are on.
  void start_move(Slot& slot, Move played) {
    const bool fast = mode_ == Mode::kSelfPlay && options_.fast_readouts > 0 &&
                      slot.rng.uniform() < options_.fast_move_probability;
    const bool reuse = played >= 0 && (fast || options_.fast_move_probability <= 0 || mode_ == Mode::kMatch);
    for (SearchTree& tree : slot.trees) {
      if (reuse)
        tree.advance(played);
      else
        tree.reset(slot.game);
    }
    const int reused = mover_tree(slot).root_visits();
    if (stats_) stats_->reused_visits += reused;
    slot.target_readouts = reused + (fast ? options_.fast_readouts : options_.mcts.readouts);
    slot.noise = mode_ == Mode::kSelfPlay && !fast && options_.dirichlet_noise;
    slot.record = mode_ == Mode::kSelfPlay && !fast;
    slot.noised = false;
    maybe_add_noise(slot);
  }

  void finish_move(Slot& slot) {
    const Position& position = slot.game.position();
    const Color mover = position.to_play();
    SearchTree& tree = mover_tree(slot);
    if (sign(mover) * tree.root_value() < slot.resign_threshold) {
      end_game(slot, opponent(mover), true, 0);
      return;
    }
    // Self-play keeps out of pass-alive regions once the opponent has passed often enough in a row
    // (minigo's concurrent_selfplay.cc; its evaluation games do not).
    const int opponent_passes = slot.consecutive_passes[mover == kBlack ? 1 : 0];
    std::optional<std::array<Color, kMaxPoints>> restricted;
    if (mode_ == Mode::kSelfPlay && opponent_passes >= options_.restrict_pass_alive_play_threshold)
      restricted = position.pass_alive_regions();  // once, for the recorded target and the pick
    if (slot.record && examples_) {
      const size_t at = slot.examples.features.size();
      slot.examples.features.resize(at + static_cast<size_t>(feature_size_));
      position.features(slot.examples.features.data() + at);
      const size_t pi_at = slot.examples.policies.size();
      slot.examples.policies.resize(pi_at + static_cast<size_t>(points_ + 1));
      tree.visit_distribution(slot.examples.policies.data() + pi_at, restricted ? &*restricted : nullptr);
      slot.movers.push_back(mover);
    }
    const bool soft = static_cast<int>(slot.game.moves().size()) < options_.soft_pick_moves;
    const Move move = tree.pick_move(soft, slot.rng, restricted ? &*restricted : nullptr);
    int& passes = slot.consecutive_passes[mover == kBlack ? 0 : 1];
    if (passes < options_.restrict_pass_alive_play_threshold) passes = move == position.pass() ? passes + 1 : 0;
    slot.game.play(move);
    if (stats_) {
      stats_->moves += 1;
      stats_->searched_visits += tree.root_visits();
    }
    // Once no move can change the score, both sides pass (unsearched, unrecorded), as minigo's self-play
    // ends such games, instead of filling their own eyes until the move limit.
    if (!slot.game.over() && slot.game.position().whole_board_pass_alive()) {
      while (!slot.game.over()) slot.game.play(slot.game.position().pass());
    }
    if (slot.game.over() || static_cast<int>(slot.game.moves().size()) >= tree.max_game_length) {
      const double score = slot.game.position().score();
      end_game(slot, score > 0 ? kBlack : score < 0 ? kWhite : kEmpty, false, score);
      return;
    }
    start_move(slot, move);
  }

  void end_game(Slot& slot, Color winner, bool resigned, double score) {
    GameRecord record{slot.game_index, slot.game, score, winner, resigned, slot.black_model, slot.white_model};
    records_.push_back(std::move(record));
    if (examples_ && !slot.movers.empty()) {
      const float outcome = winner == kBlack ? 1.0f : winner == kWhite ? -1.0f : 0.0f;
      slot.examples.outcomes.assign(slot.movers.size(), outcome);
      slot.examples.size = options_.size;
      game_examples_.emplace_back(slot.game_index, std::move(slot.examples));  // start_game clears the slot's
    }
    start_game(slot);
  }

  const PlayOptions& options_;
  Mode mode_;
  int games_;
  const BatchEvaluator& evaluate_;
  ExampleSet* examples_;
  PlayStats* stats_;
  std::vector<Slot> slots_;
  std::vector<GameRecord> records_;
  std::vector<std::pair<int, ExampleSet>> game_examples_;  // (game index, its recorded moves)
  int next_game_;
  int points_ = 0, feature_size_ = 0;
};

// Splits the games over options.worker_threads drivers, each on its own thread with its own share of the
// concurrent games and a contiguous range of the game indices, and joins their records, examples and
// counts in thread order, which is game order. An exception on a worker (e.g. an interrupted run) is
// rethrown here.
std::vector<GameRecord> play_games(const PlayOptions& options, Mode mode, int games, const BatchEvaluator& evaluate,
                                   ExampleSet* examples, PlayStats* stats) {
  const int workers = std::max(1, std::min(options.worker_threads, games));
  PlayOptions share = options;
  share.concurrent_games = std::max(1, options.concurrent_games / workers);
  std::vector<std::vector<GameRecord>> records(static_cast<size_t>(workers));
  std::vector<ExampleSet> example_sets(static_cast<size_t>(workers));
  std::vector<PlayStats> counts(static_cast<size_t>(workers));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  const auto work = [&](int worker) {
    try {
      if (workers > 1 && options.worker_setup) options.worker_setup();
      const int first = options.first_game + games * worker / workers;
      const int end = options.first_game + games * (worker + 1) / workers;
      GameDriver driver(share, mode, first, end, evaluate, examples ? &example_sets[worker] : nullptr, &counts[worker]);
      records[worker] = driver.run();
    } catch (...) {
      errors[worker] = std::current_exception();
    }
  };
  if (workers == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (int worker = 0; worker < workers; ++worker) threads.emplace_back(work, worker);
    for (auto& thread : threads) thread.join();
  }
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
  std::vector<GameRecord> all;
  for (int worker = 0; worker < workers; ++worker) {
    for (auto& record : records[worker]) all.push_back(std::move(record));
    if (examples) examples->append(example_sets[worker]);
    if (stats) {
      stats->moves += counts[worker].moves;
      stats->evaluations += counts[worker].evaluations;
      stats->batches += counts[worker].batches;
      stats->searched_visits += counts[worker].searched_visits;
      stats->reused_visits += counts[worker].reused_visits;
    }
  }
  return all;
}

}  // namespace

std::vector<GameRecord> self_play(const PlayOptions& options, int games, const BatchEvaluator& evaluate,
                                  ExampleSet* examples, PlayStats* stats) {
  return play_games(options, Mode::kSelfPlay, games, evaluate, examples, stats);
}

std::vector<GameRecord> play_match(const PlayOptions& options, int games, const BatchEvaluator& evaluate,
                                   PlayStats* stats) {
  return play_games(options, Mode::kMatch, games, evaluate, nullptr, stats);
}

}  // namespace trainbench::go
