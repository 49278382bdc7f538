#pragma once
// Hand-made positions for the Go tests: rows of 'X' (Black), 'O' (White) and '.', top row first.
#include <string>
#include <vector>

#include "go/board.h"

namespace trainbench::go::testing {

inline int point(int row, int col, int size) { return row * size + col; }

inline Game setup(const std::vector<std::string>& rows, Color to_play, double komi) {
  const int size = static_cast<int>(rows.size());
  Game game(size, komi);
  for (int row = 0; row < size; ++row)
    for (int col = 0; col < size; ++col) {
      const char c = rows[row][col];
      if (c != '.') game.set_stone(point(row, col, size), c == 'X' ? kBlack : kWhite);
    }
  game.set_to_play(to_play);
  return game;
}

}  // namespace trainbench::go::testing
