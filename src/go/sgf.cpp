#include "go/sgf.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace trainbench::go {

namespace {

class SgfParser {
 public:
  SgfParser(const std::string& text, const std::string& where) : text_(text), where_(where) {}

  SgfGame parse() {
    skip_space();
    expect('(');
    SgfGame game;
    parse_tree(game, true);
    return game;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(where_ + " (offset " + std::to_string(pos_) + ")", what);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }

  // After '(': a sequence of nodes, then child trees; only the first child continues the main line.
  void parse_tree(SgfGame& game, bool main_line) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != ';') error("expected ';' starting a node");
    while (true) {
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ';') {
        ++pos_;
        parse_node(game, main_line);
      } else {
        break;
      }
    }
    bool first_child = true;
    while (true) {
      skip_space();
      if (pos_ >= text_.size()) error("unterminated game tree (missing ')')");
      if (text_[pos_] == ')') {
        ++pos_;
        return;
      }
      if (text_[pos_] != '(') error("expected '(' or ')' after the nodes");
      ++pos_;
      parse_tree(game, main_line && first_child);
      first_child = false;
    }
  }

  void parse_node(SgfGame& game, bool main_line) {
    SgfNode node;
    const bool root = main_line && game.nodes.empty();
    while (true) {
      skip_space();
      std::string ident;
      while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) {
        // FF[3] allowed lower-case letters inside identifiers (e.g. "VieW"); only the capitals name it.
        if (std::isupper(static_cast<unsigned char>(text_[pos_]))) ident += text_[pos_];
        ++pos_;
      }
      if (ident.empty()) break;
      std::vector<std::string> values;
      skip_space();
      while (pos_ < text_.size() && text_[pos_] == '[') {
        values.push_back(parse_value());
        skip_space();
      }
      if (values.empty()) error("property " + ident + " has no value");
      if (main_line) apply(game, node, root, ident, values);
    }
    if (main_line) game.nodes.push_back(std::move(node));
  }

  std::string parse_value() {
    ++pos_;  // '['
    std::string value;
    while (true) {
      if (pos_ >= text_.size()) error("unterminated property value (missing ']')");
      const char c = text_[pos_++];
      if (c == ']') return value;
      if (c == '\\') {
        if (pos_ >= text_.size()) error("unterminated property value after '\\'");
        const char escaped = text_[pos_++];
        if (escaped == '\n' || escaped == '\r') continue;  // a soft line break
        value += escaped;
      } else {
        value += c;
      }
    }
  }

  int point(const std::string& value, int size) const {
    if (value.size() != 2 || value[0] < 'a' || value[1] < 'a' || value[0] - 'a' >= size || value[1] - 'a' >= size)
      error("'" + value + "' is not a point on a " + std::to_string(size) + "x" + std::to_string(size) + " board");
    return (value[1] - 'a') * size + (value[0] - 'a');
  }

  void apply(SgfGame& game, SgfNode& node, bool root, const std::string& ident, const std::vector<std::string>& values) {
    if (root && ident == "SZ") {
      try {
        game.size = std::stoi(values[0]);
      } catch (const std::exception&) {
        error("SZ[" + values[0] + "] is not a board size");
      }
      if (game.size < 2 || game.size > kMaxSize) error("SZ[" + values[0] + "]: only sizes 2 to 19 are supported");
    } else if (root && ident == "KM") {
      try {
        game.komi = std::stod(values[0]);
      } catch (const std::exception&) {
        error("KM[" + values[0] + "] is not a number");
      }
    } else if (root && ident == "RE") {
      game.result = values[0];
    } else if (root && ident == "PB") {
      game.black = values[0];
    } else if (root && ident == "PW") {
      game.white = values[0];
    } else if (ident == "B" || ident == "W") {
      node.mover = ident == "B" ? kBlack : kWhite;
      // "" and, on boards up to 19x19, "tt" mean pass.
      node.move = values[0].empty() || (values[0] == "tt" && game.size <= 19)
                      ? static_cast<Move>(game.size * game.size)
                      : static_cast<Move>(point(values[0], game.size));
    } else if (ident == "AB" || ident == "AW" || ident == "AE") {
      const Color color = ident == "AB" ? kBlack : ident == "AW" ? kWhite : kEmpty;
      for (const std::string& value : values) {
        // A compressed rectangle "aa:cc".
        if (value.size() == 5 && value[2] == ':') {
          const int from = point(value.substr(0, 2), game.size), to = point(value.substr(3), game.size);
          for (int row = from / game.size; row <= to / game.size; ++row)
            for (int col = from % game.size; col <= to % game.size; ++col)
              node.setup.push_back({row * game.size + col, color});
        } else {
          node.setup.push_back({point(value, game.size), color});
        }
      }
    } else if (ident == "C") {
      node.comment = values[0];
    }
  }

  const std::string& text_;
  const std::string& where_;
  size_t pos_ = 0;
};

