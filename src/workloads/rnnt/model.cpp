#include "workloads/rnnt/model.h"

#include <algorithm>
#include <cmath>

#include "speech/transducer.h"
#include "util/error.h"

namespace trainbench::rnnt {

StackedLstmImpl::StackedLstmImpl(int64_t input, int64_t hidden, int64_t layers, double dropout_probability,
                                 const RnntOptions& options) {
  lstm = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(input, hidden).num_layers(layers).dropout(dropout_probability)));
  dropout = register_module("dropout", torch::nn::Dropout(dropout_probability));
  torch::NoGradGuard no_grad;
  for (auto& item : lstm->named_parameters()) {
    // PyTorch's gate order is input, forget, cell, output: the forget slice is [hidden, 2 * hidden).
    torch::Tensor forget = item.value().slice(0, hidden, 2 * hidden);
    if (item.key().find("bias_ih") != std::string::npos) forget.fill_(options.forget_gate_bias());
    if (item.key().find("bias_hh") != std::string::npos) forget.mul_(options.hidden_hidden_bias_scale());
  }
  for (auto& parameter : lstm->parameters()) parameter.mul_(options.weights_init_scale());
}

std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> StackedLstmImpl::forward(
    const torch::Tensor& x, const torch::optional<std::tuple<torch::Tensor, torch::Tensor>>& state) {
  auto [output, final_state] = lstm->forward(x, state);
  return {dropout->forward(output), final_state};
}

RnntImpl::RnntImpl(const RnntOptions& options) : options_(options) {
  // encode() takes the frame count modulo the factor: 0 would be SIGFPE at the first batch.
  if (options.stack_time_factor() < 1)
    fail("stack_time_factor", "expected at least 1, got " + std::to_string(options.stack_time_factor()));
  const int64_t encoder = options.encoder_hidden(), prediction = options.prediction_hidden();
  pre_rnn = register_module("pre_rnn", StackedLstm(options.input_features(), encoder, options.encoder_pre_layers(),
                                                   options.encoder_dropout(), options));
  post_rnn = register_module("post_rnn", StackedLstm(encoder * options.stack_time_factor(), encoder,
                                                     options.encoder_post_layers(), options.encoder_dropout(), options));
  pred_embed = register_module("pred_embed", torch::nn::Embedding(options.vocab_size(), prediction));
  dec_rnn = register_module("dec_rnn", StackedLstm(prediction, prediction, options.prediction_layers(),
                                                   options.prediction_dropout(), options));
  joint_pred = register_module("joint_pred", torch::nn::Linear(prediction, options.joint_hidden()));
  joint_enc = register_module("joint_enc", torch::nn::Linear(encoder, options.joint_hidden()));
  joint_dropout = register_module("joint_dropout", torch::nn::Dropout(options.joint_dropout()));
  joint_net = register_module("joint_net", torch::nn::Linear(options.joint_hidden(), options.vocab_size() + 1));
}

std::pair<torch::Tensor, torch::Tensor> RnntImpl::encode(const torch::Tensor& features, const torch::Tensor& frame_counts) {
  torch::Tensor x = std::get<0>(pre_rnn->forward(features.transpose(0, 1)));  // (T, B, H)
  // StackTime: pad T to a multiple of the factor and fold each run of `factor` frames into one step.
  const int64_t factor = options_.stack_time_factor();
  x = x.transpose(0, 1);  // (B, T, H)
  const int64_t padding = (factor - x.size(1) % factor) % factor;
  if (padding > 0) x = torch::cat({x, torch::zeros({x.size(0), padding, x.size(2)}, x.options())}, 1);
  x = x.reshape({x.size(0), x.size(1) / factor, x.size(2) * factor});
  x = std::get<0>(post_rnn->forward(x.transpose(0, 1))).transpose(0, 1);
  return {x, torch::div(frame_counts + (factor - 1), factor, "floor")};
}

torch::Tensor RnntImpl::predict(const torch::Tensor& tokens) {
  torch::Tensor y = pred_embed->forward(tokens);  // (B, U, P)
  y = torch::cat({torch::zeros({y.size(0), 1, y.size(2)}, y.options()), y}, 1);
  return std::get<0>(dec_rnn->forward(y.transpose(0, 1))).transpose(0, 1);
}

