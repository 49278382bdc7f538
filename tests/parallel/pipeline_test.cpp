// Pipeline parallelism (parallel/pipeline.h): the schedules as action lists, their simulated bubbles against
// Megatron's formula, and the executor against a one-rank computation (ranks in threads over Gloo).
#include "parallel/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "support/error_message.h"
#include "support/two_ranks.h"

namespace trainbench::parallel {

// GoogleTest prints failed comparisons of actions as "F3.1" (forward of micro-batch 3, chunk 1), not as bytes.
static void PrintTo(const PipelineAction& action, std::ostream* out) {
  *out << (action.kind == PipelineAction::Kind::kForward ? "F" : "B") << action.micro_batch << "." << action.chunk;
}

namespace {

using Kind = PipelineAction::Kind;
using testing::error_message;
using testing::run_ranks;

struct ScheduleCase {
  PipelineSchedule schedule;
  int stages, micro_batches, chunks;
  std::string name() const {
    return schedule_name(schedule) + " p=" + std::to_string(stages) + " m=" + std::to_string(micro_batches) +
           " v=" + std::to_string(chunks);
  }
};

std::string describe(const std::vector<PipelineAction>& actions) {
  std::string text;
  for (const auto& action : actions)
    text += std::string(action.kind == Kind::kForward ? " F" : " B") + std::to_string(action.micro_batch) + "." +
            std::to_string(action.chunk);
  return text;
}

int forwards_before_first_backward(const std::vector<PipelineAction>& actions) {
  int forwards = 0;
  while (forwards < static_cast<int>(actions.size()) && actions[forwards].kind == Kind::kForward) ++forwards;
  return forwards;
}

// The most passes whose forward has run and backward has not: the activations a stage holds at once.
int peak_in_flight(const std::vector<PipelineAction>& actions) {
  int in_flight = 0, peak = 0;
  for (const auto& action : actions) {
    in_flight += action.kind == Kind::kForward ? 1 : -1;
    peak = std::max(peak, in_flight);
  }
  return peak;
}

// Every (micro-batch, chunk) forwarded once and backwarded once, after its forward.
void expect_each_pass_once(const std::vector<PipelineAction>& actions, int micro_batches, int chunks) {
  ASSERT_EQ(actions.size(), 2u * micro_batches * chunks) << describe(actions);
  std::set<std::pair<int, int>> forwarded, backwarded;
  for (const auto& action : actions) {
    const std::pair<int, int> pass{action.micro_batch, action.chunk};
    ASSERT_TRUE(action.micro_batch >= 0 && action.micro_batch < micro_batches && action.chunk >= 0 &&
                action.chunk < chunks)
        << describe(actions);
    if (action.kind == Kind::kForward) {
      EXPECT_TRUE(forwarded.insert(pass).second) << "forwarded twice:" << describe(actions);
    } else {
      EXPECT_TRUE(forwarded.count(pass)) << "backward before forward:" << describe(actions);
      EXPECT_TRUE(backwarded.insert(pass).second) << "backwarded twice:" << describe(actions);
    }
  }
}

TEST(PipelineSchedule, EveryScheduleForwardsAndBackwardsEachMicroBatchOncePerChunk) {
  const std::vector<std::pair<PipelineSchedule, int>> schedules{{PipelineSchedule::kGpipe, 1},
                                                                {PipelineSchedule::kOneForwardOneBackward, 1},
                                                                {PipelineSchedule::kInterleaved, 1},
                                                                {PipelineSchedule::kInterleaved, 2},
                                                                {PipelineSchedule::kInterleaved, 3}};
  for (const auto& [schedule, chunks] : schedules)
    for (const int micro_batches : {4, 8, 12})
      for (int stage = 0; stage < 4; ++stage) {
        SCOPED_TRACE((ScheduleCase{schedule, 4, micro_batches, chunks}.name() + " stage " + std::to_string(stage)));
        expect_each_pass_once(pipeline_actions(schedule, 4, stage, micro_batches, chunks), micro_batches, chunks);
      }
}

TEST(PipelineSchedule, GpipeRunsEveryForwardThenEveryBackwardInMicroBatchOrder) {
  const auto actions = pipeline_actions(PipelineSchedule::kGpipe, 4, 1, 8, 1);
  ASSERT_EQ(actions.size(), 16u);
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(actions[k], (PipelineAction{Kind::kForward, k, 0})) << describe(actions);
    EXPECT_EQ(actions[8 + k], (PipelineAction{Kind::kBackward, k, 0})) << describe(actions);
  }
  EXPECT_EQ(peak_in_flight(actions), 8);
}

// Megatron: min(p − rank − 1, m) warm-up forwards, then forward/backward pairs, then the warm-up's backwards.
TEST(PipelineSchedule, OneForwardOneBackwardWarmsUpAsMegatron) {
  for (int stage = 0; stage < 4; ++stage) {
    const auto actions = pipeline_actions(PipelineSchedule::kOneForwardOneBackward, 4, stage, 8, 1);
    const int warmup = 4 - stage - 1;
    EXPECT_EQ(forwards_before_first_backward(actions), warmup + 1) << describe(actions);
    EXPECT_EQ(peak_in_flight(actions), warmup + 1) << "1F1B holds p − rank activations, GPipe m";
    std::vector<PipelineAction> expected;
    for (int k = 0; k < warmup; ++k) expected.push_back({Kind::kForward, k, 0});
    for (int k = 0; k < 8 - warmup; ++k) {
      expected.push_back({Kind::kForward, warmup + k, 0});
      expected.push_back({Kind::kBackward, k, 0});
    }
    for (int k = 8 - warmup; k < 8; ++k) expected.push_back({Kind::kBackward, k, 0});
    EXPECT_EQ(actions, expected) << describe(actions);
  }
  // Fewer micro-batches than the warm-up: all forwards, then all backwards.
  EXPECT_EQ(forwards_before_first_backward(pipeline_actions(PipelineSchedule::kOneForwardOneBackward, 4, 0, 2, 1)), 2);
}

// Megatron: 2·(p − rank − 1) + (v − 1)·p warm-up forwards over the m·v chunk passes, forwards through the chunks
// in groups of p micro-batches, backwards from the last chunk down.
TEST(PipelineSchedule, InterleavedWarmsUpAsMegatron) {
  for (int stage = 0; stage < 4; ++stage) {
    const auto actions = pipeline_actions(PipelineSchedule::kInterleaved, 4, stage, 8, 2);
    EXPECT_EQ(forwards_before_first_backward(actions), 2 * (4 - stage - 1) + 4 + 1) << describe(actions);
  }
  const auto first = pipeline_actions(PipelineSchedule::kInterleaved, 4, 0, 8, 2);
  const std::vector<PipelineAction> opening{{Kind::kForward, 0, 0}, {Kind::kForward, 1, 0}, {Kind::kForward, 2, 0},
                                            {Kind::kForward, 3, 0}, {Kind::kForward, 0, 1}, {Kind::kForward, 1, 1},
                                            {Kind::kForward, 2, 1}, {Kind::kForward, 3, 1}, {Kind::kForward, 4, 0},
                                            {Kind::kForward, 5, 0}, {Kind::kForward, 6, 0}, {Kind::kBackward, 0, 1},
                                            {Kind::kForward, 7, 0}, {Kind::kBackward, 1, 1}};
  EXPECT_EQ(std::vector<PipelineAction>(first.begin(), first.begin() + 14), opening) << describe(first);
  EXPECT_EQ(first.back(), (PipelineAction{Kind::kBackward, 7, 0})) << describe(first);
  // As many micro-batches as stages: every forward first.
  EXPECT_EQ(forwards_before_first_backward(pipeline_actions(PipelineSchedule::kInterleaved, 4, 3, 4, 2)), 8);
}

TEST(PipelineSchedule, RefusesWhatItCannotSchedule) {
  EXPECT_EQ(error_message([] { pipeline_actions(PipelineSchedule::kInterleaved, 4, 0, 6, 2); }),
            "pipeline schedule interleaved: 6 micro-batches are not a multiple of the 4 pipeline stages");
  EXPECT_EQ(error_message([] { pipeline_actions(PipelineSchedule::kOneForwardOneBackward, 4, 0, 8, 2); }),
            "pipeline schedule 1f1b: 2 model chunks per stage need the interleaved schedule");
  EXPECT_EQ(error_message([] { pipeline_actions(PipelineSchedule::kGpipe, 4, 4, 8, 1); }),
            "pipeline schedule gpipe: stage 4 is not one of 4 stages");
  EXPECT_EQ(error_message([] { pipeline_actions(PipelineSchedule::kGpipe, 4, 0, 0, 1); }),
            "pipeline schedule gpipe: needs at least one micro-batch, got 0");
}

// Between any two ranks, messages are received in the order they are sent: the schedules do not need tags,
// so they also suit a transport that matches by order (NCCL).
TEST(PipelineSchedule, MessagesBetweenTwoRanksArriveInTheOrderTheyAreSent) {
  const std::vector<ScheduleCase> cases{{PipelineSchedule::kGpipe, 4, 8, 1},
                                        {PipelineSchedule::kOneForwardOneBackward, 4, 8, 1},
                                        {PipelineSchedule::kInterleaved, 4, 8, 2},
                                        {PipelineSchedule::kInterleaved, 2, 4, 2},
                                        {PipelineSchedule::kInterleaved, 3, 6, 3}};
  for (const auto& [schedule, stages, micro_batches, chunks] : cases) {
    const int last = stages * chunks - 1;
    // (from, to) → messages as (direction, micro-batch, sending virtual stage)
    std::map<std::pair<int, int>, std::vector<std::tuple<int, int, int>>> sent, received;
    for (int stage = 0; stage < stages; ++stage)
      for (const auto& action : pipeline_actions(schedule, stages, stage, micro_batches, chunks)) {
        const int here = action.chunk * stages + stage, mb = action.micro_batch;
        const bool forward = action.kind == Kind::kForward;
        const int from = forward ? here - 1 : here + 1, to = forward ? here + 1 : here - 1;
        if (from >= 0 && from <= last) received[{from % stages, stage}].push_back({forward, mb, from});
        if (to >= 0 && to <= last) sent[{stage, to % stages}].push_back({forward, mb, here});
      }
    EXPECT_EQ(sent, received) << ScheduleCase{schedule, stages, micro_batches, chunks}.name();
  }
}

// With unit times forward 1 and backward 2 (the usual 1:2) and free sends, GPipe and 1F1B take
// (m + p − 1)(tf + tb): the ranks idle (p − 1)/(m + p − 1) of the step, a bubble of (p − 1)/m of the ideal time.
TEST(PipelineSimulation, GpipeAndOneForwardOneBackwardIdleAsTheFormulaSays) {
  for (const auto schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kOneForwardOneBackward})
    for (const int stages : {1, 2, 4})
      for (const int micro_batches : {1, 2, 4, 8}) {
        SCOPED_TRACE((ScheduleCase{schedule, stages, micro_batches, 1}.name()));
        const PipelineTimeline timeline = simulate_pipeline(schedule, stages, micro_batches, 1, 1.0, 2.0);
        EXPECT_DOUBLE_EQ(timeline.step_time, (micro_batches + stages - 1) * 3.0);
        EXPECT_DOUBLE_EQ(timeline.compute_time, micro_batches * 3.0);
        EXPECT_NEAR(timeline.idle_fraction, (stages - 1.0) / (micro_batches + stages - 1), 1e-12);
        EXPECT_NEAR((timeline.step_time - timeline.compute_time) / timeline.compute_time,
                    pipeline_bubble_fraction(stages, micro_batches, 1), 1e-12);
      }
}

