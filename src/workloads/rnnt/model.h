#pragma once
// The MLPerf v1.1 RNN-T (mlcommons/training rnn_speech_recognition/pytorch: rnnt/model.py, common/rnn.py,
// configs/baseline_v3-1023sp.yaml): an LSTM encoder with time stacking, an LSTM prediction network over
// the previous tokens, and a joint network over every valid (frame, token) pair; its RNN-T loss; and greedy
// decoding with the reference's symbol limits.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "optim/lamb.h"
#include "workloads/checkpoint.h"
#include "workloads/training_loop.h"

namespace trainbench::rnnt {

struct RnntOptions {
  TORCH_ARG(int64_t, input_features) = 240;  // 80 mel bands x 3 stacked frames
  TORCH_ARG(int64_t, encoder_hidden) = 1024;
  TORCH_ARG(int64_t, encoder_pre_layers) = 2;
  TORCH_ARG(int64_t, encoder_post_layers) = 3;
  TORCH_ARG(int64_t, stack_time_factor) = 2;
  TORCH_ARG(int64_t, prediction_hidden) = 512;  // also the embedding width
  TORCH_ARG(int64_t, prediction_layers) = 2;
  TORCH_ARG(int64_t, joint_hidden) = 512;
  TORCH_ARG(int64_t, vocab_size) = 1023;  // sentencepiece tokens; blank is index vocab_size
  TORCH_ARG(double, encoder_dropout) = 0.1;
  TORCH_ARG(double, prediction_dropout) = 0.3;
  TORCH_ARG(double, joint_dropout) = 0.3;
  TORCH_ARG(double, forget_gate_bias) = 1.0;
  TORCH_ARG(double, weights_init_scale) = 0.5;
  TORCH_ARG(double, hidden_hidden_bias_scale) = 0.0;
 public:
  int64_t blank() const { return vocab_size_; }  // the blank token's index: after the vocabulary
};

// The reference's LSTM wrapper (common/rnn.py): nn.LSTM with dropout between layers and after the stack;
// PyTorch's default init, then bias_ih's forget slice set to forget_gate_bias, bias_hh's forget slice scaled
// by hidden_hidden_bias_scale, and every weight and bias multiplied by weights_init_scale.
class StackedLstmImpl : public torch::nn::Module {
 public:
  StackedLstmImpl(int64_t input, int64_t hidden, int64_t layers, double dropout, const RnntOptions& options);
  // x: (time, batch, input) -> (time, batch, hidden) and the final (h, c).
  std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> forward(
      const torch::Tensor& x, const torch::optional<std::tuple<torch::Tensor, torch::Tensor>>& state = torch::nullopt);

  torch::nn::LSTM lstm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(StackedLstm);

// The valid cells of a batch's lattices, t < T_b and u <= U_b, packed utterance after utterance (frame-major),
// as NVIDIA's packed joint computes them: a batch of mixed lengths holds its utterances' cells, not
// B x T x (U + 1) of the longest. T and U are the padded encoder steps and token count.
struct LatticeCells {
  int64_t batch = 0, frames = 0, tokens = 0;  // B, T, U
  std::vector<int64_t> offsets;  // utterance b's cells are [offsets[b], offsets[b + 1])
  torch::Tensor encoder_rows;  // (N): each cell's row of the encoder output as (B * T, .)
  torch::Tensor prediction_rows;  // (N): its row of the prediction output as (B * (U + 1), .)
  torch::Tensor lattice_index;  // (N): its place in a dense (B, T, U + 1) lattice
  torch::Tensor next_tokens;  // (N): the token a label transition from it emits; blank where u = U_b (none)
  torch::Tensor label_cells;  // (M): the cells with u < U_b
  torch::Tensor label_index;  // (M): their place in a dense (B, T, U) lattice
  int64_t count() const { return offsets.back(); }
};

// step_counts (B) <= T and token_counts (B) <= U; tokens (B, >= U). The index tensors are on `device`.
LatticeCells lattice_cells(const torch::Tensor& step_counts, const torch::Tensor& token_counts, const torch::Tensor& tokens,
                           int64_t frames, int64_t max_tokens, int64_t blank, const torch::Device& device);

class RnntImpl : public torch::nn::Module {
 public:
  explicit RnntImpl(const RnntOptions& options);

  // features: (batch, frames, input_features); returns the encoder output (batch, steps, encoder_hidden) and
  // the steps of each utterance (ceil(frames / stack_time_factor)).
  std::pair<torch::Tensor, torch::Tensor> encode(const torch::Tensor& features, const torch::Tensor& frame_counts);
  // tokens: (batch, U) int64; returns (batch, U + 1, prediction_hidden): a zero start vector, then the tokens.
  torch::Tensor predict(const torch::Tensor& tokens);
  // encoder (batch, T, H) and prediction (batch, U + 1, P) outputs -> logits (N, vocab + 1) of the valid cells.
  torch::Tensor joint(const torch::Tensor& encoded, const torch::Tensor& predicted, const LatticeCells& cells);

  // One prediction step for greedy decoding: previous token per utterance (-1: the start vector) and state.
  std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> predict_step(
      const torch::Tensor& previous, const torch::optional<std::tuple<torch::Tensor, torch::Tensor>>& state);

  // Multiply-accumulates of one utterance's training forward pass with `frames` feature frames and `tokens`
  // tokens (LSTMs, joint over the whole lattice), for the bench line's FLOP rate.
  int64_t forward_macs(int64_t frames, int64_t tokens) const;

