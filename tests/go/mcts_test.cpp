// MCTS with a hand-written evaluator (uniform policy, value from the stone count it reads off the feature
// planes): it finds the forced capture and the forced escape, counts visits as it should with virtual
// losses, and the self-play and match drivers batch many games and record consistent examples.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "go/mcts.h"
#include "go/test_positions.h"

namespace trainbench::go {
namespace {

using testing::point;
using testing::setup;

// Value: tanh of the stone difference (Black's side), read from the planes as the network would see them.
// Policy: 20x the weight on points next to a group in atari (captures and escapes) and on a decoy, the
// bottom-left corner, so that the search, not the prior, has to tell the forced move from the decoy.
BatchEvaluator material_evaluator(int size) {
  return [size](int, const uint8_t* features, int batch, float* policy, float* values) {
    const int points = size * size;
    for (int b = 0; b < batch; ++b) {
      const uint8_t* planes = features + static_cast<size_t>(b) * Position::kPlanes * points;
      int own = 0, other = 0;
      for (int p = 0; p < points; ++p) {
        own += planes[p];
        other += planes[points + p];
      }
      const double black_to_play = planes[8 * points] ? 1 : -1;
      values[b] = static_cast<float>(std::tanh(0.3 * (own - other)) * black_to_play);
      float* probabilities = policy + static_cast<size_t>(b) * (points + 1);
      double total = 0;
      for (int m = 0; m <= points; ++m) {
        bool atari_liberty = false;
        if (m < points) {
          const int row = m / size, col = m % size;
          const int neighbors[4][2] = {{row - 1, col}, {row + 1, col}, {row, col - 1}, {row, col + 1}};
          for (const auto& n : neighbors)
            if (n[0] >= 0 && n[1] >= 0 && n[0] < size && n[1] < size) atari_liberty |= planes[9 * points + n[0] * size + n[1]] != 0;
          atari_liberty &= planes[m] == 0 && planes[points + m] == 0;
        }
        probabilities[m] = atari_liberty || m == (size - 1) * size ? 20.0f : 1.0f;
        total += probabilities[m];
      }
      for (int m = 0; m <= points; ++m) probabilities[m] = static_cast<float>(probabilities[m] / total);
    }
  };
}

// Searches `game`'s position until the root has `readouts` visits.
void run_search(SearchTree& tree, const Game& game, const BatchEvaluator& evaluate, int readouts, int virtual_losses,
                data::Rng& rng) {
  tree.reset(game);
  std::vector<uint8_t> features(static_cast<size_t>(virtual_losses * tree.feature_size()));
  const int points = game.position().points();
  std::vector<float> policy(static_cast<size_t>(virtual_losses * (points + 1))), values(static_cast<size_t>(virtual_losses));
  while (!tree.root_expanded() || tree.root_visits() < readouts) {
    const int leaves = tree.select_leaves(virtual_losses, features.data(), rng);
    evaluate(0, features.data(), leaves, policy.data(), values.data());
    tree.apply_evaluations(policy.data(), values.data());
  }
}

Move search(const Game& game, int readouts, int virtual_losses) {
  MctsOptions options;
  options.readouts = readouts;
  options.virtual_losses = virtual_losses;
  SearchTree tree(game.position().size(), options);
  data::Rng rng(5);
  run_search(tree, game, material_evaluator(game.position().size()), readouts, virtual_losses, rng);
  const int points = game.position().points();
  int children = 0;
  for (int m = 0; m <= points; ++m) children += tree.child_visits(static_cast<Move>(m));
  EXPECT_EQ(children, tree.root_visits() - 1) << "every visit but the root's own went to a child";
  return tree.pick_move(false, rng);
}

// minigo's restrict_pass_alive_play_threshold (cc/concurrent_selfplay.cc, GetMostVisitedMove and
// ReshapeFinalVisits in cc/mcts_tree.cc): restricted, the most visited move is taken from outside the
// pass-alive regions and the recorded target holds no visit in them.
TEST(GoMcts, RestrictedPicksAndTargetsStayOutOfPassAliveRegions) {
  const Game game = setup({".X.X.",  //
                           "XXXXX",  //
                           ".....",  //
                           ".....",  //
                           "....."},
                          kBlack, 0.5);
  const auto regions = game.position().pass_alive_regions();
  ASSERT_EQ(regions[point(0, 0, 5)], kBlack);
  // A prior that wants Black to fill its own corner eye, so that the search visits it most.
  const BatchEvaluator eye_filler = [](int, const uint8_t*, int batch, float* policy, float* values) {
    for (int b = 0; b < batch; ++b) {
      for (int m = 0; m <= 25; ++m) policy[b * 26 + m] = m == 0 ? 0.8f : 0.2f / 25;
      values[b] = 0;
    }
  };
  MctsOptions options;
  options.readouts = 64;
  options.random_symmetry = false;  // the prior names the corner as seen, not in a rotated frame
  SearchTree tree(5, options);
  data::Rng rng(5);
  run_search(tree, game, eye_filler, 64, options.virtual_losses, rng);
  ASSERT_EQ(tree.pick_move(false, rng), point(0, 0, 5));
  const Move restricted = tree.pick_move(false, rng, &regions);
  ASSERT_NE(restricted, game.position().pass());
  EXPECT_EQ(regions[restricted], kEmpty) << "picked " << restricted;
  std::vector<float> pi(26);
  tree.visit_distribution(pi.data());
  EXPECT_GT(pi[point(0, 0, 5)], 0);
  tree.visit_distribution(pi.data(), &regions);
  for (int p = 0; p < 25; ++p)
    if (regions[p] != kEmpty) EXPECT_EQ(pi[p], 0) << "point " << p;
  EXPECT_NEAR(std::accumulate(pi.begin(), pi.end(), 0.0), 1.0, 1e-6);
}

TEST(GoMcts, FindsTheForcedCapture) {
  const Game game = setup({".......",  //
                           "..XXX..",  //
                           ".XOOO..",  //
                           "..XXX..",  //
                           ".......",  //
                           ".......",  //
                           "......."},
                          kBlack, 0.5);
  ASSERT_EQ(game.position().liberties(point(2, 2, 7)), 1);
  EXPECT_EQ(gtp_move(search(game, 200, 4), 7), "F5");
}

TEST(GoMcts, FindsTheForcedEscape) {
  const Game game = setup({".......",  //
                           "..OOO..",  //
                           ".OXXX..",  //
                           "..OOO..",  //
                           ".......",  //
                           ".......",  //
                           "......."},
                          kBlack, 0.5);
  ASSERT_EQ(game.position().liberties(point(2, 2, 7)), 1);
  EXPECT_EQ(gtp_move(search(game, 300, 4), 7), "F5");
}

// Target pruning (minigo's ReshapeFinalVisits): the recorded distribution keeps the most visited move's
// visits and takes exploration visits from the others, so no other move gains share.
TEST(GoMcts, TargetPruningOnlyTakesVisitsFromTheOtherMoves) {
  const Game game(5, 0.5);
  for (const bool pruning : {false, true}) {
    MctsOptions options;
    options.readouts = 120;
    options.virtual_losses = 4;
    options.target_pruning = pruning;
    SearchTree tree(5, options);
    tree.reset(game);
    data::Rng rng(8);
    const BatchEvaluator evaluate = material_evaluator(5);
    std::vector<uint8_t> features(static_cast<size_t>(4 * tree.feature_size()));
    std::vector<float> policy(4 * 26), values(4);
    while (!tree.root_expanded() || tree.root_visits() < options.readouts) {
      const int leaves = tree.select_leaves(4, features.data(), rng);
      evaluate(0, features.data(), leaves, policy.data(), values.data());
      tree.apply_evaluations(policy.data(), values.data());
    }
    std::vector<float> pi(26);
    tree.visit_distribution(pi.data());
    const Move best = tree.pick_move(false, rng);
    const double total = tree.root_visits() - 1;
    int reduced = 0;
    for (int m = 0; m < 26; ++m) {
      const double raw = tree.child_visits(static_cast<Move>(m)) / total;
      if (!pruning) EXPECT_NEAR(pi[m], raw, 1e-6);
      if (pruning && m != best) EXPECT_LE(pi[m] * tree.child_visits(best) / std::max(pi[best], 1e-9f), tree.child_visits(static_cast<Move>(m)) + 1e-6);
      reduced += pruning && m != best && pi[m] < raw - 1e-6;
    }
    if (pruning) {
      EXPECT_GE(pi[best], tree.child_visits(best) / total);
      EXPECT_GT(reduced, 0) << "some exploration visits were pruned";
    }
  }
}

// Runs searches on `tree` until its root has `readouts` visits.
void search_to(SearchTree& tree, int readouts, const BatchEvaluator& evaluate, data::Rng& rng) {
  const int vl = 4, moves = tree.feature_size() / Position::kPlanes + 1;
  std::vector<uint8_t> features(static_cast<size_t>(vl * tree.feature_size()));
  std::vector<float> policy(static_cast<size_t>(vl * moves)), values(vl);
  while (!tree.root_expanded() || tree.root_visits() < readouts) {
    const int leaves = tree.select_leaves(vl, features.data(), rng);
    evaluate(0, features.data(), leaves, policy.data(), values.data());
    tree.apply_evaluations(policy.data(), values.data());
  }
}

int children_visits(const SearchTree& tree, int points) {
  int visits = 0;
  for (int m = 0; m <= points; ++m) visits += tree.child_visits(static_cast<Move>(m));
  return visits;
}

// After a move the chosen child's subtree is the new root (minigo's MctsTree::PlayMove): its visits are the
// root's, its children's visits are the grandchildren's, and the next search adds to them.
TEST(GoMcts, TreeReuseCarriesTheChosenChildsVisitsOver) {
  Game game(5, 0.5);
  MctsOptions options;
  options.readouts = 200;
  options.virtual_losses = 4;
  SearchTree tree(5, options);
  tree.reset(game);
  data::Rng rng(4);
  const BatchEvaluator evaluate = material_evaluator(5);
  search_to(tree, options.readouts, evaluate, rng);
  const Move move = tree.pick_move(false, rng);
  const int kept = tree.child_visits(move);
  ASSERT_GT(kept, 10);
  game.play(move);
  tree.advance(move);
  EXPECT_TRUE(tree.root_expanded());
  EXPECT_EQ(tree.root_visits(), kept);
  EXPECT_EQ(children_visits(tree, 25), kept - 1) << "the grandchildren's visits came along";
  const Move reply = tree.pick_move(false, rng);
  const int reply_visits = tree.child_visits(reply);
  EXPECT_GT(reply_visits, 0);
  Move unexplored = -1;
  for (int m = 0; m < 25 && unexplored < 0; ++m)
    if (tree.child_visits(static_cast<Move>(m)) == 0 && game.is_legal(static_cast<Move>(m))) unexplored = static_cast<Move>(m);
  search_to(tree, kept + options.readouts, evaluate, rng);
  EXPECT_EQ(tree.root_visits(), kept + options.readouts);
  EXPECT_EQ(children_visits(tree, 25), tree.root_visits() - 1);
  EXPECT_GE(tree.child_visits(reply), reply_visits) << "visits only grow";

  // A move the search never expanded: a fresh root.
  tree.reset(game);
  search_to(tree, 4, evaluate, rng);
  ASSERT_GE(unexplored, 0);
  ASSERT_EQ(tree.child_visits(unexplored), 0);
  game.play(unexplored);
  tree.advance(unexplored);
  EXPECT_FALSE(tree.root_expanded());
  EXPECT_EQ(tree.root_visits(), 0);
}

// Every position's prior is half on pass, and passing at once wins for Black (komi -0.5): with allow_pass
// the search reads the pass most, yet a soft pick plays a point (minigo's SoftPickMove); without allow_pass
// (minigo's bootstrap) the pass is never read.
TEST(GoMcts, PassesAreSoftPickedNeverAndReadOnlyWhenAllowed) {
  const BatchEvaluator pass_lover = [](int, const uint8_t*, int batch, float* policy, float* values) {
    for (int b = 0; b < batch; ++b) {
      for (int m = 0; m < 25; ++m) policy[b * 26 + m] = 0.02f;
      policy[b * 26 + 25] = 0.5f;
      values[b] = 0;
    }
  };
  const Game game(5, -0.5);
  for (const bool allow_pass : {true, false}) {
    MctsOptions options;
    options.readouts = 64;
    options.allow_pass = allow_pass;
    SearchTree tree(5, options);
    tree.reset(game);
    data::Rng rng(6);
    search_to(tree, options.readouts, pass_lover, rng);
    if (allow_pass) {
      EXPECT_GT(tree.child_visits(25), 32) << "the search reads the pass that wins";
      ASSERT_EQ(tree.pick_move(false, rng), 25) << "the most visited move";
      for (int pick = 0; pick < 50; ++pick) EXPECT_NE(tree.pick_move(true, rng), 25) << "soft picks choose points";
    } else {
      EXPECT_EQ(tree.child_visits(25), 0);
      EXPECT_NE(tree.pick_move(false, rng), 25);
    }
  }
}

// Self-play on 5x5 with noise, fast moves and soft-picked openings: what the driver tests share.
PlayOptions small_self_play(int concurrent_games, int readouts, int fast_readouts, double fast_move_probability,
                            uint64_t seed) {
  PlayOptions options;
  options.size = 5;
  options.komi = 0.5;
  options.concurrent_games = concurrent_games;
  options.mcts.readouts = readouts;
  options.mcts.virtual_losses = 4;
  options.mcts.dirichlet_alpha = 0.5;
  options.fast_readouts = fast_readouts;
  options.fast_move_probability = fast_move_probability;
  options.soft_pick_moves = 6;
  options.seed = seed;
  return options;
}

TEST(GoMcts, SelfPlayBatchesManyGamesAndRecordsConsistentExamples) {
  PlayOptions options = small_self_play(6, 24, 8, 0.5, 3);
  options.resign = false;
  ExampleSet examples;
  PlayStats stats;
  const auto records = self_play(options, 8, material_evaluator(5), &examples, &stats);
  ASSERT_EQ(records.size(), 8u);
  // One game sends at most virtual_losses (4) leaves per call; more than twice that needs three games or more.
  EXPECT_GT(stats.mean_batch(), 8.0) << "several games' leaves in one network call";
  int64_t moves = 0;
  for (const auto& record : records) {
    moves += static_cast<int64_t>(record.game.moves().size());
    EXPECT_TRUE(record.game.over() || record.game.moves().size() >= 50u);
    EXPECT_EQ(record.winner, record.score > 0 ? kBlack : kWhite);
  }
  EXPECT_LE(stats.moves, moves);
  EXPECT_GE(stats.moves, moves - 2 * static_cast<int64_t>(records.size())) << "only the closing passes are not searched";
  EXPECT_GT(examples.count(), 0);
  EXPECT_LT(examples.count(), moves) << "fast moves are not recorded";
  ASSERT_EQ(examples.features.size(), static_cast<size_t>(examples.count()) * Position::kPlanes * 25);
  for (int64_t i = 0; i < examples.count(); ++i) {
    const float* pi = examples.policies.data() + i * 26;
    EXPECT_NEAR(std::accumulate(pi, pi + 26, 0.0), 1.0, 1e-5);
    EXPECT_TRUE(examples.outcomes[i] == 1.0f || examples.outcomes[i] == -1.0f);
  }
}

// A game's randomness comes from its index (PlayOptions::first_game), so a generation split over threads
// or over ranks (each playing a range of the indices) plays the same games and records the same examples,
// in game order, as one driver playing them all.
TEST(GoMcts, AGenerationsGamesDoNotDependOnHowTheyAreSplit) {
  const PlayOptions options = small_self_play(4, 16, 4, 0.3, 11);
  const auto play = [&](int first_game, int games, int threads, ExampleSet* examples) {
    PlayOptions split = options;
    split.first_game = first_game;
    split.worker_threads = threads;
    return self_play(split, games, material_evaluator(5), examples, nullptr);
  };
  ExampleSet whole;
  const auto one_driver = play(0, 7, 1, &whole);
  ASSERT_EQ(one_driver.size(), 7u);
  ExampleSet threaded, first_rank, second_rank;
  auto two_threads = play(0, 7, 2, &threaded);
  auto ranks = play(0, 3, 1, &first_rank);
  const auto rest = play(3, 4, 2, &second_rank);
  ranks.insert(ranks.end(), rest.begin(), rest.end());
  first_rank.append(second_rank);
  for (const std::vector<GameRecord>* split : {&two_threads, &ranks}) {
    ASSERT_EQ(split->size(), one_driver.size());
    for (size_t g = 0; g < one_driver.size(); ++g) {
      EXPECT_EQ((*split)[g].index, static_cast<int>(g));
      EXPECT_EQ((*split)[g].game.moves(), one_driver[g].game.moves()) << "game " << g;
      EXPECT_EQ((*split)[g].resigned, one_driver[g].resigned) << "game " << g;
    }
  }
  for (const ExampleSet* examples : {&threaded, &first_rank}) {
    EXPECT_EQ(examples->features, whole.features);
    EXPECT_EQ(examples->policies, whole.policies);
    EXPECT_EQ(examples->outcomes, whole.outcomes);
  }
  // Distinct indices play distinct games.
  EXPECT_NE(one_driver[0].game.moves(), one_driver[1].game.moves());
}

// Without fast moves every search starts from the subtree of the move played (in a match, each player's
// own tree); with them, each full move starts afresh (here every move is a full one, at a vanishing
// fast-move probability).
TEST(GoMcts, SelfPlayAndMatchesReuseTheTreeUnlessFullMovesAlternateWithFastOnes) {
  PlayOptions options;
  options.size = 5;
  options.komi = 0.5;
  options.concurrent_games = 4;
  options.mcts.readouts = 48;
  options.mcts.virtual_losses = 4;
  options.fast_readouts = 8;
  options.resign = false;
  options.seed = 5;
  for (const double fast_move_probability : {0.0, 1e-12}) {
    options.fast_move_probability = fast_move_probability;
    PlayStats stats;
    self_play(options, 4, material_evaluator(5), nullptr, &stats);
    if (fast_move_probability == 0)
      EXPECT_GT(stats.reused_visits, stats.moves * 5) << "searches start with the chosen child's visits";
    else
      EXPECT_EQ(stats.reused_visits, 0);
    EXPECT_EQ(stats.searched_visits, stats.moves * 48 + stats.reused_visits) << "each move adds its readouts";
  }
  PlayStats stats;
  play_match(options, 2, material_evaluator(5), &stats);
  EXPECT_GT(stats.reused_visits, stats.moves) << "each player keeps what its own search read of the reply";
}

// Resignation as minigo's selfplay.flags set it: a threshold drawn per game in [min, max]
// (--min_resign_threshold=-1.0 --max_resign_threshold=-0.9), no game exempt (--disable_resign_pct=0). Every
// evaluation says -0.96 for Black, so Black resigns at its first move in the games whose threshold is above
// its root value (about half of them) and in none when the range lies below it (the bootstrap's [-1, -0.99])
// or when resignation is disabled in every game. (The root's value is W / (1 + N), as minigo's Q: -0.96 x
// 100 / 101 is about -0.95.)
TEST(GoMcts, SelfPlayResignsBelowAThresholdDrawnPerGame) {
  const auto black_behind = [](int, const uint8_t*, int batch, float* policy, float* values) {
    std::fill(policy, policy + static_cast<size_t>(batch) * 26, 1.0f / 26);
    std::fill(values, values + batch, -0.96f);
  };
  PlayOptions options;
  options.size = 5;
  options.komi = 0.5;
  options.concurrent_games = 16;
  options.mcts.readouts = 100;
  options.mcts.virtual_losses = 4;
  options.soft_pick_moves = 0;
  options.seed = 11;
  const auto first_move_resignations = [&](double low, double high, double disabled) {
    options.resign_threshold_low = low;
    options.resign_threshold_high = high;
    options.disable_resign_fraction = disabled;
    int count = 0;
    for (const auto& record : self_play(options, 100, black_behind, nullptr, nullptr))
      count += record.resigned && record.game.moves().empty() && record.winner == kWhite;
    return count;
  };
  const int reference = first_move_resignations(-1.0, -0.9, 0.0);
  EXPECT_GT(reference, 30);
  EXPECT_LT(reference, 75);
  EXPECT_EQ(first_move_resignations(-1.0, -0.99, 0.0), 0);
  EXPECT_EQ(first_move_resignations(-1.0, -0.9, 1.0), 0);
}

TEST(GoMcts, MatchAlternatesColoursAndNeverResigns) {
  PlayOptions options;
  options.size = 5;
  options.komi = 0.5;
  options.concurrent_games = 4;
  options.mcts.readouts = 8;
  options.mcts.virtual_losses = 2;
  int calls_model1 = 0;
  const BatchEvaluator material = material_evaluator(5);
  const auto records = play_match(options, 4,
                                  [&](int model, const uint8_t* features, int batch, float* policy, float* values) {
                                    calls_model1 += model == 1;
                                    material(model, features, batch, policy, values);
                                  },
                                  nullptr);
  ASSERT_EQ(records.size(), 4u);
  int black_model0 = 0;
  for (const auto& record : records) {
    EXPECT_FALSE(record.resigned);
    EXPECT_NE(record.black_model, record.white_model);
    black_model0 += record.black_model == 0;
  }
  EXPECT_EQ(black_model0, 2);
  EXPECT_GT(calls_model1, 0);
}

}  // namespace
}  // namespace trainbench::go
