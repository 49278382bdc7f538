#include "parallel/pipeline.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "util/error.h"

namespace trainbench::parallel {

namespace {

using Clock = std::chrono::steady_clock;
using Kind = PipelineAction::Kind;

double step_seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void check_schedule_arguments(PipelineSchedule schedule, int stages, int stage, int micro_batches, int chunks) {
  const std::string what = "pipeline schedule " + schedule_name(schedule);
  if (stages < 1 || stage < 0 || stage >= stages)
    fail(what, "stage " + std::to_string(stage) + " is not one of " + std::to_string(stages) + " stages");
  if (micro_batches < 1) fail(what, "needs at least one micro-batch, got " + std::to_string(micro_batches));
  if (chunks < 1) fail(what, "needs at least one model chunk per stage, got " + std::to_string(chunks));
  if (schedule != PipelineSchedule::kInterleaved && chunks != 1)
    fail(what, std::to_string(chunks) + " model chunks per stage need the interleaved schedule");
  // Megatron's interleaving sends micro-batches round the stages in groups of one per stage.
  if (schedule == PipelineSchedule::kInterleaved && micro_batches % stages != 0)
    fail(what, std::to_string(micro_batches) + " micro-batches are not a multiple of the " + std::to_string(stages) +
                   " pipeline stages");
}

// `warmup` forwards, then a forward and a backward in turn, then the backwards left: the shape every schedule
// here has. `pass(kind, k)` says which micro-batch and chunk the k-th forward (or backward) is.
template <typename PassOf>
std::vector<PipelineAction> warm_up_then_alternate(int passes, int warmup, PassOf pass) {
  std::vector<PipelineAction> actions;
  actions.reserve(2 * static_cast<size_t>(passes));
  for (int k = 0; k < warmup; ++k) actions.push_back(pass(Kind::kForward, k));
  for (int k = 0; k < passes - warmup; ++k) {
    actions.push_back(pass(Kind::kForward, warmup + k));
    actions.push_back(pass(Kind::kBackward, k));
  }
  for (int k = passes - warmup; k < passes; ++k) actions.push_back(pass(Kind::kBackward, k));
  return actions;
}

// Megatron's get_model_chunk_id, with the micro-batch its data iterators would yield: the k-th pass takes the
// chunks in groups of `stages` micro-batches, forwards from chunk 0 up, backwards from the last chunk down.
PipelineAction interleaved_pass(Kind kind, int pass, int stages, int chunks) {
  const int group = pass / (stages * chunks);
  const int in_group = pass % (stages * chunks);
  const int chunk = in_group / stages;
  return {kind, group * stages + in_group % stages, kind == Kind::kForward ? chunk : chunks - 1 - chunk};
}

// A message's tag names the boundary between virtual stages it crosses (by the stage before it), its
// micro-batch and its direction, so no two messages of a step between the same two ranks share a tag.
int message_tag(Kind direction, int micro_batch, int boundary, int virtual_stages) {
  return (micro_batch * virtual_stages + boundary) * 2 + (direction == Kind::kBackward ? 1 : 0);
}

std::string shape_text(const torch::Tensor& tensor) {
  std::string text;
  for (const int64_t size : tensor.sizes()) text += (text.empty() ? "" : ", ") + std::to_string(size);
  return "[" + text + "]";
}

}  // namespace

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stages, int stage, int micro_batches,
                                             int chunks) {
  check_schedule_arguments(schedule, stages, stage, micro_batches, chunks);
  const auto in_order = [](Kind kind, int k) { return PipelineAction{kind, k, 0}; };
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return warm_up_then_alternate(micro_batches, micro_batches, in_order);
    case PipelineSchedule::kOneForwardOneBackward:
      return warm_up_then_alternate(micro_batches, std::min(stages - stage - 1, micro_batches), in_order);
    case PipelineSchedule::kInterleaved:
      break;
  }
  const int passes = micro_batches * chunks;
  // As many micro-batches as stages: every forward first (Megatron's all_warmup_microbatches).
  const int warmup =
      micro_batches == stages ? passes : std::min(2 * (stages - stage - 1) + (chunks - 1) * stages, passes);
  return warm_up_then_alternate(passes, warmup,
                                [&](Kind kind, int k) { return interleaved_pass(kind, k, stages, chunks); });
}

namespace {

// Runs every rank's action list on an ideal machine: an action starts when its rank is free and its inputs are
// done (its own forward, and the neighbouring virtual stage's pass of the same micro-batch).
class TimelineSimulator {
 public:
  TimelineSimulator(int stages, int micro_batches, int chunks)
      : stages_(stages),
        micro_batches_(micro_batches),
        virtual_stages_(stages * chunks),
        finished_(2 * static_cast<size_t>(virtual_stages_) * micro_batches, -1.0) {}

  // Runs the actions of `stage` that can start, in order; returns how many ran.
  int advance(const std::vector<PipelineAction>& actions, size_t& next, double& free_at, int stage, double forward_cost,
              double backward_cost) {
    int ran = 0;
    for (; next < actions.size(); ++next, ++ran) {
      const PipelineAction& action = actions[next];
      const int here = action.chunk * stages_ + stage;
      const double ready = inputs_ready(action, here);
      if (ready < 0) break;
      free_at = std::max(free_at, ready) + (action.kind == Kind::kForward ? forward_cost : backward_cost);
      finished(action.kind, here, action.micro_batch) = free_at;
    }
    return ran;
  }