// Interleaving v chunks per rank (each chunk taking 1/v of the times) shrinks the bubble to (p − 1)(tf + tb)/v:
// (p − 1)/(v·m) of the ideal time, the ranks idle (p − 1)/(v·m + p − 1) of the step.
TEST(PipelineSimulation, InterleavedCutsTheBubbleByTheChunkCount) {
  for (const auto& [stages, micro_batches, chunks] : std::vector<std::tuple<int, int, int>>{
           {4, 8, 2}, {4, 4, 2}, {4, 8, 4}, {4, 12, 3}, {2, 4, 2}, {3, 6, 2}, {1, 3, 2}}) {
    SCOPED_TRACE((ScheduleCase{PipelineSchedule::kInterleaved, stages, micro_batches, chunks}.name()));
    const PipelineTimeline timeline =
        simulate_pipeline(PipelineSchedule::kInterleaved, stages, micro_batches, chunks, 1.0, 2.0);
    EXPECT_NEAR(timeline.step_time, micro_batches * 3.0 + (stages - 1) * 3.0 / chunks, 1e-9);
    EXPECT_NEAR(timeline.idle_fraction, (stages - 1.0) / (chunks * micro_batches + stages - 1), 1e-9);
    EXPECT_NEAR((timeline.step_time - timeline.compute_time) / timeline.compute_time,
                pipeline_bubble_fraction(stages, micro_batches, chunks), 1e-9);
  }
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(4, 8, 2), 3.0 / 16);
}