std::string escape(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string sgf_point(Move move, int size) {
  if (move == size * size) return "";
  return {static_cast<char>('a' + move % size), static_cast<char>('a' + move / size)};
}

}  // namespace

SgfGame parse_sgf(const std::string& text, const std::string& where) { return SgfParser(text, where).parse(); }

SgfGame read_sgf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_sgf(text.str(), path);
}

std::string write_sgf(const SgfGame& game) {
  std::ostringstream out;
  char komi[32];
  std::snprintf(komi, sizeof komi, "%g", game.komi);
  out << "(;GM[1]FF[4]CA[UTF-8]AP[trainbench]SZ[" << game.size << "]KM[" << komi << "]";
  if (!game.result.empty()) out << "RE[" << escape(game.result) << "]";
  if (!game.black.empty()) out << "PB[" << escape(game.black) << "]";
  if (!game.white.empty()) out << "PW[" << escape(game.white) << "]";
  for (size_t i = 0; i < game.nodes.size(); ++i) {
    const SgfNode& node = game.nodes[i];
    if (i > 0) out << "\n;";
    for (const Color color : {kBlack, kWhite, kEmpty}) {
      std::string points;
      for (const auto& stone : node.setup)
        if (stone.color == color) points += "[" + sgf_point(static_cast<Move>(stone.point), game.size) + "]";
      if (!points.empty()) out << (color == kBlack ? "AB" : color == kWhite ? "AW" : "AE") << points;
    }
    if (node.mover != kEmpty) out << (node.mover == kBlack ? "B[" : "W[") << sgf_point(node.move, game.size) << "]";
    if (!node.comment.empty()) out << "C[" << escape(node.comment) << "]";
  }
  out << ")\n";
  return out.str();
}

SgfGame sgf_of_game(const Game& game, const std::string& result, const std::string& black, const std::string& white) {
  SgfGame record;
  record.size = game.position().size();
  record.komi = game.position().komi();
  record.result = result;
  record.black = black;
  record.white = white;
  record.nodes.emplace_back();  // the root
  Color mover = kBlack;
  for (const Move move : game.moves()) {
    SgfNode node;
    node.mover = mover;
    node.move = move;
    record.nodes.push_back(node);
    mover = opponent(mover);
  }
  return record;
}

Game replay(const SgfGame& record) {
  Game game(record.size, record.komi);
  for (size_t i = 0; i < record.nodes.size(); ++i) {
    const SgfNode& node = record.nodes[i];
    for (const auto& stone : node.setup) game.set_stone(stone.point, stone.color);
    if (node.mover == kEmpty) continue;
    game.set_to_play(node.mover);
    try {
      game.play(node.move);
    } catch (const Error& error) {
      fail("SGF node " + std::to_string(i), error.what());
    }
  }
  return game;
}

std::string result_text(double score) {
  if (score == 0) return "0";
  char text[32];
  std::snprintf(text, sizeof text, "%c+%g", score > 0 ? 'B' : 'W', std::fabs(score));
  return text;
}

}  // namespace trainbench::go
