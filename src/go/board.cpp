#include "go/board.h"

#include <algorithm>
#include <cstring>

#include "data/random.h"
#include "util/error.h"

namespace trainbench::go {

namespace {

// Neighbours of every point for every board size, computed once: -1 past the edge.
struct Geometry {
  std::array<std::array<std::array<int16_t, 4>, kMaxPoints>, kMaxSize + 1> neighbors{};
  Geometry() {
    for (int size = 1; size <= kMaxSize; ++size)
      for (int row = 0; row < size; ++row)
        for (int col = 0; col < size; ++col) {
          auto& list = neighbors[size][row * size + col];
          list = {static_cast<int16_t>(row > 0 ? (row - 1) * size + col : -1),
                  static_cast<int16_t>(row + 1 < size ? (row + 1) * size + col : -1),
                  static_cast<int16_t>(col > 0 ? row * size + col - 1 : -1),
                  static_cast<int16_t>(col + 1 < size ? row * size + col + 1 : -1)};
        }
  }
};
const Geometry& geometry() {
  static const Geometry instance;
  return instance;
}

struct Zobrist {
  std::array<std::array<uint64_t, 2>, kMaxPoints> keys{};
  Zobrist() {
    uint64_t state = 0x4d696e69476f2021ULL;
    for (auto& point : keys)
      for (auto& key : point) key = data::splitmix64(state);
  }
};
uint64_t zobrist(int point, Color color) {
  static const Zobrist table;
  return table.keys[point][color - 1];
}

constexpr const char* kColumns = "ABCDEFGHJKLMNOPQRST";

}  // namespace

std::string gtp_move(Move move, int size) {
  if (move == size * size) return "pass";
  return std::string(1, kColumns[move % size]) + std::to_string(size - move / size);
}

Move parse_gtp_move(const std::string& text, int size) {
  std::string upper;
  for (const char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "PASS") return static_cast<Move>(size * size);
  const char* column = upper.empty() ? nullptr : std::strchr(kColumns, upper[0]);
  int row = 0;
  bool digits = upper.size() >= 2 && upper.size() <= 3;
  for (size_t i = 1; i < upper.size() && digits; ++i) {
    digits = std::isdigit(static_cast<unsigned char>(upper[i])) != 0;
    row = row * 10 + (upper[i] - '0');
  }
  if (!column || *column == '\0' || !digits || column - kColumns >= size || row < 1 || row > size)
    fail("move '" + text + "'", "expected a point like D4 on a " + std::to_string(size) + "x" + std::to_string(size) +
                                    " board, or pass");
  return static_cast<Move>((size - row) * size + static_cast<int>(column - kColumns));
}

// ---- PositionSet ----

PositionSet::PositionSet(int capacity) {
  size_t slots = 16;
  while (slots < static_cast<size_t>(capacity) * 2) slots *= 2;
  slots_.assign(slots, 0);
}

void PositionSet::clear() {
  std::fill(slots_.begin(), slots_.end(), 0);
  used_ = 0;
}

void PositionSet::insert(uint64_t hash) {
  if (hash == 0) hash = 1;
  if ((used_ + 1) * 2 > slots_.size()) {  // only past the longest game sized for: grow
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, 0);
    used_ = 0;
    for (const uint64_t value : old)
      if (value) insert(value);
  }
  const size_t mask = slots_.size() - 1;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    if (slots_[slot] == hash) return;
    if (slots_[slot] == 0) {
      slots_[slot] = hash;
      ++used_;
      return;
    }
  }
}

bool PositionSet::contains(uint64_t hash) const {
  if (hash == 0) hash = 1;
  const size_t mask = slots_.size() - 1;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    if (slots_[slot] == hash) return true;
    if (slots_[slot] == 0) return false;
  }
}

// ---- Position ----

Position::Position(int size, double komi) : size_(size), points_(size * size), komi_(komi) {
  if (size < 2 || size > kMaxSize) fail("board size " + std::to_string(size), "expected 2 to 19");
  geometry();  // builds the shared tables before any thread plays
  zobrist(0, kBlack);
}