// A 4-layer MLP (tanh between layers, MSE over 3 outputs weighted 1/m), cut into P·v virtual stages of equal
// layer counts. The reference layers and data are made once in the test's thread: the RNG is global.
constexpr int kLayers = 4, kBatch = 4, kFeatures = 5, kHidden = 8, kOutputs = 3, kMicroBatches = 4;

struct MlpProblem {
  std::vector<torch::nn::Linear> layers;
  std::vector<torch::Tensor> inputs, targets;

  MlpProblem() {
    torch::manual_seed(42);
    for (int layer = 0; layer < kLayers; ++layer)
      layers.emplace_back(layer == 0 ? kFeatures : kHidden, layer == kLayers - 1 ? kOutputs : kHidden);
    for (int micro_batch = 0; micro_batch < kMicroBatches; ++micro_batch) {
      inputs.push_back(torch::randn({kBatch, kFeatures}));
      targets.push_back(torch::randn({kBatch, kOutputs}));
    }
  }
  std::vector<torch::nn::Linear> copy_of_layers() const {
    std::vector<torch::nn::Linear> copies;
    for (const auto& layer : layers)
      copies.emplace_back(std::dynamic_pointer_cast<torch::nn::LinearImpl>(layer->clone()));
    return copies;
  }
  // Layers [begin, end) on `x`, then the weighted loss when `end` is the last.
  torch::Tensor apply(std::vector<torch::nn::Linear>& model, int begin, int end, torch::Tensor x,
                      int micro_batch) const {
    for (int layer = begin; layer < end; ++layer) {
      x = model[layer]->forward(x);
      if (layer < kLayers - 1) x = torch::tanh(x);
    }
    return end < kLayers ? x : torch::mse_loss(x, targets[micro_batch]) / kMicroBatches;
  }
};

