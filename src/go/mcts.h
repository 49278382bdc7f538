#pragma once
// MCTS as minigo's cc/mcts_node.cc searches, and the batched self-play and match drivers around it:
// - PUCT: score = Q (from the mover's side) + U, U = c(N) * sqrt(max(1, N - 1)) * P / (1 + n), with
//   c(N) = 2 * (ln((1 + N + 19652) / 19652) + 1.25) and Q = W / (1 + n); an unvisited child starts at its
//   parent's Q minus value_init_penalty; illegal moves are never selected.
// - virtual losses: each tree selects `virtual_losses` leaves per round (a virtual loss on every node of a
//   pending path steers the next selection elsewhere), so the network sees games x virtual_losses leaves.
// - Dirichlet noise mixed into the root's priors, fast moves (fewer readouts, no noise, not recorded),
//   soft pick (visits^0.98) for the first moves, resignation below a per-game threshold, target pruning of
//   the recorded visit distribution, a random board symmetry for every network evaluation.
// - passes as minigo's self-play treats them: soft picks choose among the points (a pass only when the search
//   put no visit on any point), after a pass the search reads the answering pass first (its exact score
//   shows an early pass losing), with allow_pass off (minigo's bootstrap) the search reads a pass only
//   where no point is legal, and once the whole board is pass-alive the game ends with two passes.
// - tree reuse: after a move the chosen child's subtree becomes the root (minigo's MctsTree::PlayMove), and
//   the next search adds its readouts to the visits it kept; self-play clears it before a full move when
//   fast moves are on (minigo's ClearSubtrees), so recorded searches start from a fresh, noised root.
// Torch-free: the network is a BatchEvaluator the workload provides.
#include <cstdint>
#include <functional>
#include <vector>

#include "data/random.h"
#include "go/board.h"

namespace trainbench::go {

struct MctsOptions {
  int readouts = 800;
  int virtual_losses = 4;
  double c_puct_base = 19652;
  double c_puct_init = 1.25;
  double value_init_penalty = 0.2;
  double dirichlet_alpha = 0.03;
  double noise_mix = 0.25;
  bool target_pruning = true;
  bool random_symmetry = true;
  bool allow_pass = true;  // false: a pass is read only where no point is legal
};

// Evaluates `batch` positions for network `model`: features are uint8 planes (batch x 13 x size x size);
// writes move probabilities (batch x (size*size + 1), pass last) and values in [-1, 1] from Black's side.
using BatchEvaluator =
    std::function<void(int model, const uint8_t* features, int batch, float* policy, float* values)>;

// One search tree over the position of a Game. Storage is reserved for one search's readouts and grows to
// the largest tree kept (no allocation per move once it has).
class SearchTree {
 public:
  SearchTree(int size, const MctsOptions& options);

  // A fresh root at the game's position.
  void reset(const Game& game);
  // The game (the one given to reset) has played `move`: that child's subtree becomes the root, with its
  // visits, values and priors; a fresh root when the search never expanded that child.
  void advance(Move move);
  // Selects up to `count` leaves (fewer when a selection runs into a pending leaf). Terminal leaves (two
  // passes, or the game's length limit) are backed up with the score at once; every other leaf gets its
  // features written at features + k * feature_size() and must be answered by apply_evaluations().
  int select_leaves(int count, uint8_t* features, data::Rng& rng);
  void apply_evaluations(const float* policy, const float* values);
  // Mixes Dirichlet noise into the root's priors (once the root is evaluated).
  void add_root_noise(data::Rng& rng);
  bool root_expanded() const;
  int root_visits() const { return nodes_[0].visits; }
  // Mean value at the root from Black's side.
  double root_value() const;
  // The move after the search: when `soft`, a point sampled with probability proportional to visits^0.98
  // (a pass only when no point has a visit), else the most visited (legal) move, outside `restricted` (the
  // root position's pass_alive_regions(), when play is kept out of them; a pass when nothing else is left), as
  // minigo's GetMostVisitedMove.
  Move pick_move(bool soft, data::Rng& rng, const std::array<Color, kMaxPoints>* restricted = nullptr) const;
  // The recorded policy target: visit counts (pruned when target_pruning is on), normalized. With pruning and
  // `restricted` regions, their points record no visits, and a pass records one when nothing else is left, as
  // minigo's ReshapeFinalVisits.
  void visit_distribution(float* pi, const std::array<Color, kMaxPoints>* restricted = nullptr) const;
  int child_visits(Move move) const;

  int feature_size() const { return Position::kPlanes * points_; }
  int max_game_length = 0;  // moves after which a game is scored as it stands