int Position::liberties(int point) const {
  return color_[point] == kEmpty ? 0 : groups_[group_[point]].liberties;
}

bool Position::is_legal_locally(Move move) const {
  if (move == points_) return true;
  if (move < 0 || move > points_ || color_[move] != kEmpty) return false;
  for (const int16_t next : geometry().neighbors[size_][move]) {
    if (next < 0) continue;
    if (color_[next] == kEmpty) return true;
    const int libs = groups_[group_[next]].liberties;
    if (color_[next] == to_play_ ? libs > 1 : libs == 1) return true;
  }
  return false;
}

bool Position::would_capture(int point) const {
  if (color_[point] != kEmpty) return false;
  for (const int16_t next : geometry().neighbors[size_][point])
    if (next >= 0 && color_[next] == opponent(to_play_) && groups_[group_[next]].liberties == 1) return true;
  return false;
}

uint64_t Position::hash_after(Move move) const {
  if (move == points_) return hash_;
  uint64_t hash = hash_ ^ zobrist(move, to_play_);
  std::array<int16_t, 4> captured{-1, -1, -1, -1};
  int count = 0;
  for (const int16_t next : geometry().neighbors[size_][move]) {
    if (next < 0 || color_[next] != opponent(to_play_)) continue;
    const int group = group_[next];
    if (groups_[group].liberties != 1 || std::find(captured.begin(), captured.end(), group) != captured.end()) continue;
    captured[count++] = static_cast<int16_t>(group);
    hash ^= groups_[group].hash;
  }
  return hash;
}

bool Position::is_legal(Move move, const PositionSet& seen) const {
  if (!is_legal_locally(move)) return false;
  return move == points_ || !seen.contains(hash_after(move));
}

void Position::remember_board() {
  history_head_ = (history_head_ + kHistory - 2) % (kHistory - 1);
  history_[history_head_] = color_;
}

void Position::play(Move move) {
  remember_board();
  last_move_ = move;
  ++move_number_;
  if (move == points_) {
    ++passes_;
    to_play_ = opponent(to_play_);
    return;
  }
  passes_ = 0;
  const Color color = to_play_;
  place(move, color);
  for (const int16_t next : geometry().neighbors[size_][move])
    if (next >= 0 && color_[next] == opponent(color) && groups_[group_[next]].liberties == 0) {
      captures_[color == kBlack ? 0 : 1] += groups_[group_[next]].size;
      remove_group(group_[next]);
    }
  to_play_ = opponent(color);
}

void Position::set_stone(int point, Color color) {
  if (color_[point] != kEmpty) {
    // Take the whole group off and put its other stones back one by one, so groups and liberties stay exact.
    std::array<int16_t, kMaxPoints> stones;
    int count = 0;
    const Color old = at(point);
    int stone = point;
    do {
      stones[count++] = static_cast<int16_t>(stone);
      stone = next_stone_[stone];
    } while (stone != point);
    remove_group(group_[point]);
    for (int i = 0; i < count; ++i)
      if (stones[i] != point) place(stones[i], old);
  }
  if (color != kEmpty) place(point, color);
}

// Adds a stone: opponent groups next to it lose a liberty; it joins its own neighbours, whose merged
// liberties are recounted by walking the merged group.
void Position::place(int point, Color color) {
  const auto& neighbors = geometry().neighbors[size_][point];
  color_[point] = color;
  hash_ ^= zobrist(point, color);
  group_[point] = static_cast<int16_t>(point);
  next_stone_[point] = static_cast<int16_t>(point);
  groups_[point] = {0, 1, zobrist(point, color)};
  int merged = point;
  std::array<int16_t, 4> touched{-1, -1, -1, -1};
  int touched_count = 0;
  for (const int16_t next : neighbors) {
    if (next < 0 || color_[next] == kEmpty) continue;
    const int group = group_[next];
    if (std::find(touched.begin(), touched.end(), group) != touched.end()) continue;
    touched[touched_count++] = static_cast<int16_t>(group);
    if (color_[next] != color) {
      --groups_[group].liberties;
      continue;
    }
    // Relabel the smaller group's stones and splice the two circular lists.
    int big = merged, small = group;
    if (groups_[big].size < groups_[small].size) std::swap(big, small);
    int stone = small;
    do {
      group_[stone] = static_cast<int16_t>(big);
      stone = next_stone_[stone];
    } while (stone != small);
    std::swap(next_stone_[big], next_stone_[small]);
    groups_[big].size = static_cast<int16_t>(groups_[big].size + groups_[small].size);
    groups_[big].hash ^= groups_[small].hash;
    merged = big;
    for (auto& entry : touched)
      if (entry == small) entry = static_cast<int16_t>(big);
  }
  groups_[merged].liberties = static_cast<int16_t>(count_liberties(merged));
}