  // The v1.1 rules' weights_initialization names, in the reference's order.
  static std::vector<std::string> initialized_tensor_names();

  const RnntOptions& options() const { return options_; }

  StackedLstm pre_rnn{nullptr}, post_rnn{nullptr}, dec_rnn{nullptr};
  torch::nn::Embedding pred_embed{nullptr};
  torch::nn::Linear joint_enc{nullptr}, joint_pred{nullptr}, joint_net{nullptr};
  torch::nn::Dropout joint_dropout{nullptr};

 private:
  RnntOptions options_;
};
TORCH_MODULE(Rnnt);

// The model under the v1.1 reference's rnnt/model.py state_dict names, for checkpoint export and --weights:
// its encoder and prediction network are ModuleDicts (encoder.pre_rnn.lstm.*, encoder.post_rnn.lstm.*,
// prediction.embed.weight, prediction.dec_rnn.lstm.*) and its joint_net a Sequential(ReLU, Dropout, Linear)
// (joint_net.2.*); joint_enc and joint_pred keep their names.
StateDict official_state(const Rnnt& model);

// A batch's transducer lattices: -log P per utterance (B), and its exact gradients with respect to log
// P(blank) at each node (B, T, U + 1) and log P(next token) (B, T, U); entries outside an utterance's T_b x
// (U_b + 1) are 0.
struct LatticeGradients {
  torch::Tensor losses, grad_blank, grad_label;
};
// On the CPU, utterance by utterance in double (speech/transducer.h), the utterances in parallel; results on
// the CPU.
LatticeGradients lattice_on_host(const torch::Tensor& log_blank, const torch::Tensor& log_label,
                                 const torch::Tensor& frame_counts, const torch::Tensor& token_counts);
// On the inputs' device, in double, as tensor operations: the forward and backward variables over the
// lattice's anti-diagonals (t + u = d), every utterance of the batch at once, one row of operations per
// diagonal, with nodes outside an utterance held at log 0. What a GPU step uses, so that only (B) losses
// cross to the host; on the CPU the host form is faster and both are tested equal.
LatticeGradients lattice_on_device(const torch::Tensor& log_blank, const torch::Tensor& log_label,
                                   const torch::Tensor& frame_counts, const torch::Tensor& token_counts);

// The RNN-T loss (warp-transducer's RNNTLoss with log-softmax applied inside), per utterance: -log P(tokens |
// features) over every alignment, from the packed logits (N, vocab + 1) of `cells`. The log-softmax is fused
// in: its backward writes the logits' gradient directly, so the step holds no second tensor of the logits'
// size. The lattice runs where the logits are (lattice_on_host for CPU logits, lattice_on_device otherwise)
// with exact gradients, on (batch, T, U + 1) inputs.
torch::Tensor packed_rnnt_loss(const torch::Tensor& logits, const LatticeCells& cells, const torch::Tensor& frame_counts,
                               const torch::Tensor& token_counts, int64_t blank);

// The same loss from dense logits (batch, T, U + 1, vocab + 1) with T >= max(frame_counts) and U >=
// max(token_counts); tokens (batch, >= U). It packs a copy of the valid cells: the dense form torchaudio's loss
// takes, for the loss test; the training step and the bench's loss line use the packed form.
torch::Tensor rnnt_loss(const torch::Tensor& logits, const torch::Tensor& tokens, const torch::Tensor& frame_counts,
                        const torch::Tensor& token_counts, int64_t blank);

// The training step's forward: encode, predict, the joint over each utterance's valid cells, and the mean
// loss over the batch.
torch::Tensor training_loss(Rnnt& model, const torch::Tensor& features, const torch::Tensor& frame_counts,
                            const torch::Tensor& tokens, const torch::Tensor& token_counts);

// The reference's greedy decoder: at each encoder step emit the argmax token until blank, at most
// max_symbols_per_step tries per step; the prediction network advances only on emitted tokens; an utterance
// stops once it holds more than max_symbols_per_sample tokens. Batched over utterances.
std::vector<std::vector<int>> greedy_decode(Rnnt& model, const torch::Tensor& features, const torch::Tensor& frame_counts,
                                            int64_t max_symbols_per_step = 30, int64_t max_symbols_per_sample = 300);

// EMA of the model (ema = decay * ema + (1 - decay) * w over every parameter), evaluated instead of it.
void update_ema(Rnnt& ema, const Rnnt& model, double decay);

// The reference's lr_policy with policy "exponential": steps and epochs counted from 1; linear warmup
// (step + 1) / (warmup_steps + 1) over warmup_epochs, hold at 1, then gamma^(epoch - warmup - hold), never
// below min_lr.
struct RnntLrSchedule {
  double base_lr = 0;
  int64_t warmup_epochs = 0, hold_epochs = 0;
  int64_t steps_per_epoch = 1;
  double gamma = 1;
  double min_lr = 1e-5;
  double at(int64_t step, int64_t epoch) const;
};

// One update for the shared training loop: encoder, prediction network, joint and transducer loss (a mean
// over utterances) per micro-batch, then LAMB at `learning_rate` and, given an EMA model, its update.
TrainingStep training_step(Rnnt model, optim::Lamb& optimizer, torch::Tensor features, torch::Tensor frame_counts,
                           torch::Tensor tokens, torch::Tensor token_counts, double learning_rate, Rnnt ema = nullptr,
                           double ema_decay = 0);

}  // namespace trainbench::rnnt