torch::Tensor RnntImpl::joint(const torch::Tensor& encoded, const torch::Tensor& predicted) {
  const torch::Tensor f = joint_enc->forward(encoded).unsqueeze(2), g = joint_pred->forward(predicted).unsqueeze(1);
  return joint_net->forward(joint_dropout->forward(torch::relu(f + g)));
}

std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> RnntImpl::predict_step(
    const torch::Tensor& previous, const torch::optional<std::tuple<torch::Tensor, torch::Tensor>>& state) {
  // The start "token" is a zero vector, not an embedding row.
  const torch::Tensor is_start = previous.lt(0).unsqueeze(1);
  const torch::Tensor embedded =
      torch::where(is_start, torch::zeros({1}, pred_embed->weight.options()), pred_embed->forward(previous.clamp_min(0)));
  auto [output, next_state] = dec_rnn->forward(embedded.unsqueeze(0), state);
  return {output.squeeze(0), next_state};
}

int64_t RnntImpl::forward_macs(int64_t frames, int64_t tokens) const {
  const auto lstm = [](int64_t input, int64_t hidden, int64_t layers) {
    return 4 * hidden * (input + hidden) + (layers - 1) * 4 * hidden * (2 * hidden);
  };
  const RnntOptions& o = options_;
  const int64_t steps = (frames + o.stack_time_factor() - 1) / o.stack_time_factor(), positions = tokens + 1;
  return frames * lstm(o.input_features(), o.encoder_hidden(), o.encoder_pre_layers()) +
         steps * lstm(o.encoder_hidden() * o.stack_time_factor(), o.encoder_hidden(), o.encoder_post_layers()) +
         positions * lstm(o.prediction_hidden(), o.prediction_hidden(), o.prediction_layers()) +
         steps * o.encoder_hidden() * o.joint_hidden() + positions * o.prediction_hidden() * o.joint_hidden() +
         steps * positions * o.joint_hidden() * (o.vocab_size() + 1);
}

std::vector<std::string> RnntImpl::initialized_tensor_names() {
  return {"pre_rnn", "post_rnn", "pred_embed", "dec_rnn", "joint_pred", "joint_enc", "joint_net"};
}

namespace {

// The lattice's exact gradients for log P(blank) and log P(next token) of one batch, from its per-cell
// log-probabilities; the losses per utterance.
struct LatticeResult {
  torch::Tensor losses, grad_blank, grad_label;  // (B) double; (B, T, U + 1) and (B, T, U) float, CPU
};

LatticeResult run_lattice(const torch::Tensor& log_blank, const torch::Tensor& log_label, const torch::Tensor& frame_counts,
                          const torch::Tensor& token_counts) {
  const torch::Tensor blank = log_blank.to(torch::kCPU, torch::kFloat).contiguous();
  const torch::Tensor label = log_label.to(torch::kCPU, torch::kFloat).contiguous();
  const torch::Tensor frames = frame_counts.to(torch::kCPU, torch::kLong).contiguous();
  const torch::Tensor counts = token_counts.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t batch = blank.size(0), T = blank.size(1), width = blank.size(2), U = label.size(2);
  LatticeResult result{torch::empty({batch}, torch::kDouble), torch::zeros_like(blank), torch::zeros_like(label)};
  double* loss = result.losses.data_ptr<double>();
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const speech::LatticeView lattice{frames.data_ptr<int64_t>()[b], counts.data_ptr<int64_t>()[b],
                                        blank.data_ptr<float>() + b * T * width, width, label.data_ptr<float>() + b * T * U, U};
      loss[b] = speech::rnnt_negative_log_likelihood(lattice, result.grad_blank.data_ptr<float>() + b * T * width,
                                                     result.grad_label.data_ptr<float>() + b * T * U);
    }
  });
  return result;
}