int Position::count_liberties(int group) const {
  std::array<bool, kMaxPoints> counted{};
  int liberties = 0;
  int stone = group;
  do {
    for (const int16_t next : geometry().neighbors[size_][stone])
      if (next >= 0 && color_[next] == kEmpty && !counted[next]) {
        counted[next] = true;
        ++liberties;
      }
    stone = next_stone_[stone];
  } while (stone != group);
  return liberties;
}

// Every removed stone is one new liberty of each distinct group next to it.
void Position::remove_group(int group) {
  const int first = group;
  int stone = first;
  const Color color = static_cast<Color>(color_[first]);
  do {
    color_[stone] = kEmpty;
    hash_ ^= zobrist(stone, color);
    stone = next_stone_[stone];
  } while (stone != first);
  stone = first;
  do {
    std::array<int16_t, 4> seen{-1, -1, -1, -1};
    int count = 0;
    for (const int16_t next : geometry().neighbors[size_][stone]) {
      if (next < 0 || color_[next] == kEmpty) continue;
      const int16_t other = group_[next];
      if (std::find(seen.begin(), seen.end(), other) != seen.end()) continue;
      seen[count++] = other;
      ++groups_[other].liberties;
    }
    stone = next_stone_[stone];
  } while (stone != first);
}

// Benson's algorithm for each colour: chains that keep two vital regions while chains and regions that fail
// are removed in turn are pass-alive; the small regions they enclose (every empty point a liberty of an
// enclosing chain) are pass-alive territory, opponent stones in them included.
// Benson's algorithm as minigo's CalculatePassAliveRegionsForColor (cc/position.cc) runs it, quirks included:
// a region is a maximal connected set of points not of `color`; it is vital to a chain when all its empty
// points are liberties of that chain. Chains with fewer than two vital regions left are removed, and with each
// the regions holding one of its liberties, until none is removed. A region is then pass-alive when every
// chain enclosing it survived and at most one of its empty points touches none of `color`'s stones (so a
// one-point eye that is not a liberty counts, where the textbook "small region" would not).
std::array<Color, kMaxPoints> Position::pass_alive_regions() const {
  const auto& neighbors = geometry().neighbors[size_];
  std::array<Color, kMaxPoints> board;
  for (int p = 0; p < points_; ++p) board[p] = static_cast<Color>(color_[p]);
  std::array<Color, kMaxPoints> filled{};

  for (const Color color : {kBlack, kWhite}) {
    // Regions: connected sets of points that are not `color`.
    std::array<int16_t, kMaxPoints> region_of;
    region_of.fill(-1);
    std::array<int16_t, kMaxPoints> stack;
    std::vector<std::vector<int16_t>> regions;
    for (int p = 0; p < points_; ++p) {
      if (board[p] == color || region_of[p] >= 0) continue;
      const auto id = static_cast<int16_t>(regions.size());
      regions.emplace_back();
      int top = 0;
      stack[top++] = static_cast<int16_t>(p);
      region_of[p] = id;
      while (top) {
        const int16_t q = stack[--top];
        regions.back().push_back(q);
        for (const int16_t n : neighbors[q])
          if (n >= 0 && board[n] != color && region_of[n] < 0) {
            region_of[n] = id;
            stack[top++] = n;
          }
      }
    }
    // Chains of `color` are the Position's groups.
    std::vector<int> chains;
    for (int p = 0; p < points_; ++p)
      if (board[p] == color && group_[p] == p) chains.push_back(p);
    const auto is_liberty_of = [&](int16_t q, int chain) {
      for (const int16_t n : neighbors[q])
        if (n >= 0 && board[n] == color && group_[n] == chain) return true;
      return false;
    };
    const auto vital_to = [&](size_t region, int chain) {
      for (const int16_t q : regions[region])
        if (board[q] == kEmpty && !is_liberty_of(q, chain)) return false;
      return true;
    };
    // The chains enclosing each region: those touching any of its points.
    std::vector<std::vector<int>> borders(regions.size());
    for (size_t r = 0; r < regions.size(); ++r)
      for (const int16_t q : regions[r])
        for (const int16_t n : neighbors[q])
          if (n >= 0 && board[n] == color) {
            const int chain = group_[n];
            if (std::find(borders[r].begin(), borders[r].end(), chain) == borders[r].end()) borders[r].push_back(chain);
          }
    // Per region, the enclosing chains it is vital to and those with a liberty in it: neither changes while
    // chains and regions are removed, so both are found once.
    std::vector<std::vector<int>> vital(regions.size()), with_liberty(regions.size());
    for (size_t r = 0; r < regions.size(); ++r)
      for (const int chain : borders[r]) {
        if (vital_to(r, chain)) vital[r].push_back(chain);
        for (const int16_t q : regions[r])
          if (board[q] == kEmpty && is_liberty_of(q, chain)) {
            with_liberty[r].push_back(chain);
            break;
          }
      }
    const auto holds = [](const std::vector<int>& list, int chain) { return std::find(list.begin(), list.end(), chain) != list.end(); };
    std::vector<bool> chain_alive(static_cast<size_t>(points_), false), region_alive(regions.size(), true);
    for (const int chain : chains) chain_alive[chain] = true;
    for (;;) {
      std::vector<int> removed;
      for (const int chain : chains) {
        if (!chain_alive[chain]) continue;
        int vital_regions = 0;
        for (size_t r = 0; r < regions.size() && vital_regions < 2; ++r) vital_regions += region_alive[r] && holds(vital[r], chain);
        if (vital_regions < 2) removed.push_back(chain);
      }
      if (removed.empty()) break;
      for (const int chain : removed) {
        chain_alive[chain] = false;
        for (size_t r = 0; r < regions.size(); ++r)
          if (holds(with_liberty[r], chain)) region_alive[r] = false;
      }
    }
    for (size_t r = 0; r < regions.size(); ++r) {
      if (borders[r].empty()) continue;  // the empty board's one region
      bool alive = true;
      for (const int chain : borders[r]) alive = alive && chain_alive[chain];
      int interior = 0;  // empty points touching none of `color`'s stones
      for (const int16_t q : regions[r]) {
        if (!alive || board[q] != kEmpty) continue;
        bool touches = false;
        for (const int16_t n : neighbors[q]) touches |= n >= 0 && board[n] == color;
        if (!touches && ++interior == 2) alive = false;
      }
      if (!alive) continue;
      for (const int16_t q : regions[r]) filled[q] = color;
    }
  }
  return filled;
}