struct StepOutcome {
  std::vector<double> losses;            // run_step's result on each rank
  std::vector<torch::Tensor> gradients;  // weight and bias of each layer, in layer order
  std::vector<PipelineStepStats> stats;  // each rank's
  std::vector<std::string> failures;
};

StepOutcome one_rank_reference(const MlpProblem& problem) {
  auto model = problem.copy_of_layers();
  StepOutcome outcome{{0.0}, {}, {}, {""}};
  for (int micro_batch = 0; micro_batch < kMicroBatches; ++micro_batch) {
    torch::Tensor loss = problem.apply(model, 0, kLayers, problem.inputs[micro_batch], micro_batch);
    loss.backward();
    outcome.losses[0] += loss.item<double>();
  }
  for (auto& layer : model) {
    outcome.gradients.push_back(layer->weight.grad().clone());
    outcome.gradients.push_back(layer->bias.grad().clone());
  }
  return outcome;
}

// One step of `schedule` over the pipeline group `group`, with the layers of this rank's chunks.
void run_mlp_step(const MlpProblem& problem, std::vector<torch::nn::Linear> model, Communicator& group,
                  PipelineSchedule schedule, int chunks, StepOutcome& outcome) {
  const int stages = group.world(), rank = group.rank(), layers_per_stage = kLayers / (stages * chunks);
  PipelineStageFunctions functions;
  functions.forward = [&](int chunk, int micro_batch, const torch::Tensor& input) {
    const int here = chunk * stages + rank;
    EXPECT_EQ(input.defined(), here > 0);
    if (here > 0) {
      EXPECT_TRUE(input.requires_grad());
    }
    const torch::Tensor x = here == 0 ? problem.inputs[micro_batch] : input;
    return problem.apply(model, here * layers_per_stage, (here + 1) * layers_per_stage, x, micro_batch);
  };
  functions.input_layout = [](int, int) { return ActivationLayout{{kBatch, kHidden}, torch::kFloat32}; };
  PipelineExecutor executor(group, schedule, chunks);
  outcome.losses[rank] = executor.run_step(kMicroBatches, functions);
  outcome.stats[rank] = executor.last_step();
  for (int chunk = 0; chunk < chunks; ++chunk)
    for (int layer = 0; layer < layers_per_stage; ++layer) {
      const int index = (chunk * stages + rank) * layers_per_stage + layer;
      outcome.gradients[2 * index] = model[index]->weight.grad().clone();
      outcome.gradients[2 * index + 1] = model[index]->bias.grad().clone();
    }
}

