#pragma once
// Go rules for MiniGo: a board of any size up to 19x19, captures, suicide illegal, positional superko, pass,
// and area scoring with komi after pass-alive regions are resolved (as minigo's cc/position.cc scores).
// Written by hand rather than taken from a library because Debian ships no Go-rules library, and self-play
// needs incremental groups and liberties with no allocation per move: a Position is a fixed-size value that
// MCTS copies and plays forward thousands of times per move.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::go {

constexpr int kMaxSize = 19;
constexpr int kMaxPoints = kMaxSize * kMaxSize;
constexpr int kMaxMoves = kMaxPoints + 1;  // every point, then pass
constexpr int kHistory = 4;                // positions the features see: the current one and 3 before it

enum Color : int8_t { kEmpty = 0, kBlack = 1, kWhite = 2 };
inline Color opponent(Color color) { return static_cast<Color>(3 - color); }
// +1 for Black, -1 for White: values and Q are from Black's side, as in minigo.
inline int sign(Color color) { return color == kBlack ? 1 : -1; }

// A move is a point index row * size + column (row 0 at the top, as SGF counts) or `size * size` for pass.
using Move = int16_t;

// "D4" / "pass" in GTP coordinates (columns A..T without I, rows counted from the bottom), and back; an
// Error naming the text when it is not a move on this board size.
std::string gtp_move(Move move, int size);
Move parse_gtp_move(const std::string& text, int size);

// The set of stone configurations a game has seen, for positional superko: open addressing in a table
// sized once for the longest game, so inserting during play allocates nothing.
class PositionSet {
 public:
  explicit PositionSet(int capacity = 4 * kMaxMoves);
  void clear();
  void insert(uint64_t hash);
  bool contains(uint64_t hash) const;

 private:
  std::vector<uint64_t> slots_;  // 0 marks an empty slot; a real hash of 0 is stored as 1
  size_t used_ = 0;
};

class Position {
 public:
  explicit Position(int size = kMaxSize, double komi = 7.5);

  int size() const { return size_; }
  int points() const { return points_; }
  Move pass() const { return static_cast<Move>(points_); }
  double komi() const { return komi_; }
  Color to_play() const { return to_play_; }
  Color at(int point) const { return static_cast<Color>(color_[point]); }
  // Liberties of the group on `point`; 0 for an empty point.
  int liberties(int point) const;
  // Zobrist hash of the stones alone (not of the side to move): what positional superko compares.
  uint64_t stone_hash() const { return hash_; }
  int move_number() const { return move_number_; }
  int consecutive_passes() const { return passes_; }
  Move last_move() const { return last_move_; }
  int captures(Color color) const { return captures_[color == kBlack ? 0 : 1]; }

  // Legal without looking at earlier positions: pass, or an empty point whose stone keeps a liberty or
  // captures (suicide is illegal, as in minigo).
  bool is_legal_locally(Move move) const;
  // The stone hash after `move` (captures included); the move must be legal locally.
  uint64_t hash_after(Move move) const;
  // Fully legal: locally legal and, for a stone, not recreating a configuration in `seen` (positional
  // superko). `seen` holds the configurations before this one.
  bool is_legal(Move move, const PositionSet& seen) const;
  bool would_capture(int point) const;  // an opponent group next to `point` is in atari

  // Plays a locally legal move for the side to move (superko is the caller's check).
  void play(Move move);
  // Puts a stone for setup (SGF AB/AW, AE with kEmpty) without changing the side to move; captures nothing.
  void set_stone(int point, Color color);
  void set_to_play(Color color) { to_play_ = color; }

  // Area score (stones plus empty regions that reach one colour only) after pass-alive regions are
  // resolved, minus komi: positive when Black wins.
  double score() const;
  // The owner of every point as the score counts it (kEmpty for dame).
  std::array<Color, kMaxPoints> ownership() const;
  // For every point in a pass-alive region (Benson's algorithm as minigo's CalculatePassAliveRegions runs
  // it: enclosed by pass-alive chains, at most one empty point touching none of them; opponent stones in it
  // are dead), the enclosing colour; kEmpty elsewhere, the pass-alive chains' own stones included.
  std::array<Color, kMaxPoints> pass_alive_regions() const;
  // Every empty point lies in a pass-alive region: nothing either side plays can change the score (minigo
  // then ends a self-play game with passes).
  bool whole_board_pass_alive() const;

  // The 13 mlperf07 input planes, plane-major (13 x size x size), 0/1 bytes, as minigo's features.py:
  // own/opponent stones of the current and 3 previous positions, colour to play (1 when Black), groups
  // with 1, 2, 3 liberties, and points where the side to move would capture.
  static constexpr int kPlanes = 13;
  void features(uint8_t* out) const;

  std::string to_string() const;  // rows of "X", "O", "." for messages

 private:
  struct Group {
    int16_t liberties = 0;
    int16_t size = 0;
    uint64_t hash = 0;  // Zobrist hash of its stones
  };
  void place(int point, Color color);  // adds a stone and merges groups; liberties recounted
  void remove_group(int group);
  int count_liberties(int group) const;
  void remember_board();

  int size_, points_;
  double komi_;
  Color to_play_ = kBlack;
  int move_number_ = 0;
  int passes_ = 0;
  Move last_move_ = -1;
  std::array<int, 2> captures_{};
  uint64_t hash_ = 0;
  std::array<int8_t, kMaxPoints> color_{};
  std::array<int16_t, kMaxPoints> group_{};       // representative point of the group on each stone
  std::array<int16_t, kMaxPoints> next_stone_{};  // circular list of each group's stones
  std::array<Group, kMaxPoints> groups_{};        // indexed by representative point
  // Earlier boards for the features: history_[(head_ + k) % kHistory] is the board k moves ago.
  std::array<std::array<int8_t, kMaxPoints>, kHistory - 1> history_{};
  int history_head_ = 0;
};

// A game: the position, the moves played and the configurations seen (for superko).
class Game {
 public:
  explicit Game(int size = kMaxSize, double komi = 7.5);
  const Position& position() const { return position_; }
  const PositionSet& seen() const { return seen_; }
  const std::vector<Move>& moves() const { return moves_; }
  bool is_legal(Move move) const { return position_.is_legal(move, seen_); }
  // Plays a legal move; an Error naming the move when it is not.
  void play(Move move);
  void set_stone(int point, Color color);
  void set_to_play(Color color) { position_.set_to_play(color); }
  bool over() const { return position_.consecutive_passes() >= 2; }
  void reset();

 private:
  Position position_;
  PositionSet seen_;
  std::vector<Move> moves_;
};

// The 8 symmetries of the square (dihedral group), as minigo's symmetries.py applies them to training
// examples: index 0 is the identity. point_map(s, size)[p] is where point p goes under symmetry s.
constexpr int kSymmetries = 8;
int symmetry_point(int symmetry, int point, int size);
int inverse_symmetry(int symmetry);
// Applies a symmetry to plane-major data (planes x size x size), and to a policy of size*size + 1 (pass
// stays last).
template <typename T>
void apply_symmetry(int symmetry, const T* in, T* out, int planes, int size) {
  const int points = size * size;
  for (int plane = 0; plane < planes; ++plane)
    for (int point = 0; point < points; ++point)
      out[plane * points + symmetry_point(symmetry, point, size)] = in[plane * points + point];
}
template <typename T>
void apply_symmetry_to_policy(int symmetry, const T* in, T* out, int size) {
  apply_symmetry(symmetry, in, out, 1, size);
  out[size * size] = in[size * size];
}

}  // namespace trainbench::go
