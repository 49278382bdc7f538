#pragma once
// The network the reference's bootstrap plays with, `--model=random:mlperf07:nchw:0`
// (ml_perf/flags/19/bootstrap.flags; minigo's cc/dual_net/random_dual_net.cc and CreateRandomModelDefinition in
// cc/model/loader.cc): move probabilities exp(x) normalized with x ~ Normal(0.5, 0.4) per move, and a value
// ~ Normal(0, 0.4) redrawn until it lies in [-1, 1]. The reference draws from one stream per model; here each
// position's outputs are drawn from a stream seeded by `seed` and the position's planes, so that the self-play
// threads, which all call it, need no lock and the games do not depend on the order of their calls.
#include <cstdint>

#include "go/mcts.h"

namespace trainbench::go {

BatchEvaluator random_evaluator(int size, uint64_t seed);

}  // namespace trainbench::go
