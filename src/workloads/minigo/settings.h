#pragma once
// MiniGo's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/typed_settings.h"

namespace trainbench::minigo {

// The mini and tiny presets' target: generation `target_generation` of a fixed run of the preset.
struct DatasetSettings {
  int64_t target_generation = 0, target_run = 0;

  template <typename Visit>
  void fields(Visit& visit) {
    visit("target_generation", target_generation);
    visit("target_run", target_run);
  }
};

// The self-play flags the reference's bootstrap games overlay (ml_perf/flags/19/bootstrap.flags).
struct BootstrapSettings {
  int64_t num_readouts = 0;
  double fast_move_probability = 0;
  std::vector<double> resign_threshold;
  bool target_pruning = false;

  template <typename Visit>
  void fields(Visit& visit) {
    visit("num_readouts", num_readouts);
    visit("fast_move_probability", fast_move_probability);
    visit("resign_threshold", resign_threshold);
    visit("target_pruning", target_pruning);
  }
};

struct Settings {
  int64_t max_generations = 0, board_size = 0;
  double komi = 0;
  int64_t filters = 0, trunk_blocks = 0, fc_width = 0;
  int64_t num_readouts = 0, fast_readouts = 0;
  double fast_move_probability = 0;
  int64_t virtual_losses = 0, concurrent_games = 0;
  double dirichlet_alpha = 0, noise_mix = 0, value_init_penalty = 0;
  bool target_pruning = false, allow_pass = false, bootstrap_allow_pass = false;
  int64_t soft_pick_moves = 0, restrict_pass_alive_play_threshold = 0;
  std::vector<double> resign_threshold;  // [low, high]
  double disable_resign_pct = 0;
  int64_t min_selfplay_games_per_generation = 0, bootstrap_games = 0, window_size = 0;
  double filter_amount = 0;
  int64_t batch_size = 0;
  std::vector<double> lr_rates;
  std::vector<int64_t> lr_boundaries;
  double momentum = 0, opt_weight_decay = 0, value_cost_weight = 0;
  int64_t eval_games = 0, eval_readouts = 0, eval_soft_pick_moves = 0;
  std::string target_model, sgf_dir;
  std::optional<DatasetSettings> dataset;      // none: the target is given (the reference)
  std::optional<BootstrapSettings> bootstrap;  // a prepared bootstrap (the reference) instead of one played in init
  std::optional<std::string> bootstrap_dir;    // where `data make` wrote the prepared bootstrap

  template <typename Visit>
  void fields(Visit& visit) {
    visit("max_generations", max_generations);
    visit("board_size", board_size);
    visit("komi", komi);
    visit("filters", filters);
    visit("trunk_blocks", trunk_blocks);
    visit("fc_width", fc_width);
    visit("num_readouts", num_readouts);
    visit("fast_readouts", fast_readouts);
    visit("fast_move_probability", fast_move_probability);
    visit("virtual_losses", virtual_losses);
    visit("concurrent_games", concurrent_games);
    visit("dirichlet_alpha", dirichlet_alpha);
    visit("noise_mix", noise_mix);
    visit("value_init_penalty", value_init_penalty);
    visit("target_pruning", target_pruning);
    visit("allow_pass", allow_pass);
    visit("bootstrap_allow_pass", bootstrap_allow_pass);
    visit("soft_pick_moves", soft_pick_moves);
    visit("restrict_pass_alive_play_threshold", restrict_pass_alive_play_threshold);
    visit("resign_threshold", resign_threshold);
    visit("disable_resign_pct", disable_resign_pct);
    visit("min_selfplay_games_per_generation", min_selfplay_games_per_generation);
    visit("bootstrap_games", bootstrap_games);
    visit("window_size", window_size);
    visit("filter_amount", filter_amount);
    visit("batch_size", batch_size);
    visit("lr_rates", lr_rates);
    visit("lr_boundaries", lr_boundaries);
    visit("momentum", momentum);
    visit("opt_weight_decay", opt_weight_decay);
    visit("value_cost_weight", value_cost_weight);
    visit("eval_games", eval_games);
    visit("eval_readouts", eval_readouts);
    visit("eval_soft_pick_moves", eval_soft_pick_moves);
    visit("target_model", target_model);
    visit("sgf_dir", sgf_dir);
    visit("dataset", dataset);
    visit("bootstrap", bootstrap);
    visit("bootstrap_dir", bootstrap_dir);
  }
};

}  // namespace trainbench::minigo
