// SGF: a written game reads back move for move; the reader keeps to the main line, unescapes "\]",
// places setup stones; and cgoban's professional game (seigen-minoru.sgf) replays legally to its end.
#include <filesystem>

#include <gtest/gtest.h>

#include "data/random.h"
#include "go/sgf.h"
#include "util/error.h"

namespace trainbench::go {
namespace {

constexpr const char* kSeigenMinoru = "/usr/share/doc/cgoban/examples/seigen-minoru.sgf";

Game random_game(int size, uint64_t seed, int max_moves) {
  Game game(size, 7.5);
  data::Rng rng(seed);
  std::vector<Move> legal;
  for (int i = 0; i < max_moves && !game.over(); ++i) {
    legal.clear();
    for (int p = 0; p <= size * size; ++p)
      if (game.is_legal(static_cast<Move>(p))) legal.push_back(static_cast<Move>(p));
    game.play(legal[rng.below(legal.size())]);
  }
  return game;
}

TEST(GoSgf, WrittenGameReadsBackMoveForMove) {
  for (const int size : {9, 19}) {
    const Game game = random_game(size, 3 + size, 150);
    SgfGame record = sgf_of_game(game, result_text(game.position().score()), "net [gen 3]", "target\\model");
    record.nodes[2].comment = "a comment with ] and \\ in it";
    const std::string text = write_sgf(record);
    const SgfGame parsed = parse_sgf(text, "round trip");
    EXPECT_EQ(parsed.size, size);
    EXPECT_DOUBLE_EQ(parsed.komi, 7.5);
    EXPECT_EQ(parsed.black, "net [gen 3]");
    EXPECT_EQ(parsed.white, "target\\model");
    EXPECT_EQ(parsed.result, record.result);
    EXPECT_EQ(parsed.nodes[2].comment, "a comment with ] and \\ in it");
    ASSERT_EQ(parsed.nodes.size(), game.moves().size() + 1);
    const Game replayed = replay(parsed);
    EXPECT_EQ(replayed.moves(), game.moves());
    EXPECT_EQ(replayed.position().stone_hash(), game.position().stone_hash());
    EXPECT_EQ(write_sgf(parsed), text);
  }
}

TEST(GoSgf, ReaderFollowsTheMainLineAndPlacesSetupStones) {
  const SgfGame game = parse_sgf(
      "(;GM[1]FF[4]SZ[5]KM[0.5]AB[aa][ba]AW[ee]C[setup \\] done]\n"
      ";W[cc](;B[dd];W[]C[main])(;B[ab]C[variation](;W[bb])))",
      "inline");
  EXPECT_EQ(game.size, 5);
  EXPECT_DOUBLE_EQ(game.komi, 0.5);
  EXPECT_EQ(game.nodes[0].comment, "setup ] done");
  ASSERT_EQ(game.nodes.size(), 4u);
  EXPECT_EQ(game.nodes[2].move, 3 * 5 + 3);
  EXPECT_EQ(game.nodes[3].move, 25) << "W[] is a pass";
  const Game played = replay(game);
  EXPECT_EQ(played.position().at(0), kBlack);
  EXPECT_EQ(played.position().at(1), kBlack);
  EXPECT_EQ(played.position().at(24), kWhite);
  EXPECT_EQ(played.position().at(12), kWhite);
  EXPECT_EQ(played.position().at(5), kEmpty) << "the variation's B[ab] is not on the main line";
  const SgfGame rectangle = parse_sgf("(;SZ[4]AB[aa:bb])", "rectangle");
  EXPECT_EQ(rectangle.nodes[0].setup.size(), 4u);
}

TEST(GoSgf, MalformedInputNamesWhere) {
  EXPECT_THROW(parse_sgf("(;SZ[9];B[zz])", "bad point"), Error);
  EXPECT_THROW(parse_sgf("(;SZ[9];B[aa]", "unterminated"), Error);
  EXPECT_THROW(parse_sgf("(;SZ[9]C[open", "value"), Error);
  EXPECT_THROW(replay(parse_sgf("(;SZ[9];B[aa];W[aa])", "occupied")), Error);
}

// Kitani Minoru vs Go Seigen, 1957, as cgoban ships it: FF[3], a long commented record with variations and
// escaped brackets. Its main line has 164 moves (counted by an independent Python parse) and ends W+Resign.
TEST(GoSgf, ProfessionalGameFromCgobanReplaysToItsEnd) {
  if (!std::filesystem::exists(kSeigenMinoru)) GTEST_SKIP() << kSeigenMinoru << " is not installed (apt-get install cgoban)";
  const SgfGame record = read_sgf_file(kSeigenMinoru);
  EXPECT_EQ(record.size, 19);
  EXPECT_EQ(record.result, "W+Resign");
  EXPECT_EQ(record.black, "Kitani Minoru");
  const Game game = replay(record);
  ASSERT_EQ(game.moves().size(), 164u);
  EXPECT_EQ(gtp_move(game.moves().front(), 19), "R16");            // B[qd]
  EXPECT_EQ(gtp_move(game.moves().back(), 19), "H14");             // W[hf]
  EXPECT_GT(game.position().captures(kBlack) + game.position().captures(kWhite), 0);
}

}  // namespace
}  // namespace trainbench::go