bool Position::whole_board_pass_alive() const {
  const auto regions = pass_alive_regions();
  for (int p = 0; p < points_; ++p)
    if (color_[p] == kEmpty && regions[p] == kEmpty) return false;
  return true;
}

// Pass-alive regions resolved (their points the enclosing colour's), then Tromp-Taylor area.
std::array<Color, kMaxPoints> Position::ownership() const {
  const auto& neighbors = geometry().neighbors[size_];
  std::array<Color, kMaxPoints> filled = pass_alive_regions();
  for (int p = 0; p < points_; ++p)
    if (filled[p] == kEmpty) filled[p] = static_cast<Color>(color_[p]);

  // Tromp-Taylor on the filled board: empty regions reaching one colour only belong to it.
  std::array<Color, kMaxPoints> owner = filled;
  std::array<bool, kMaxPoints> visited{};
  std::array<int16_t, kMaxPoints> stack, region;
  for (int p = 0; p < points_; ++p) {
    if (filled[p] != kEmpty || visited[p]) continue;
    int top = 0, count = 0;
    bool reaches_black = false, reaches_white = false;
    stack[top++] = static_cast<int16_t>(p);
    visited[p] = true;
    while (top) {
      const int16_t q = stack[--top];
      region[count++] = q;
      for (const int16_t n : neighbors[q]) {
        if (n < 0) continue;
        if (filled[n] == kBlack) reaches_black = true;
        if (filled[n] == kWhite) reaches_white = true;
        if (filled[n] == kEmpty && !visited[n]) {
          visited[n] = true;
          stack[top++] = n;
        }
      }
    }
    const Color fill = reaches_black == reaches_white ? kEmpty : (reaches_black ? kBlack : kWhite);
    for (int i = 0; i < count; ++i) owner[region[i]] = fill;
  }
  for (int p = points_; p < kMaxPoints; ++p) owner[p] = kEmpty;
  return owner;
}