// The transducer loss with its log-softmax fused in: logits (B, T, U + 1, V) in, the loss per utterance out.
// Forward keeps only log-sum-exp per cell (B, T, U + 1); backward writes d loss / d logits straight into one
// tensor of the logits' shape: softmax x -(g_blank + g_label) per cell, plus g_blank at the blank and g_label
// at the next token. So no second (B, T, U + 1, V) tensor lives next to the logits (a separate log_softmax
// keeps its output, and select and gather each backpropagate a zero-filled one), and nothing of that size
// leaves the logits' device: only the lattice's (B, T, U + 1) inputs go to the CPU. Utterances are taken one
// at a time, so temporaries are (T, U + 1, V).
torch::ScalarType compute_type(const torch::Tensor& logits) {
  return logits.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

class TransducerLossFunction : public torch::autograd::Function<TransducerLossFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& logits,
                               const torch::Tensor& tokens, const torch::Tensor& frame_counts,
                               const torch::Tensor& token_counts, int64_t blank) {
    torch::NoGradGuard no_grad;
    const int64_t batch = logits.size(0), T = logits.size(1), U = logits.size(2) - 1;
    const torch::Tensor next_tokens = tokens.slice(1, 0, U).to(logits.device(), torch::kLong);
    // float (bf16 and fp16 logits too), or double for double logits
    const auto float_options = logits.options().dtype(compute_type(logits));
    torch::Tensor log_sum_exp = torch::empty({batch, T, U + 1}, float_options);
    torch::Tensor log_blank = torch::empty({batch, T, U + 1}, float_options), log_label = torch::empty({batch, T, U}, float_options);
    for (int64_t b = 0; b < batch; ++b) {
      const torch::Tensor cells = logits[b].to(compute_type(logits));  // (T, U + 1, V): a view for float logits
      log_sum_exp[b].copy_(cells.logsumexp(-1));
      log_blank[b].copy_(cells.select(2, blank) - log_sum_exp[b]);
      const torch::Tensor index = next_tokens[b].view({1, U, 1}).expand({T, U, 1});
      log_label[b].copy_(cells.slice(1, 0, U).gather(2, index).squeeze(2) - log_sum_exp[b].slice(1, 0, U));
    }
    LatticeResult lattice = run_lattice(log_blank, log_label, frame_counts, token_counts);
    context->save_for_backward({logits, log_sum_exp, lattice.grad_blank.to(logits.device(), compute_type(logits)),
                                lattice.grad_label.to(logits.device(), compute_type(logits)), next_tokens});
    context->saved_data["blank"] = blank;
    return lattice.losses.to(logits.device(), compute_type(logits));
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* context,
                                               torch::autograd::tensor_list grad_outputs) {
    torch::NoGradGuard no_grad;
    const auto saved = context->get_saved_variables();
    const torch::Tensor &logits = saved[0], &log_sum_exp = saved[1], &grad_blank = saved[2], &grad_label = saved[3],
                        &next_tokens = saved[4];
    const int64_t blank = context->saved_data["blank"].toInt();
    const int64_t batch = logits.size(0), T = logits.size(1), U = logits.size(2) - 1;
    const torch::Tensor scale = grad_outputs[0].to(compute_type(logits));
    torch::Tensor grad_logits = torch::empty_like(logits, torch::MemoryFormat::Contiguous);
    for (int64_t b = 0; b < batch; ++b) {
      const torch::Tensor g_blank = grad_blank[b] * scale[b], g_label = grad_label[b] * scale[b];  // (T, U + 1), (T, U)
      torch::Tensor per_cell = g_blank.clone();
      per_cell.slice(1, 0, U).add_(g_label);
      torch::Tensor grad = (logits[b].to(compute_type(logits)) - log_sum_exp[b].unsqueeze(2)).exp_().mul_(per_cell.neg().unsqueeze(2));
      grad.select(2, blank).add_(g_blank);
      grad.slice(1, 0, U).scatter_add_(2, next_tokens[b].view({1, U, 1}).expand({T, U, 1}), g_label.unsqueeze(2));
      grad_logits[b].copy_(grad);
    }
    return {grad_logits, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rnnt_loss(const torch::Tensor& logits, const torch::Tensor& tokens, const torch::Tensor& frame_counts,
                        const torch::Tensor& token_counts, int64_t blank) {
  return TransducerLossFunction::apply(logits, tokens, frame_counts, token_counts, blank);
}

torch::Tensor training_loss(Rnnt& model, const torch::Tensor& features, const torch::Tensor& frame_counts,
                            const torch::Tensor& tokens, const torch::Tensor& token_counts) {
  auto [encoded, steps] = model->encode(features, frame_counts);
  const int64_t longest = steps.max().item<int64_t>();
  const torch::Tensor logits = model->joint(encoded.slice(1, 0, longest), model->predict(tokens));
  return rnnt_loss(logits, tokens, steps, token_counts, model->options().blank()).mean();
}

std::vector<std::vector<int>> greedy_decode(Rnnt& model, const torch::Tensor& features, const torch::Tensor& frame_counts,
                                            int64_t max_symbols_per_step, int64_t max_symbols_per_sample) {
  torch::NoGradGuard no_grad;
  auto [encoded, steps_tensor] = model->encode(features, frame_counts);
  const torch::Tensor enc = model->joint_enc->forward(encoded);  // (B, T, J): the encoder half of the joint, once
  const int64_t batch = enc.size(0), blank = model->options().blank();
  const torch::Tensor steps = steps_tensor.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* step_counts = steps.data_ptr<int64_t>();
  std::vector<std::vector<int>> hypotheses(static_cast<size_t>(batch));
  std::vector<int64_t> previous(static_cast<size_t>(batch), -1);
  // Each utterance's prediction output and state for its last emitted token.
  auto [predicted, state] = model->predict_step(torch::full({batch}, -1, torch::TensorOptions(torch::kLong).device(enc.device())),
                                                torch::nullopt);
  for (int64_t t = 0; t < enc.size(1); ++t) {
    std::vector<char> active(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b)
      active[b] = t < step_counts[b] && static_cast<int64_t>(hypotheses[b].size()) <= max_symbols_per_sample;
    const torch::Tensor f = enc.select(1, t);
    for (int64_t tries = 0; tries < max_symbols_per_step && std::count(active.begin(), active.end(), 1) > 0; ++tries) {
      const torch::Tensor logits = model->joint_net->forward(torch::relu(f + model->joint_pred->forward(predicted)));
      const torch::Tensor best = logits.argmax(1).to(torch::kCPU).contiguous();
      const int64_t* best_tokens = best.data_ptr<int64_t>();
      std::vector<int64_t> emitted_mask(static_cast<size_t>(batch), 0);
      bool any = false;
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t token = best_tokens[b];
        if (!active[b]) continue;
        if (token == blank) {
          active[b] = 0;
          continue;
        }
        hypotheses[b].push_back(static_cast<int>(token));
        previous[b] = token;
        emitted_mask[b] = 1;
        any = true;
      }
      if (!any) break;
      // Advance the prediction network of the utterances that emitted; the others keep their state.
      auto [next_predicted, next_state] = model->predict_step(torch::tensor(previous).to(enc.device()), state);
      const torch::Tensor emitted = torch::tensor(emitted_mask).to(enc.device()).to(torch::kBool);
      predicted = torch::where(emitted.unsqueeze(1), next_predicted, predicted);
      state = std::make_tuple(torch::where(emitted.view({1, -1, 1}), std::get<0>(next_state), std::get<0>(state)),
                              torch::where(emitted.view({1, -1, 1}), std::get<1>(next_state), std::get<1>(state)));
    }
  }
  return hypotheses;
}

void update_ema(Rnnt& ema, const Rnnt& model, double decay) {
  torch::NoGradGuard no_grad;
  const auto averaged = ema->parameters(), current = model->parameters();
  for (size_t i = 0; i < averaged.size(); ++i) averaged[i].mul_(decay).add_(current[i], 1 - decay);
}

double RnntLrSchedule::at(int64_t step, int64_t epoch) const {
  const int64_t warmup_steps = warmup_epochs * steps_per_epoch, hold_steps = hold_epochs * steps_per_epoch;
  double factor;
  if (step < warmup_steps)
    factor = static_cast<double>(step + 1) / static_cast<double>(warmup_steps + 1);
  else if (step < warmup_steps + hold_steps)
    factor = 1.0;
  else
    factor = std::pow(gamma, static_cast<double>(epoch - warmup_epochs - hold_epochs));
  return std::max(factor * base_lr, min_lr);
}

// One update: encoder, prediction network, joint and transducer loss per micro-batch, then LAMB at
// `learning_rate` (and, given an EMA model, its update).
TrainingStep training_step(Rnnt model, bert::Lamb& optimizer, torch::Tensor features, torch::Tensor frame_counts,
                           torch::Tensor tokens, torch::Tensor token_counts, double learning_rate, Rnnt ema, double ema_decay) {
  TrainingStep step;
  step.samples = features.size(0);
  step.loss = [=](const BatchSlice& slice) mutable {
    return training_loss(model, slice.of(features), slice.of(frame_counts), slice.of(tokens), slice.of(token_counts));
  };
  step.update = [=, &optimizer]() mutable {
    optimizer.step(learning_rate);
    if (!ema.is_empty()) update_ema(ema, model, ema_decay);
  };
  return step;
}

}  // namespace trainbench::rnnt