StepOutcome run_pipelined(const MlpProblem& problem, int stages, PipelineSchedule schedule, int chunks) {
  StepOutcome outcome{
      std::vector<double>(stages), std::vector<torch::Tensor>(2 * kLayers), std::vector<PipelineStepStats>(stages), {}};
  std::vector<std::vector<torch::nn::Linear>> models;
  for (int rank = 0; rank < stages; ++rank) models.push_back(problem.copy_of_layers());
  outcome.failures = run_ranks(stages, [&](Communicator& group) {
    run_mlp_step(problem, models[group.rank()], group, schedule, chunks, outcome);
  });
  return outcome;
}

double relative_difference(const torch::Tensor& actual, const torch::Tensor& expected) {
  return (actual - expected).abs().max().item<double>() / expected.abs().max().item<double>();
}

void expect_equal_to_one_rank(const StepOutcome& pipelined, const StepOutcome& reference) {
  for (const auto& failure : pipelined.failures) ASSERT_EQ(failure, "");
  for (const double loss : pipelined.losses) EXPECT_NEAR(loss, reference.losses[0], 1e-6 * reference.losses[0]);
  for (size_t index = 0; index < reference.gradients.size(); ++index) {
    ASSERT_TRUE(pipelined.gradients[index].defined()) << "no gradient for parameter " << index;
    EXPECT_LE(relative_difference(pipelined.gradients[index], reference.gradients[index]), 1e-6)
        << "parameter " << index << ":\n"
        << pipelined.gradients[index] << "\nexpected\n"
        << reference.gradients[index];
  }
}

TEST(PipelineExecutor, TwoStagesGiveTheOneRankLossAndGradientsUnderGpipeAnd1F1B) {
  const MlpProblem problem;
  const StepOutcome reference = one_rank_reference(problem);
  const StepOutcome gpipe = run_pipelined(problem, 2, PipelineSchedule::kGpipe, 1);
  const StepOutcome one_f_one_b = run_pipelined(problem, 2, PipelineSchedule::kOneForwardOneBackward, 1);
  expect_equal_to_one_rank(gpipe, reference);
  expect_equal_to_one_rank(one_f_one_b, reference);
  // Both accumulate each gradient over the micro-batches in the same order: equal to the bit.
  for (size_t index = 0; index < reference.gradients.size(); ++index)
    EXPECT_TRUE(torch::equal(one_f_one_b.gradients[index], gpipe.gradients[index])) << "parameter " << index;
  // What crossed: m activations of [4, 8] floats forward and their gradients back, 128 bytes each.
  for (const auto* outcome : {&gpipe, &one_f_one_b})
    for (const auto& stats : outcome->stats) {
      EXPECT_EQ(stats.bytes_sent, kMicroBatches * kBatch * kHidden * 4);
      EXPECT_EQ(stats.bytes_received, kMicroBatches * kBatch * kHidden * 4);
      EXPECT_EQ(stats.forwards, kMicroBatches);
      EXPECT_EQ(stats.backwards, kMicroBatches);
      EXPECT_GT(stats.compute_seconds, 0);
      EXPECT_GT(stats.receive_wait_seconds, 0);
      EXPECT_GE(stats.step_seconds, stats.compute_seconds + stats.receive_wait_seconds);
    }
  EXPECT_EQ(gpipe.stats[0].peak_stored_activations, kMicroBatches);
  EXPECT_EQ(one_f_one_b.stats[0].peak_stored_activations, 2);  // p − rank
  EXPECT_EQ(one_f_one_b.stats[1].peak_stored_activations, 1);
}