double Position::score() const {
  const auto owner = ownership();
  int black = 0, white = 0;
  for (int p = 0; p < points_; ++p) {
    black += owner[p] == kBlack;
    white += owner[p] == kWhite;
  }
  return black - white - komi_;
}

void Position::features(uint8_t* out) const {
  const int n = points_;
  std::memset(out, 0, static_cast<size_t>(kPlanes) * n);
  const Color own = to_play_;
  for (int t = 0; t < kHistory; ++t) {
    if (t > move_number_) break;  // no positions before the game started
    const int8_t* board = t == 0 ? color_.data() : history_[(history_head_ + t - 1) % (kHistory - 1)].data();
    uint8_t* own_plane = out + (2 * t) * n;
    uint8_t* other_plane = out + (2 * t + 1) * n;
    for (int p = 0; p < n; ++p) {
      own_plane[p] = board[p] == own;
      other_plane[p] = board[p] == opponent(own);
    }
  }
  if (own == kBlack) std::memset(out + 8 * n, 1, static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    const int libs = liberties(p);
    if (libs >= 1 && libs <= 3) out[(8 + libs) * n + p] = 1;
    out[12 * n + p] = would_capture(p);
  }
}

std::string Position::to_string() const {
  std::string text;
  for (int row = 0; row < size_; ++row) {
    for (int col = 0; col < size_; ++col) text += ".XO"[color_[row * size_ + col]];
    text += '\n';
  }
  return text;
}

// ---- Game ----

Game::Game(int size, double komi) : position_(size, komi) {
  moves_.reserve(static_cast<size_t>(2 * size * size + 2));
  reset();
}

void Game::reset() {
  position_ = Position(position_.size(), position_.komi());
  seen_.clear();
  moves_.clear();
  seen_.insert(position_.stone_hash());
}

void Game::play(Move move) {
  if (!is_legal(move))
    fail("move " + gtp_move(move, position_.size()) + " by " + (position_.to_play() == kBlack ? "Black" : "White"),
         "is illegal in this position:\n" + position_.to_string());
  position_.play(move);
  moves_.push_back(move);
  seen_.insert(position_.stone_hash());
}

void Game::set_stone(int point, Color color) {
  position_.set_stone(point, color);
  seen_.insert(position_.stone_hash());
}

// ---- Symmetries ----

// Symmetry s: transpose when bit 2 is set, then flip rows (bit 0) and columns (bit 1).
int symmetry_point(int symmetry, int point, int size) {
  int row = point / size, col = point % size;
  if (symmetry & 4) std::swap(row, col);
  if (symmetry & 1) row = size - 1 - row;
  if (symmetry & 2) col = size - 1 - col;
  return row * size + col;
}

int inverse_symmetry(int symmetry) {
  for (int candidate = 0; candidate < kSymmetries; ++candidate)
    if (symmetry_point(candidate, symmetry_point(symmetry, 1, 3), 3) == 1 &&
        symmetry_point(candidate, symmetry_point(symmetry, 2, 3), 3) == 2)
      return candidate;
  return 0;  // unreachable: the dihedral group is closed
}

}  // namespace trainbench::go
