// A 9x9 game against GNU Go (Debian's gnugo, over GTP) played to the end: our engine plays random legal
// moves (never filling its own one-point eyes, so the game ends), GNU Go answers with genmove. Every move
// must be legal for both engines, and the stones on both boards must be identical after every move.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "data/random.h"
#include "go/board.h"

namespace trainbench::go {
namespace {

constexpr const char* kGnuGo = "/usr/games/gnugo";

// A GTP engine on the other end of two pipes.
class GtpEngine {
 public:
  explicit GtpEngine(const std::vector<std::string>& argv) {
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::close(to_child[1]);
      ::close(from_child[0]);
      std::vector<char*> args;
      for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = ::fdopen(to_child[1], "w");
    out_ = ::fdopen(from_child[0], "r");
  }
  ~GtpEngine() {
    std::fputs("quit\n", in_);
    std::fflush(in_);
    std::fclose(in_);
    std::fclose(out_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }

  // The response to `command`: (success, text after "= " or "? ").
  std::pair<bool, std::string> send(const std::string& command) {
    std::fputs((command + "\n").c_str(), in_);
    std::fflush(in_);
    std::string response;
    char line[4096];
    while (std::fgets(line, sizeof line, out_)) {
      const std::string text(line);
      if (text == "\n" && !response.empty()) break;
      if (text != "\n") response += text;
    }
    if (response.empty()) return {false, "no response to '" + command + "'"};
    while (!response.empty() && (response.back() == '\n' || response.back() == ' ')) response.pop_back();
    const bool ok = response[0] == '=';
    return {ok, response.size() > 2 ? response.substr(2) : ""};
  }

 private:
  pid_t pid_;
  FILE* in_;
  FILE* out_;
};

// "C5 E5 ..." as GNU Go lists one colour's stones, as a sorted set of points.
std::vector<int> parse_stones(const std::string& text, int size) {
  std::vector<int> points;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) points.push_back(parse_gtp_move(text.substr(start, end - start), size));
    start = end + 1;
  }
  std::sort(points.begin(), points.end());
  return points;
}

std::vector<int> stones_of(const Position& position, Color color) {
  std::vector<int> points;
  for (int p = 0; p < position.points(); ++p)
    if (position.at(p) == color) points.push_back(p);
  return points;
}

// A point whose neighbours are all the mover's stones (an eye, or a point that would become one).
bool own_eye(const Position& position, int point) {
  const int size = position.size(), row = point / size, col = point % size;
  const int deltas[4][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1}};
  for (const auto& delta : deltas) {
    const int r = row + delta[0], c = col + delta[1];
    if (r < 0 || c < 0 || r >= size || c >= size) continue;
    if (position.at(r * size + c) != position.to_play()) return false;
  }
  return true;
}

TEST(GoGtp, GameAgainstGnuGoStaysIdenticalMoveByMove) {
  if (!std::filesystem::exists(kGnuGo)) GTEST_SKIP() << kGnuGo << " is not installed (apt-get install gnugo)";
  constexpr int kSize = 9;
  GtpEngine gnugo({kGnuGo, "--mode", "gtp", "--level", "1", "--chinese-rules", "--seed", "7"});
  ASSERT_TRUE(gnugo.send("boardsize 9").first);
  ASSERT_TRUE(gnugo.send("clear_board").first);
  ASSERT_TRUE(gnugo.send("komi 7.5").first);
  Game game(kSize, 7.5);
  data::Rng rng(11);
  int moves = 0;
  bool resigned = false;
  while (!game.over() && moves < 400) {
    const Color mover = game.position().to_play();
    const std::string colour = mover == kBlack ? "black" : "white";
    Move move;
    if (mover == kBlack) {
      std::vector<Move> candidates;
      for (int p = 0; p < kSize * kSize; ++p)
        if (game.is_legal(static_cast<Move>(p)) && !own_eye(game.position(), p)) candidates.push_back(static_cast<Move>(p));
      move = candidates.empty() ? game.position().pass() : candidates[rng.below(candidates.size())];
      const auto [ok, text] = gnugo.send("play black " + gtp_move(move, kSize));
      ASSERT_TRUE(ok) << "GNU Go refused our move " << gtp_move(move, kSize) << ": " << text << "\n"
                      << game.position().to_string();
    } else {
      const auto [ok, text] = gnugo.send("genmove white");
      ASSERT_TRUE(ok) << text;
      if (text == "resign") {
        resigned = true;
        break;
      }
      move = parse_gtp_move(text, kSize);
      ASSERT_TRUE(game.is_legal(move)) << "GNU Go played " << text << ", illegal for us\n" << game.position().to_string();
    }
    game.play(move);
    ++moves;
    for (const Color color : {kBlack, kWhite}) {
      const auto [ok, listed] = gnugo.send(std::string("list_stones ") + (color == kBlack ? "black" : "white"));
      ASSERT_TRUE(ok);
      ASSERT_EQ(parse_stones(listed, kSize), stones_of(game.position(), color))
          << colour << " played " << gtp_move(move, kSize) << " (move " << moves << ")\n"
          << game.position().to_string();
    }
  }
  EXPECT_TRUE(game.over() || resigned) << "the game did not end in 400 moves";
  EXPECT_GT(moves, 20);
}

}  // namespace
}  // namespace trainbench::go