 private:
  double& finished(Kind kind, int virtual_stage, int micro_batch) {
    const int kind_index = kind == Kind::kForward ? 0 : 1;
    return finished_[(static_cast<size_t>(kind_index) * virtual_stages_ + virtual_stage) * micro_batches_ +
                     micro_batch];
  }
  // When the inputs of `action` at virtual stage `here` are done, or -1 while one is not.
  double inputs_ready(const PipelineAction& action, int here) {
    if (action.kind == Kind::kForward) return here == 0 ? 0.0 : finished(Kind::kForward, here - 1, action.micro_batch);
    const double own_forward = finished(Kind::kForward, here, action.micro_batch);
    if (here == virtual_stages_ - 1 || own_forward < 0) return own_forward;
    const double gradient = finished(Kind::kBackward, here + 1, action.micro_batch);
    return gradient < 0 ? -1.0 : std::max(own_forward, gradient);
  }

  int stages_, micro_batches_, virtual_stages_;
  std::vector<double> finished_;  // by kind, virtual stage and micro-batch; -1 while not run
};

}  // namespace

PipelineTimeline simulate_pipeline(PipelineSchedule schedule, int stages, int micro_batches, int chunks,
                                   double forward_time, double backward_time) {
  std::vector<std::vector<PipelineAction>> actions;
  for (int stage = 0; stage < stages; ++stage)
    actions.push_back(pipeline_actions(schedule, stages, stage, micro_batches, chunks));
  TimelineSimulator simulator(stages, micro_batches, chunks);
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<double> free_at(static_cast<size_t>(stages), 0.0);
  for (int ran = 1; ran > 0;) {
    ran = 0;
    for (int stage = 0; stage < stages; ++stage)
      ran += simulator.advance(actions[stage], next[stage], free_at[stage], stage, forward_time / chunks,
                               backward_time / chunks);
  }
  for (int stage = 0; stage < stages; ++stage)
    if (next[stage] < actions[stage].size())
      fail("pipeline schedule " + schedule_name(schedule),
           "deadlocks: stage " + std::to_string(stage) + " waits forever at its action " + std::to_string(next[stage]));
  PipelineTimeline timeline;
  timeline.step_time = *std::max_element(free_at.begin(), free_at.end());
  timeline.compute_time = micro_batches * (forward_time + backward_time);
  timeline.idle_fraction = timeline.step_time > 0 ? 1 - timeline.compute_time / timeline.step_time : 0;
  return timeline;
}

// What one step holds between its actions; dropped at its end, or when it fails.
struct PipelineExecutor::StepState {
  struct Stored {
    torch::Tensor input;   // a leaf: its grad() is what goes back to the previous virtual stage
    torch::Tensor output;  // the activation sent on (with its graph), or the loss
  };
  explicit StepState(const PipelineStageFunctions& step_functions) : functions(step_functions) {}

  const PipelineStageFunctions& functions;
  std::map<std::pair<int, int>, Stored> stored;  // by (chunk, micro-batch), from forward to backward
  std::vector<PendingCollective> sends;
  std::map<int, torch::Tensor> local_messages;  // by tag: chunk to chunk on this rank (one stage, v > 1)
  torch::Tensor loss_sum;                       // float64 on the loss's device: no host sync per micro-batch
  PipelineStepStats stats;
};

PipelineExecutor::PipelineExecutor(Communicator& pipeline_group, PipelineSchedule schedule, int chunks)
    : group_(pipeline_group), schedule_(schedule), chunks_(chunks) {
  // A wrong stage or chunk count fails here, before any step (m = P passes every micro-batch check).
  check_schedule_arguments(schedule, stages(), stage(), stages(), chunks);
}

PipelineExecutor::~PipelineExecutor() = default;

int PipelineExecutor::stage() const { return group_.rank(); }
int PipelineExecutor::stages() const { return group_.world(); }

double PipelineExecutor::run_step(int micro_batches, const PipelineStageFunctions& functions) {
  const auto start = Clock::now();
  const std::vector<PipelineAction> actions = pipeline_actions(schedule_, stages(), stage(), micro_batches, chunks_);
  if (!functions.forward) fail("pipeline step", "no forward function was given");
  if (stages() > 1 && !functions.input_layout)
    fail("pipeline step", "no input_layout was given: stage " + std::to_string(stage()) + " must preallocate receives");
  StepState step{functions};
  try {
    for (const PipelineAction& action : actions) {
      if (action.kind == Kind::kForward)
        run_forward(step, action.micro_batch, action.chunk);
      else
        run_backward(step, action.micro_batch, action.chunk);
    }
    finish_sends(step);
  } catch (...) {
    for (auto& send : step.sends) abandoned_sends_.push_back(std::move(send));
    throw;
  }
  // The last virtual stage is on the last rank whatever v is.
  std::vector<double> loss{step.loss_sum.defined() ? step.loss_sum.item<double>() : 0.0};
  if (stages() > 1) group_.broadcast(loss, stages() - 1);
  step.stats.step_seconds = step_seconds_since(start);
  last_step_ = step.stats;
  return loss[0];
}

