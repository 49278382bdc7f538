#include "workloads/rnnt/model.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

LatticeCells lattice_cells(const torch::Tensor& step_counts, const torch::Tensor& token_counts, const torch::Tensor& tokens,
                           int64_t frames, int64_t max_tokens, int64_t blank, const torch::Device& device) {
  const torch::Tensor steps = step_counts.to(torch::kCPU, torch::kLong).contiguous();
  const torch::Tensor counts = token_counts.to(torch::kCPU, torch::kLong).contiguous();
  LatticeCells cells;
  cells.batch = steps.size(0);
  cells.frames = frames;
  cells.tokens = max_tokens;
  cells.offsets.assign(1, 0);
  for (int64_t b = 0; b < cells.batch; ++b) {
    const int64_t T_b = steps.data_ptr<int64_t>()[b], U_b = counts.data_ptr<int64_t>()[b];
    if (T_b < 1 || T_b > frames || U_b < 0 || U_b > max_tokens)
      fail("rnnt lattice", "utterance " + std::to_string(b) + " has " + std::to_string(T_b) + " steps and " +
                               std::to_string(U_b) + " tokens; expected 1 to " + std::to_string(frames) + " and 0 to " +
                               std::to_string(max_tokens));
    cells.offsets.push_back(cells.offsets.back() + T_b * (U_b + 1));
  }
  // The index tensors are built where they are used, from the (B) counts: they hold several int64 indices
  // per lattice cell, which would otherwise be written on the host and copied over every step.
  const int64_t U = max_tokens;
  const auto index_options = torch::TensorOptions(torch::kLong).device(device);
  const torch::Tensor steps_here = steps.to(device).view({-1, 1, 1}), counts_here = counts.to(device).view({-1, 1, 1});
  const torch::Tensor t = torch::arange(frames, index_options).view({1, frames, 1});
  const torch::Tensor u = torch::arange(U + 1, index_options).view({1, 1, U + 1});
  // Row-major over (b, t, u): utterance after utterance, frame-major, as the offsets count them.
  cells.lattice_index = torch::nonzero(((t < steps_here) & (u <= counts_here)).view(-1)).view(-1);
  const torch::Tensor cell_b = cells.lattice_index.div(frames * (U + 1), "floor");
  const torch::Tensor cell_u = cells.lattice_index.remainder(U + 1);
  const torch::Tensor cell_bt = cells.lattice_index.div(U + 1, "floor");  // b * frames + t
  cells.encoder_rows = cell_bt;
  cells.prediction_rows = cell_b * (U + 1) + cell_u;
  const torch::Tensor labelled = cell_u < counts_here.view(-1).index_select(0, cell_b);
  torch::Tensor next = torch::full_like(cell_u, blank);
  if (tokens.numel() > 0) {
    const torch::Tensor labels = tokens.to(device, torch::kLong).view({cells.batch, -1});
    next = torch::where(labelled, labels.index({cell_b, cell_u.clamp_max(labels.size(1) - 1)}), next);
  }
  cells.next_tokens = next;
  cells.label_cells = torch::nonzero(labelled).view(-1);
  cells.label_index = (cell_bt * U + cell_u).index_select(0, cells.label_cells);
  return cells;
}