 private:
  struct Node {
    int32_t parent = -1;
    int32_t edges = -1;  // first of this node's points_ + 1 edges, or -1 before expansion
    int32_t visits = 0;  // including virtual losses in flight
    float value_sum = 0;  // from Black's side, including virtual losses in flight
    Color to_play = kBlack;
    bool pending = false;  // selected, waiting for its evaluation
  };
  struct Leaf {
    int32_t node;
    int symmetry;
  };
  int new_node(int parent, Color to_play);
  double action_score(const Node& parent, int edge_index, double sqrt_term) const;
  double child_q(const Node& parent, int32_t child) const;
  // Adds the leaf's value along its path, turning the virtual loss selection put there into a real visit.
  void backup(int32_t node, double value);

  int size_, points_;
  MctsOptions options_;
  const Game* game_ = nullptr;  // the game whose position is the root; the caller keeps it unchanged during search
  Position scratch_;
  std::vector<Node> nodes_;
  std::vector<float> priors_;     // per edge; negative for an illegal move
  std::vector<int32_t> children_;  // per edge; -1 until visited
  std::vector<Leaf> leaves_;
  std::vector<uint64_t> path_hashes_;
  std::vector<uint8_t> scratch_features_;
  mutable std::vector<double> per_move_;  // noise or pruned counts, one per move
  // advance() copies the kept subtree into these and swaps them with the live storage.
  std::vector<Node> spare_nodes_;
  std::vector<float> spare_priors_;
  std::vector<int32_t> spare_children_, copied_from_;
};

// One training example: the position's planes, the search's visit distribution, the game's outcome.
struct ExampleSet {
  int size = 0;
  std::vector<uint8_t> features;  // examples x 13 x size x size
  std::vector<float> policies;    // examples x (size*size + 1)
  std::vector<float> outcomes;    // +1 when Black won, -1 when White won
  int64_t count() const { return static_cast<int64_t>(outcomes.size()); }
  void append(const ExampleSet& other);
};

struct GameRecord {
  int index = 0;  // the game's number in its generation (or match), PlayOptions::first_game onwards
  Game game;
  double score = 0;  // Black minus White minus komi at the end (0 when the game ended by resignation)
  Color winner = kEmpty;
  bool resigned = false;
  int black_model = 0, white_model = 0;
};

struct PlayOptions {
  int size = 9;
  double komi = 7.5;
  int concurrent_games = 16;
  MctsOptions mcts;
  // Self-play only:
  int fast_readouts = 0;             // 0: every move is a full move
  double fast_move_probability = 0;  // playout cap oscillation
  int soft_pick_moves = 30;          // moves picked in proportion to visits^0.98
  // Self-play: once the opponent has passed this many times in a row (the count stops there), moves in
  // pass-alive regions are neither picked nor recorded (minigo's restrict_pass_alive_play_threshold).
  int restrict_pass_alive_play_threshold = 4;
  bool dirichlet_noise = true;
  double resign_threshold_low = -1.0, resign_threshold_high = -0.9;  // drawn per game
  double disable_resign_fraction = 0.1;  // games that never resign (to check false resignations)
  bool resign = true;
  int max_game_length = 0;  // 0: 2 * size * size
  uint64_t seed = 1;
  // The games played are [first_game, first_game + games) of a generation or match. Each game draws its
  // randomness (noise, picks, resignation, fast moves, leaf ties) from (seed, its index) and a match's colours
  // follow the index, so how a generation is split over threads or ranks does not change its games, for an
  // evaluator whose values do not depend on which positions share its batch.
  int first_game = 0;
  // Games are split over this many threads, each a driver with its share of the concurrent games calling
  // the evaluator (which must then be thread-safe); with more than one, worker_setup runs first on each
  // (e.g. one compute thread per network call, so the workers, not the network's intra-op threads, use the
  // cores).
  int worker_threads = 1;
  std::function<void()> worker_setup;
};

struct PlayStats {
  int64_t moves = 0;  // searched moves (not the passes that end a game once the whole board is pass-alive)
  int64_t evaluations = 0;  // network evaluations (positions)
  int64_t searched_visits = 0;  // root visits when the moves were played
  int64_t reused_visits = 0;    // of those, the visits the searches started with (tree reuse)
  int64_t batches = 0;      // network calls
  double mean_batch() const { return batches ? static_cast<double>(evaluations) / static_cast<double>(batches) : 0; }
};

// Self-play: `games` games of model 0 against itself, `concurrent_games` at a time (over worker_threads
// drivers), each tree selecting virtual_losses leaves per round, every round of a driver one network call.
// Full moves are recorded as examples. Records and examples come in game order, whatever order the games
// ended in.
std::vector<GameRecord> self_play(const PlayOptions& options, int games, const BatchEvaluator& evaluate,
                                  ExampleSet* examples, PlayStats* stats);
// A match: model 0 against model 1, Black alternating by game (model 0 is Black in even games), no noise,
// no fast moves, no resignation; moves soft-picked for the first soft_pick_moves.
std::vector<GameRecord> play_match(const PlayOptions& options, int games, const BatchEvaluator& evaluate,
                                   PlayStats* stats);

}  // namespace trainbench::go