void PipelineExecutor::run_forward(StepState& step, int micro_batch, int chunk) {
  const int here = virtual_stage(chunk);
  const int virtual_stages = stages() * chunks_;
  torch::Tensor input;
  if (here > 0) {
    const ActivationLayout layout = step.functions.input_layout(chunk, micro_batch);
    input = receive_from(step, here - 1, message_tag(Kind::kForward, micro_batch, here - 1, virtual_stages),
                         layout.shape, layout.options);
    input.requires_grad_(true);
  }
  const auto start = Clock::now();
  torch::Tensor output = step.functions.forward(chunk, micro_batch, input);
  step.stats.compute_seconds += step_seconds_since(start);
  const std::string what = "pipeline forward of chunk " + std::to_string(chunk) + ", micro-batch " +
                           std::to_string(micro_batch) + " on stage " + std::to_string(stage());
  if (!output.defined()) fail(what, "returned no tensor");
  if (here == virtual_stages - 1) {
    if (output.numel() != 1) fail(what, "the last virtual stage must return a scalar loss, got " + shape_text(output));
    const torch::Tensor loss = output.detach().to(torch::kFloat64).reshape({});
    step.loss_sum = step.loss_sum.defined() ? step.loss_sum + loss : loss;
  } else {
    send_to(step, here + 1, output, message_tag(Kind::kForward, micro_batch, here, virtual_stages));
  }
  step.stored[{chunk, micro_batch}] = {input, output};
  step.stats.peak_stored_activations =
      std::max(step.stats.peak_stored_activations, static_cast<int>(step.stored.size()));
  ++step.stats.forwards;
}

void PipelineExecutor::run_backward(StepState& step, int micro_batch, int chunk) {
  const auto found = step.stored.find({chunk, micro_batch});
  if (found == step.stored.end())  // the schedules never do this; a guard against a wrong one
    fail("pipeline backward of chunk " + std::to_string(chunk) + ", micro-batch " + std::to_string(micro_batch),
         "its forward has not run");
  const StepState::Stored stored = std::move(found->second);
  step.stored.erase(found);  // frees the activations once this backward is done with them
  const int here = virtual_stage(chunk);
  const int virtual_stages = stages() * chunks_;
  torch::Tensor output_gradient;  // undefined on the last virtual stage: backward starts from the loss
  if (here < virtual_stages - 1)
    output_gradient = receive_from(step, here + 1, message_tag(Kind::kBackward, micro_batch, here, virtual_stages),
                                   stored.output.sizes().vec(), stored.output.options());
  const auto start = Clock::now();
  stored.output.backward(output_gradient);
  step.stats.compute_seconds += step_seconds_since(start);
  if (here > 0) {
    torch::Tensor input_gradient = stored.input.grad();
    if (!input_gradient.defined()) input_gradient = torch::zeros_like(stored.input);  // the chunk ignored its input
    send_to(step, here - 1, input_gradient, message_tag(Kind::kBackward, micro_batch, here - 1, virtual_stages));
  }
  ++step.stats.backwards;
}

void PipelineExecutor::send_to(StepState& step, int virtual_stage, const torch::Tensor& tensor, int tag) {
  const int peer = virtual_stage % stages();
  torch::Tensor payload = tensor.detach().contiguous();
  if (peer == stage()) {  // one stage with several chunks: nothing leaves the rank
    step.local_messages[tag] = payload;
    return;
  }
  step.sends.push_back(group_.send(payload, peer, tag));  // the pending send keeps `payload` alive
  step.stats.bytes_sent += payload.numel() * static_cast<int64_t>(payload.element_size());
}

torch::Tensor PipelineExecutor::receive_from(StepState& step, int virtual_stage, int tag,
                                             const std::vector<int64_t>& shape, const torch::TensorOptions& options) {
  const int peer = virtual_stage % stages();
  if (peer == stage()) {
    const auto found = step.local_messages.find(tag);
    if (found == step.local_messages.end())  // the schedules never do this; a guard against a wrong one
      fail("pipeline stage " + std::to_string(stage()), "message " + std::to_string(tag) + " was never sent");
    torch::Tensor message = std::move(found->second);
    step.local_messages.erase(found);
    return message;
  }
  torch::Tensor buffer = torch::empty(shape, options.requires_grad(false));
  const auto start = Clock::now();
  group_.receive(buffer, peer, tag).wait();  // throws the communicator's Error, which names a failed peer
  step.stats.receive_wait_seconds += step_seconds_since(start);
  step.stats.bytes_received += buffer.numel() * static_cast<int64_t>(buffer.element_size());
  return buffer;
}

void PipelineExecutor::finish_sends(StepState& step) {
  const auto start = Clock::now();
  for (auto& send : step.sends) send.wait();
  step.sends.clear();
  step.stats.send_wait_seconds += step_seconds_since(start);
}

}  // namespace trainbench::parallel
