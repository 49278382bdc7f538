// Go rules on hand-made positions: captures and liberties, suicide, ko and positional superko, area
// scoring with dame, seki and pass-alive regions, the mlperf07 features and the 8 symmetries.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "go/board.h"
#include "go/test_positions.h"
#include "util/error.h"

namespace trainbench::go {
namespace {

using testing::point;
using testing::setup;

TEST(GoBoard, CapturesAStoneAndCountsLiberties) {
  Game game = setup({".X...",  //
                     "XO...",  //
                     ".X...",  //
                     ".....",  //
                     "....."},
                    kBlack, 0);
  EXPECT_EQ(game.position().liberties(point(1, 1, 5)), 1);
  EXPECT_EQ(game.position().liberties(point(0, 1, 5)), 2);
  EXPECT_TRUE(game.position().would_capture(point(1, 2, 5)));
  game.play(point(1, 2, 5));
  EXPECT_EQ(game.position().at(point(1, 1, 5)), kEmpty);
  EXPECT_EQ(game.position().captures(kBlack), 1);
  // The capture gave the stones around it a liberty back.
  EXPECT_EQ(game.position().liberties(point(0, 1, 5)), 3);
  EXPECT_EQ(game.position().liberties(point(1, 2, 5)), 4);
  EXPECT_EQ(game.position().to_play(), kWhite);
}

TEST(GoBoard, MergedGroupsShareTheirLiberties) {
  Game game = setup({".....",  //
                     ".X.X.",  //
                     ".....",  //
                     ".....",  //
                     "....."},
                    kBlack, 0);
  game.play(point(1, 2, 5));
  EXPECT_EQ(game.position().liberties(point(1, 1, 5)), 8);
  EXPECT_EQ(game.position().liberties(point(1, 3, 5)), 8);
  game.play(point(0, 2, 5));  // white takes one of them
  EXPECT_EQ(game.position().liberties(point(1, 2, 5)), 7);
  EXPECT_EQ(game.position().liberties(point(0, 2, 5)), 2);
}

TEST(GoBoard, SuicideIsIllegalUnlessItCaptures) {
  Game game = setup({".X...",  //
                     "X....",  //
                     ".....",  //
                     ".....",  //
                     "....."},
                    kWhite, 0);
  EXPECT_FALSE(game.is_legal(point(0, 0, 5)));
  EXPECT_THROW(game.play(point(0, 0, 5)), Error);
  // Multi-stone suicide: filling the last liberty of one's own group.
  Game group = setup({"OX...",  //
                      ".X...",  //
                      "XX...",  //
                      ".....",  //
                      "....."},
                     kWhite, 0);
  EXPECT_FALSE(group.is_legal(point(1, 0, 5)));
  // The same shape is legal when the stone captures.
  Game ko_capture = setup({".XO..",  //
                           "XO...",  //
                           ".....",  //
                           ".....",  //
                           "....."},
                          kWhite, 0);
  EXPECT_TRUE(ko_capture.is_legal(point(0, 0, 5)));
  ko_capture.play(point(0, 0, 5));
  EXPECT_EQ(ko_capture.position().at(point(0, 1, 5)), kEmpty);
}

// A ko: Black takes, White may not retake at once; after an exchange elsewhere the board differs and the
// retake is legal. Positional superko also forbids the retake after two passes, which a simple-ko rule allows.
TEST(GoBoard, KoAndPositionalSuperko) {
  Game real = setup({".XO..",  //
                     "XO.O.",  //
                     ".XO..",  //
                     ".....",  //
                     "....."},
                    kBlack, 0);
  real.play(point(1, 2, 5));  // Black captures b4
  EXPECT_EQ(real.position().at(point(1, 1, 5)), kEmpty);
  EXPECT_TRUE(real.position().is_legal_locally(point(1, 1, 5)));
  EXPECT_FALSE(real.is_legal(point(1, 1, 5))) << "the immediate retake repeats the position";
  Game passes = real;
  passes.play(passes.position().pass());
  passes.play(passes.position().pass());
  EXPECT_FALSE(passes.is_legal(point(1, 1, 5))) << "positional superko: passes do not make the retake legal";
  Game threat = real;
  threat.play(point(4, 4, 5));  // White elsewhere
  threat.play(point(4, 0, 5));  // Black answers elsewhere
  EXPECT_TRUE(threat.is_legal(point(1, 1, 5)));
  threat.play(point(1, 1, 5));
  EXPECT_EQ(threat.position().at(point(1, 2, 5)), kEmpty);
}

TEST(GoBoard, AreaScoreWithKomiAndDame) {
  Position empty(9, 7.5);
  EXPECT_DOUBLE_EQ(empty.score(), -7.5);
  // The middle column touches both colours: dame, nobody's point.
  Game dame = setup({"X.O",  //
                     "X.O",  //
                     "X.O"},
                    kBlack, 0.5);
  EXPECT_DOUBLE_EQ(dame.position().score(), -0.5);
  // Territory: empty regions reaching one colour only; the right side touches both and is dame.
  Game territory = setup({"..X..",  //
                          "..X..",  //
                          "XXX..",  //
                          "OOOOO",  //
                          "....."},
                         kBlack, 0);
  EXPECT_DOUBLE_EQ(territory.position().score(), 9.0 - 10.0);
}

// Seki: the inner white and black pairs share the four empty points in the middle and neither can fill
// them; those points are dame, both pairs count as stones, the eyes count for their owners.
TEST(GoBoard, SekiLibertiesAreDame) {
  Game seki = setup({"XXXOOOO",  //
                     "XO..XO.",  //
                     "XO..XO.",  //
                     "XXXOOOO",  //
                     "..XO...",  //
                     "..XO...",  //
                     "..XO..."},
                    kBlack, 0);
  EXPECT_EQ(seki.position().liberties(point(1, 1, 7)), 2);
  EXPECT_EQ(seki.position().liberties(point(1, 4, 7)), 2);
  const auto owner = seki.position().ownership();
  EXPECT_EQ(owner[point(1, 2, 7)], kEmpty);
  EXPECT_EQ(owner[point(2, 3, 7)], kEmpty);
  EXPECT_EQ(owner[point(1, 1, 7)], kWhite);
  EXPECT_EQ(owner[point(1, 4, 7)], kBlack);
  EXPECT_EQ(owner[point(5, 0, 7)], kBlack);
  EXPECT_EQ(owner[point(1, 6, 7)], kWhite);
  EXPECT_DOUBLE_EQ(seki.position().score(), 19.0 - 26.0);
}

// A black wall with two eyes is pass-alive: the white stone inside its eye is dead and the eye is Black's,
// where plain Tromp-Taylor would call the eye points dame and the stone White's.
TEST(GoBoard, PassAliveRegionsAreResolvedBeforeAreaCounting) {
  Game game = setup({".O.X.",  //
                     "XXXXX",  //
                     ".....",  //
                     ".....",  //
                     "....."},
                    kBlack, 7.5);
  const auto owner = game.position().ownership();
  EXPECT_EQ(owner[point(0, 1, 5)], kBlack);
  EXPECT_EQ(owner[point(0, 0, 5)], kBlack);
  EXPECT_DOUBLE_EQ(game.position().score(), 25 - 7.5);
  // With a single eye the wall is not pass-alive: the stone stays White's and its neighbours are dame.
  Game one_eye = setup({".O...",  //
                        "XXXXX",  //
                        ".....",  //
                        ".....",  //
                        "....."},
                       kBlack, 0);
  const auto unresolved = one_eye.position().ownership();
  EXPECT_EQ(unresolved[point(0, 1, 5)], kWhite);
  EXPECT_EQ(unresolved[point(0, 0, 5)], kEmpty);
}

// Self-play ends a game with passes once every empty point lies in a pass-alive region (nothing either side
// plays can change the score); one open region is enough to go on.
TEST(GoBoard, WholeBoardPassAliveWhenEveryEmptyPointIsSettled) {
  const Game settled = setup({".X.X.",  //
                              "XXXXX",  //
                              "OOOOO",  //
                              "O.O.O",  //
                              "OOOOO"},
                             kBlack, 0.5);
  const auto regions = settled.position().pass_alive_regions();
  EXPECT_EQ(regions[point(0, 2, 5)], kBlack);
  EXPECT_EQ(regions[point(3, 1, 5)], kWhite);
  EXPECT_EQ(regions[point(1, 1, 5)], kEmpty) << "a pass-alive chain's own stones are not a region";
  EXPECT_TRUE(settled.position().whole_board_pass_alive());
  const Game open = setup({".O.X.",  //
                           "XXXXX",  //
                           ".....",  //
                           ".....",  //
                           "....."},
                          kBlack, 0.5);
  EXPECT_EQ(open.position().pass_alive_regions()[point(0, 1, 5)], kBlack) << "the white stone in Black's eye is dead";
  EXPECT_EQ(open.position().pass_alive_regions()[point(3, 3, 5)], kEmpty);
  EXPECT_FALSE(open.position().whole_board_pass_alive());
  EXPECT_FALSE(Game(5, 0.5).position().whole_board_pass_alive());
}

// The boards of one TEST_F of minigo's cc/pass_alive_test.cc, as (board, expected) pairs of rows: its raw
// strings, spaces removed, in order.
std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> reference_cases(const std::string& text,
                                                                                          const std::string& test) {
  const size_t begin = text.find("TEST_F(PassAliveTest, " + test + ")");
  const size_t end = text.find("TEST_F(", begin + 1);
  std::vector<std::vector<std::string>> boards;
  for (size_t at = text.find("R\"(", begin); at < end; at = text.find("R\"(", at)) {
    const size_t close = text.find(")\"", at);
    std::istringstream lines(text.substr(at + 3, close - at - 3));
    std::vector<std::string> rows;
    for (std::string line; std::getline(lines, line);) {
      std::string row;
      for (const char c : line)
        if (c != ' ') row += c;
      if (!row.empty()) rows.push_back(row);
    }
    boards.push_back(rows);
    at = close;
  }
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases;
  for (size_t i = 0; i + 1 < boards.size(); i += 2) cases.emplace_back(boards[i], boards[i + 1]);
  return cases;
}

// Audit G8: minigo's own cases (cc/pass_alive_test.cc, read from ../shared/reference, skipped where that code
// is absent): each board's stones with its pass-alive regions laid over them must be the expected board,
// including the one-point regions that touch no enclosing chain.
TEST(GoBoard, PassAliveRegionsAgreeWithMinigosOwnTests) {
  const std::string path = std::string(TRAINBENCH_REFERENCE_CODE_DIR) +
                           "/mlcommons-training/reinforcement/tensorflow/minigo/cc/pass_alive_test.cc";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << "no minigo reference code at " << path;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int checked = 0;
  for (const std::string test : {"9x9", "19x19"}) {
    const auto cases = reference_cases(text, test);
    EXPECT_GE(cases.size(), 3u) << test;
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto& [board, given] = cases[i];
      const int size = static_cast<int>(board.size());
      // One expected board of the 9x9 test has eight rows; its ninth, past the string's end, is empty.
      std::vector<std::string> expected = given;
      expected.resize(board.size(), std::string(board.size(), '.'));
      const Game game = setup(board, kBlack, 0);
      const auto regions = game.position().pass_alive_regions();
      std::vector<std::string> actual(board.size(), std::string(board.size(), '.'));
      for (int p = 0; p < size * size; ++p) {
        const Color owner = regions[p] != kEmpty ? regions[p] : game.position().at(p);
        actual[p / size][p % size] = owner == kBlack ? 'X' : owner == kWhite ? 'O' : '.';
      }
      EXPECT_EQ(actual, expected) << test << " case " << i;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

TEST(GoFeatures, Mlperf07PlanesFollowTheSideToMove) {
  Game game(5, 7.5);
  game.play(point(2, 2, 5));  // Black
  game.play(point(2, 3, 5));  // White
  game.play(point(1, 3, 5));  // Black: White's stone has 2 liberties... (2,4) and (3,3)
  std::vector<uint8_t> planes(Position::kPlanes * 25);
  game.position().features(planes.data());
  const auto at = [&](int plane, int row, int col) { return planes[plane * 25 + point(row, col, 5)]; };
  // White to play: plane 0 own (White) stones now, plane 1 Black's.
  EXPECT_EQ(at(0, 2, 3), 1);
  EXPECT_EQ(at(1, 2, 2), 1);
  EXPECT_EQ(at(1, 1, 3), 1);
  // One move ago Black's c2 stone was not there yet.
  EXPECT_EQ(at(3, 1, 3), 0);
  EXPECT_EQ(at(3, 2, 2), 1);
  // Three moves ago the board was empty.
  for (int p = 0; p < 25; ++p) EXPECT_EQ(at(6, p / 5, p % 5) + at(7, p / 5, p % 5), 0);
  EXPECT_EQ(at(8, 0, 0), 0) << "White to play";
  EXPECT_EQ(at(10, 2, 3), 1) << "White's stone has two liberties";
  EXPECT_EQ(at(9, 2, 3), 0);
  EXPECT_EQ(at(11, 2, 2), 1) << "Black's stone has three liberties";
  int capture_points = 0;
  for (int p = 0; p < 25; ++p) capture_points += at(12, p / 5, p % 5);
  EXPECT_EQ(capture_points, 0);
  game.play(point(4, 4, 5));  // White
  game.play(point(3, 3, 5));  // Black: White's d3 stone is in atari now
  game.position().features(planes.data());
  EXPECT_EQ(at(8, 0, 0), 0);
  game.play(game.position().pass());
  game.position().features(planes.data());
  EXPECT_EQ(at(8, 0, 0), 1) << "Black to play";
  EXPECT_EQ(at(12, 2, 4), 1) << "Black captures at e3";
  EXPECT_EQ(at(9, 2, 3), 1);
}

TEST(GoSymmetry, TheEightSymmetriesAreDistinctAndInvertible) {
  std::set<std::vector<int>> images;
  for (int s = 0; s < kSymmetries; ++s) {
    std::vector<int> image;
    for (int p = 0; p < 9 * 9; ++p) {
      const int q = symmetry_point(s, p, 9);
      image.push_back(q);
      EXPECT_EQ(symmetry_point(inverse_symmetry(s), q, 9), p);
    }
    images.insert(image);
  }
  EXPECT_EQ(images.size(), 8u);
}

// Features of a transformed position equal the transformed features (what training's augmentation relies on).
TEST(GoSymmetry, FeaturesCommuteWithSymmetries) {
  const std::vector<Move> moves = {0, 1, 7, 12, 13, 5, 6, 20, 24};
  for (int s = 0; s < kSymmetries; ++s) {
    Game plain(5, 7.5), turned(5, 7.5);
    for (const Move move : moves) {
      plain.play(move);
      turned.play(static_cast<Move>(symmetry_point(s, move, 5)));
    }
    std::vector<uint8_t> a(Position::kPlanes * 25), b(a.size()), mapped(a.size());
    plain.position().features(a.data());
    turned.position().features(b.data());
    apply_symmetry(s, a.data(), mapped.data(), Position::kPlanes, 5);
    EXPECT_EQ(mapped, b) << "symmetry " << s;
    std::vector<float> policy(26), out(26);
    for (int i = 0; i < 26; ++i) policy[i] = static_cast<float>(i);
    apply_symmetry_to_policy(s, policy.data(), out.data(), 5);
    EXPECT_EQ(out[25], 25.0f);
    EXPECT_EQ(out[symmetry_point(s, 7, 5)], 7.0f);
  }
}

TEST(GoBoard, GtpCoordinates) {
  EXPECT_EQ(gtp_move(0, 19), "A19");
  EXPECT_EQ(gtp_move(static_cast<Move>(18 * 19 + 8), 19), "J1");
  EXPECT_EQ(parse_gtp_move("j1", 19), 18 * 19 + 8);
  EXPECT_EQ(parse_gtp_move("PASS", 9), 81);
  EXPECT_THROW(parse_gtp_move("I5", 9), Error);
  EXPECT_THROW(parse_gtp_move("K5", 9), Error);
  EXPECT_THROW(parse_gtp_move("A10", 9), Error);
}

}  // namespace
}  // namespace trainbench::go