TEST(PipelineExecutor, TwoStagesOfTwoChunksInterleavedGiveTheOneRankLossAndGradients) {
  const MlpProblem problem;
  const StepOutcome interleaved = run_pipelined(problem, 2, PipelineSchedule::kInterleaved, 2);
  expect_equal_to_one_rank(interleaved, one_rank_reference(problem));
  // Each rank sends and receives every activation of its chunks but the ends: 3 boundaries, m passes each.
  EXPECT_EQ(interleaved.stats[0].bytes_sent + interleaved.stats[1].bytes_sent,
            2 * 3 * kMicroBatches * kBatch * kHidden * 4);
  for (const auto& stats : interleaved.stats) EXPECT_EQ(stats.forwards, 2 * kMicroBatches);
}

TEST(PipelineExecutor, FourStagesGiveTheOneRankLossAndGradients) {
  const MlpProblem problem;
  expect_equal_to_one_rank(run_pipelined(problem, 4, PipelineSchedule::kOneForwardOneBackward, 1),
                           one_rank_reference(problem));
}

// A world of one has no process group: the executor runs every chunk on the rank and never sends.
TEST(PipelineExecutor, OneStageRunsWithoutAProcessGroup) {
  const MlpProblem problem;
  const StepOutcome reference = one_rank_reference(problem);
  auto single = Communicator::connect(RankEnvironment{});
  ASSERT_EQ(single->backend(torch::kCPU), "single");
  const std::vector<std::pair<PipelineSchedule, int>> schedules{{PipelineSchedule::kGpipe, 1},
                                                                {PipelineSchedule::kOneForwardOneBackward, 1},
                                                                {PipelineSchedule::kInterleaved, 2},
                                                                {PipelineSchedule::kInterleaved, 4}};
  for (const auto& [schedule, chunks] : schedules) {
    SCOPED_TRACE(schedule_name(schedule) + " v=" + std::to_string(chunks));
    StepOutcome outcome{{0.0}, std::vector<torch::Tensor>(2 * kLayers), {PipelineStepStats{}}, {""}};
    run_mlp_step(problem, problem.copy_of_layers(), *single, schedule, chunks, outcome);
    expect_equal_to_one_rank(outcome, reference);
    EXPECT_EQ(outcome.stats[0].bytes_sent, 0);
    EXPECT_EQ(outcome.stats[0].forwards, chunks * kMicroBatches);
  }
  EXPECT_EQ(single->traffic(Collective::kSend).calls, 0);
  EXPECT_EQ(single->traffic(Collective::kReceive).calls, 0);
}

TEST(PipelineExecutor, RefusesALastStageThatReturnsNoScalarLoss) {
  auto single = Communicator::connect(RankEnvironment{});
  PipelineExecutor executor(*single, PipelineSchedule::kOneForwardOneBackward, 1);
  PipelineStageFunctions functions;
  functions.forward = [](int, int, const torch::Tensor&) { return torch::ones({2, 3}, torch::requires_grad()); };
  EXPECT_EQ(error_message([&] { executor.run_step(2, functions); }),
            "pipeline forward of chunk 0, micro-batch 0 on stage 0: the last virtual stage must return a scalar loss, "
            "got [2, 3]");
  EXPECT_EQ(error_message([&] { PipelineExecutor refused(*single, PipelineSchedule::kGpipe, 2); }),
            "pipeline schedule gpipe: 2 model chunks per stage need the interleaved schedule");
}

}  // namespace
}  // namespace trainbench::parallel