torch::Tensor RnntImpl::joint(const torch::Tensor& encoded, const torch::Tensor& predicted, const LatticeCells& cells) {
  // Each half's linear layer runs once per frame or token; only the sum, and what follows it, is per cell.
  const torch::Tensor f = joint_enc->forward(encoded).flatten(0, 1), g = joint_pred->forward(predicted).flatten(0, 1);
  // Added in place: one (N, J) tensor instead of two (neither addend is kept for the backward pass).
  const torch::Tensor hidden = f.index_select(0, cells.encoder_rows).add_(g.index_select(0, cells.prediction_rows));
  return joint_net->forward(joint_dropout->forward(torch::relu(hidden)));
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

StateDict official_state(const Rnnt& model) {
  static const std::vector<std::pair<std::string, std::string>> renamed = {
      {"pre_rnn.", "encoder.pre_rnn."}, {"post_rnn.", "encoder.post_rnn."}, {"pred_embed.", "prediction.embed."},
      {"dec_rnn.", "prediction.dec_rnn."}, {"joint_net.", "joint_net.2."}};
  return with_renamed_prefixes(module_state(*model), renamed);
}

namespace {

// The transducer loss with its log-softmax fused in: packed logits (N, V) in, the loss per utterance out.
// Forward keeps only log-sum-exp per cell (N); backward writes d loss / d logits straight into one tensor of
// the logits' shape: softmax x -(g_blank + g_label) per cell, plus g_blank at the blank and g_label at the
// next token. So no second (N, V) tensor lives next to the logits (a separate log_softmax keeps its output,
// and select and gather each backpropagate a zero-filled one), and nothing of that size leaves the logits'
// device: the lattice runs beside them (on a GPU only the (B) losses reach the host). Utterances are taken
// one at a time, so temporaries are (T_b (U_b + 1), V).
torch::ScalarType compute_type(const torch::Tensor& logits) {
  return logits.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

class TransducerLossFunction : public torch::autograd::Function<TransducerLossFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& logits,
                               const LatticeCells& cells, const torch::Tensor& frame_counts,
                               const torch::Tensor& token_counts, int64_t blank) {
    torch::NoGradGuard no_grad;
    const int64_t batch = cells.batch, T = cells.frames, U = cells.tokens;
    // float (bf16 and fp16 logits too), or double for double logits
    const auto float_options = logits.options().dtype(compute_type(logits));
    torch::Tensor log_sum_exp = torch::empty({cells.count()}, float_options);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t begin = cells.offsets[b], end = cells.offsets[b + 1];
      log_sum_exp.slice(0, begin, end).copy_(logits.slice(0, begin, end).to(compute_type(logits)).logsumexp(-1));
    }
    const torch::Tensor log_blank = logits.select(1, blank).to(compute_type(logits)) - log_sum_exp;
    const torch::Tensor log_next = logits.gather(1, cells.next_tokens.unsqueeze(1)).squeeze(1).to(compute_type(logits)) - log_sum_exp;
    // The lattice reads the dense (B, T, U + 1) and (B, T, U) grids; cells outside an utterance stay unread.
    const torch::Tensor dense_blank = torch::zeros({batch * T * (U + 1)}, float_options).index_copy_(0, cells.lattice_index, log_blank);
    const torch::Tensor dense_label =
        torch::zeros({batch * T * U}, float_options).index_copy_(0, cells.label_index, log_next.index_select(0, cells.label_cells));
    const auto run_lattice = logits.is_cpu() ? lattice_on_host : lattice_on_device;
    const LatticeGradients lattice =
        run_lattice(dense_blank.view({batch, T, U + 1}), dense_label.view({batch, T, U}), frame_counts, token_counts);
    const torch::Tensor grad_blank = lattice.grad_blank.to(logits.device(), compute_type(logits)).view(-1).index_select(0, cells.lattice_index);
    const torch::Tensor grad_next = torch::zeros({cells.count()}, float_options)
                                        .index_copy_(0, cells.label_cells,
                                                     lattice.grad_label.to(logits.device(), compute_type(logits)).view(-1).index_select(0, cells.label_index));
    context->save_for_backward({logits, log_sum_exp, grad_blank, grad_next, cells.next_tokens});
    context->saved_data["blank"] = blank;
    context->saved_data["offsets"] = cells.offsets;
    return lattice.losses.to(logits.device(), compute_type(logits));
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* context,
                                               torch::autograd::tensor_list grad_outputs) {
    torch::NoGradGuard no_grad;
    const auto saved = context->get_saved_variables();
    const torch::Tensor &logits = saved[0], &log_sum_exp = saved[1], &grad_blank = saved[2], &grad_next = saved[3],
                        &next_tokens = saved[4];
    const int64_t blank = context->saved_data["blank"].toInt();
    const std::vector<int64_t> offsets = context->saved_data["offsets"].toIntVector();
    const torch::Tensor scale = grad_outputs[0].to(compute_type(logits));
    torch::Tensor grad_logits = torch::empty_like(logits, torch::MemoryFormat::Contiguous);
    for (size_t b = 0; b + 1 < offsets.size(); ++b) {
      const int64_t begin = offsets[b], end = offsets[b + 1];
      const torch::Tensor g_blank = grad_blank.slice(0, begin, end) * scale[static_cast<int64_t>(b)];
      const torch::Tensor g_next = grad_next.slice(0, begin, end) * scale[static_cast<int64_t>(b)];
      torch::Tensor grad = (logits.slice(0, begin, end).to(compute_type(logits)) - log_sum_exp.slice(0, begin, end).unsqueeze(1))
                               .exp_()
                               .mul_((g_blank + g_next).neg_().unsqueeze(1));
      grad.select(1, blank).add_(g_blank);
      // A cell without a label transition has g_next = 0 and names the blank: adding it changes nothing.
      grad.scatter_add_(1, next_tokens.slice(0, begin, end).unsqueeze(1), g_next.unsqueeze(1));
      grad_logits.slice(0, begin, end).copy_(grad);
    }
    return {grad_logits, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

LatticeGradients lattice_on_host(const torch::Tensor& log_blank, const torch::Tensor& log_label,
                                 const torch::Tensor& frame_counts, const torch::Tensor& token_counts) {
  const torch::Tensor blank = log_blank.to(torch::kCPU, torch::kFloat).contiguous();
  const torch::Tensor label = log_label.to(torch::kCPU, torch::kFloat).contiguous();
  const torch::Tensor frames = frame_counts.to(torch::kCPU, torch::kLong).contiguous();
  const torch::Tensor counts = token_counts.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t batch = blank.size(0), T = blank.size(1), width = blank.size(2), U = label.size(2);
  LatticeGradients result{torch::empty({batch}, torch::kDouble), torch::zeros_like(blank), torch::zeros_like(label)};
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

// Node (t, u) of a (B, T, U + 1) grid sits at row d = t + u, column t of its skewed (B, T + U, T) form, so
// both predecessors of a node, (t - 1, u) and (t, u - 1), are on row d - 1 (columns t - 1 and t) and each
// row follows from the one before by elementwise operations.
LatticeGradients lattice_on_device(const torch::Tensor& log_blank, const torch::Tensor& log_label,
                                   const torch::Tensor& frame_counts, const torch::Tensor& token_counts) {
  torch::NoGradGuard no_grad;
  const auto options = log_blank.options().dtype(torch::kDouble);
  const auto index_options = options.dtype(torch::kLong);
  const int64_t batch = log_blank.size(0), T = log_blank.size(1), U = log_label.size(2), rows = T + U;
  const double impossible = -std::numeric_limits<double>::infinity();
  const torch::Tensor last_frames = frame_counts.to(index_options), last_tokens = token_counts.to(index_options);
  const torch::Tensor frames = last_frames.view({batch, 1, 1}), counts = last_tokens.view({batch, 1, 1});
  const torch::Tensor t = torch::arange(T, index_options).view({1, T, 1});
  const torch::Tensor u = torch::arange(U + 1, index_options).view({1, 1, U + 1});
  // log 0 for every transition that leaves an utterance's lattice: blank beyond its last frame or token,
  // a label at or beyond its last token.
  const torch::Tensor in_frames = t < frames;
  const torch::Tensor blank = log_blank.to(torch::kDouble).masked_fill(~(in_frames & (u <= counts)), impossible);
  torch::Tensor label = torch::full({batch, T, U + 1}, impossible, options);
  label.narrow(2, 0, U).copy_(log_label.to(torch::kDouble));
  label.masked_fill_(~(in_frames & (u < counts)), impossible);
  // Skewing: row d, column t holds node (t, d - t); columns with d - t outside 0..U hold log 0.
  const torch::Tensor d = torch::arange(rows, index_options).view({rows, 1});
  const torch::Tensor columns = torch::arange(T, index_options).view({1, T});
  const torch::Tensor skew_u = d - columns;                       // (rows, T)
  const torch::Tensor on_grid = (skew_u >= 0) & (skew_u <= U);
  const torch::Tensor flat_index = (columns * (U + 1) + skew_u.clamp(0, U)).view(-1);  // into T x (U + 1)
  const auto skew = [&](const torch::Tensor& grid) {
    return grid.reshape({batch, T * (U + 1)}).index_select(1, flat_index).view({batch, rows, T}).masked_fill(~on_grid, impossible);
  };
  const torch::Tensor blank_skewed = skew(blank), label_skewed = skew(label);
  const auto shifted_right = [&](const torch::Tensor& row) {  // row[t - 1] at t, log 0 at t = 0
    torch::Tensor out = torch::full_like(row, impossible);
    out.narrow(1, 1, T - 1).copy_(row.narrow(1, 0, T - 1));
    return out;
  };
  // Forward variables: alpha(0, 0) = 0; alpha(t, u) = logaddexp(alpha(t-1, u) + blank(t-1, u),
  // alpha(t, u-1) + label(t, u-1)).
  torch::Tensor alpha = torch::full({batch, rows, T}, impossible, options);
  alpha.select(1, 0).select(1, 0).fill_(0);
  for (int64_t row = 1; row < rows; ++row) {
    const torch::Tensor before = alpha.select(1, row - 1);
    alpha.select(1, row).copy_(torch::logaddexp(shifted_right(before + blank_skewed.select(1, row - 1)),
                                                before + label_skewed.select(1, row - 1)));
  }
  // Backward variables, with the target of an utterance's final blank, (T_b, U_b) one frame past its end, as
  // a node of log value 0: beta(t, u) = logaddexp(beta(t+1, u) + blank(t, u), beta(t, u+1) + label(t, u)).
  // One column more than alpha, for that node when T_b = T.
  torch::Tensor beta = torch::full({batch, rows + 1, T + 1}, impossible, options);
  const torch::Tensor utterances = torch::arange(batch, index_options);
  beta.index_put_({utterances, last_frames + last_tokens, last_frames}, 0.0);
  for (int64_t row = rows - 1; row >= 0; --row) {
    const torch::Tensor next = beta.select(1, row + 1);  // column c: node (c, row + 1 - c)
    // From (t, u) on this row, blank leads to column t + 1 of the next row and a label to column t.
    torch::Tensor current = beta.select(1, row).narrow(1, 0, T);
    // logaddexp with what the row holds keeps a terminal node placed on it.
    current.copy_(torch::logaddexp(torch::logaddexp(next.narrow(1, 1, T) + blank_skewed.select(1, row),
                                                    next.narrow(1, 0, T) + label_skewed.select(1, row)),
                                   current));
  }
  const torch::Tensor log_likelihood = beta.select(1, 0).select(1, 0);  // beta(0, 0), (B)
  // d(-log P)/d blank(t, u) = -P(paths through that transition) / P, and the same for a label.
  const torch::Tensor after = beta.narrow(1, 1, rows);  // row d + 1 for each row d
  const torch::Tensor log_p = log_likelihood.view({batch, 1, 1});
  const torch::Tensor grad_blank_skewed = (alpha + blank_skewed + after.narrow(2, 1, T) - log_p).exp_().neg_();
  const torch::Tensor grad_label_skewed = (alpha + label_skewed + after.narrow(2, 0, T) - log_p).exp_().neg_();
  // Back to (B, T, U + 1): node (t, u) is row t + u, column t.
  const torch::Tensor unskew_index = ((t + u) * T + t).view(-1);
  const auto unskew = [&](const torch::Tensor& skewed) {
    return skewed.reshape({batch, rows * T}).index_select(1, unskew_index).view({batch, T, U + 1});
  };
  return {log_likelihood.neg(), unskew(grad_blank_skewed), unskew(grad_label_skewed).narrow(2, 0, U).contiguous()};
}

torch::Tensor packed_rnnt_loss(const torch::Tensor& logits, const LatticeCells& cells, const torch::Tensor& frame_counts,
                               const torch::Tensor& token_counts, int64_t blank) {
  return TransducerLossFunction::apply(logits, cells, frame_counts, token_counts, blank);
}

torch::Tensor rnnt_loss(const torch::Tensor& logits, const torch::Tensor& tokens, const torch::Tensor& frame_counts,
                        const torch::Tensor& token_counts, int64_t blank) {
  const int64_t T = logits.size(1), U = logits.size(2) - 1;
  const LatticeCells cells = lattice_cells(frame_counts, token_counts, tokens, T, U, blank, logits.device());
  const torch::Tensor packed = logits.flatten(0, 2).index_select(0, cells.lattice_index);
  return packed_rnnt_loss(packed, cells, frame_counts, token_counts, blank);
}

torch::Tensor training_loss(Rnnt& model, const torch::Tensor& features, const torch::Tensor& frame_counts,
                            const torch::Tensor& tokens, const torch::Tensor& token_counts) {
  auto [encoded, steps] = model->encode(features, frame_counts);
  const torch::Tensor predicted = model->predict(tokens);
  const LatticeCells cells = lattice_cells(steps, token_counts, tokens, encoded.size(1), predicted.size(1) - 1,
                                           model->options().blank(), encoded.device());
  const torch::Tensor logits = model->joint(encoded, predicted, cells);
  return packed_rnnt_loss(logits, cells, steps, token_counts, model->options().blank()).mean();
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
TrainingStep training_step(Rnnt model, optim::Lamb& optimizer, torch::Tensor features, torch::Tensor frame_counts,
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
