#pragma once
// SGF (FF[4]) games: the writer self-play uses for its game records, and a reader that replays the main line
// (the first variation at every branch; the others are skipped), with setup stones (AB/AW/AE), escaped
// "\]" and "\\" in values, SZ, KM, RE, PB/PW. No Debian package parses SGF as a library, and the subset is
// small, so it is written here.
#include <string>
#include <vector>

#include "go/board.h"

namespace trainbench::go {

struct SgfNode {
  struct Setup {
    int point;
    Color color;  // kEmpty for AE
  };
  std::vector<Setup> setup;
  Color mover = kEmpty;  // kEmpty: the node has no move
  Move move = 0;
  std::string comment;
};

struct SgfGame {
  int size = 19;
  double komi = 7.5;
  std::string result;  // RE, e.g. "B+R", "W+3.5"
  std::string black, white;
  std::vector<SgfNode> nodes;  // the main line, root first
};

// Parses the first game tree of `text`; an Error naming `where` and the offset of what is malformed.
SgfGame parse_sgf(const std::string& text, const std::string& where);
SgfGame read_sgf_file(const std::string& path);

// Writes a game (root properties, then one node per move) as FF[4]; values are escaped.
std::string write_sgf(const SgfGame& game);
// The SGF record of a played game: moves alternate from Black; `result` as RE wants it.
SgfGame sgf_of_game(const Game& game, const std::string& result, const std::string& black, const std::string& white);

// Replays the main line: setup stones are placed, and each move is played by the colour the node names
// (the side to move is set first, so handicap and "two moves in a row" records replay). An Error names the
// node of an illegal move.
Game replay(const SgfGame& game);

// "W+3.5", "B+R", "0" (a draw only with an integer komi) from a final score (Black minus White).
std::string result_text(double score);

}  // namespace trainbench::go
