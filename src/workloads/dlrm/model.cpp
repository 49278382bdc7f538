#include "workloads/dlrm/model.h"

#include <chrono>
#include <cmath>
#include <memory>

#include "dist/gather.h"
#include "util/error.h"

namespace trainbench::dlrm {

namespace {

// The reference's create_mlp initialization: weights N(0, sqrt(2 / (in + out))), biases N(0, sqrt(1 / out)).
torch::nn::Linear make_linear(int64_t in, int64_t out) {
  torch::nn::Linear linear(in, out);
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std::sqrt(2.0 / static_cast<double>(in + out)));
  linear->bias.normal_(0.0, std::sqrt(1.0 / static_cast<double>(out)));
  return linear;
}

}  // namespace

DlrmImpl::DlrmImpl(DlrmOptions options) : options_(std::move(options)) {
  const auto& tables = options_.table_sizes();
  const int64_t dim = options_.embedding_dim();
  if (tables.empty()) fail("dlrm model", "needs at least one embedding table");
  if (options_.bottom_mlp().empty() || options_.bottom_mlp().back() != dim)
    fail("dlrm model", "the bottom MLP must end in embedding_dim (" + std::to_string(dim) + ") outputs");
  if (options_.top_mlp().empty() || options_.top_mlp().back() != 1)
    fail("dlrm model", "the top MLP must end in 1 output");

  std::vector<int64_t> offsets;
  int64_t rows = 0;
  for (const int64_t size : tables) {
    if (size < 1) fail("dlrm model", "table sizes must be positive");
    offsets.push_back(rows);
    rows += size;
  }
  // The reference's per-table init: U(-sqrt(1/n), sqrt(1/n)) with n the table's rows.
  embeddings = register_parameter("embeddings", torch::empty({rows, dim}), /*requires_grad=*/false);
  for (size_t t = 0; t < tables.size(); ++t) {
    const double bound = std::sqrt(1.0 / static_cast<double>(tables[t]));
    embeddings.narrow(0, offsets[t], tables[t]).uniform_(-bound, bound);
  }
  table_offsets_ = register_buffer("table_offsets", torch::tensor(offsets, torch::kInt64));

  int64_t width = options_.dense_features();
  for (size_t i = 0; i < options_.bottom_mlp().size(); ++i) {
    bottom_.push_back(register_module("bottom_mlp_dense" + std::to_string(i + 1), make_linear(width, options_.bottom_mlp()[i])));
    width = options_.bottom_mlp()[i];
  }
  const int64_t vectors = static_cast<int64_t>(tables.size()) + 1;
  std::vector<int64_t> pair_rows, pair_columns;
  for (int64_t i = 0; i < vectors; ++i)
    for (int64_t j = 0; j < i; ++j) {
      pair_rows.push_back(i);
      pair_columns.push_back(j);
    }
  pair_rows_ = register_buffer("pair_rows", torch::tensor(pair_rows, torch::kInt64));
  pair_columns_ = register_buffer("pair_columns", torch::tensor(pair_columns, torch::kInt64));
  width = dim + static_cast<int64_t>(pair_rows.size());
  for (size_t i = 0; i < options_.top_mlp().size(); ++i) {
    top_.push_back(register_module("top_mlp_dense" + std::to_string(i + 1), make_linear(width, options_.top_mlp()[i])));
    width = options_.top_mlp()[i];
  }
}

EmbeddingLookup DlrmImpl::lookup(const torch::Tensor& sparse) const {
  torch::NoGradGuard no_grad;
  EmbeddingLookup result;
  result.rows = (sparse + table_offsets_).reshape({-1});
  result.vectors = embeddings.index_select(0, result.rows)
                       .view({sparse.size(0), sparse.size(1), options_.embedding_dim()});
  return result;
}

torch::Tensor DlrmImpl::predict(const torch::Tensor& dense, const torch::Tensor& vectors) {
  torch::Tensor x = dense;
  for (auto& layer : bottom_) x = torch::relu(layer->forward(x));
  const int64_t batch = x.size(0);
  const torch::Tensor all = torch::cat({x.unsqueeze(1), vectors}, 1);       // (batch, 27, dim)
  const torch::Tensor dots = torch::bmm(all, all.transpose(1, 2));           // (batch, 27, 27)
  const torch::Tensor pairs = dots.index({torch::indexing::Slice(), pair_rows_, pair_columns_});  // (batch, 351)
  x = torch::cat({x, pairs}, 1);
  for (size_t i = 0; i + 1 < top_.size(); ++i) x = torch::relu(top_[i]->forward(x));
  return top_.back()->forward(x).view({batch});
}

torch::Tensor DlrmImpl::forward(const torch::Tensor& dense, const torch::Tensor& sparse) {
  return predict(dense, lookup(sparse).vectors);
}

std::vector<torch::Tensor> DlrmImpl::mlp_parameters() const {
  std::vector<torch::Tensor> result;
  for (const auto& parameter : parameters())
    if (parameter.requires_grad()) result.push_back(parameter);
  return result;
}

void DlrmImpl::sgd_step(const torch::Tensor& rows_to_update, const torch::Tensor& row_gradients, double learning_rate) {
  torch::NoGradGuard no_grad;
  for (auto& parameter : parameters())
    if (parameter.grad().defined()) parameter.add_(parameter.grad(), -learning_rate);
  const int64_t dim = options_.embedding_dim();
  if (embeddings.is_cpu() && embeddings.is_contiguous() && embeddings.scalar_type() == torch::kFloat32) {
    // A plain loop over the touched rows: index_add_ on a 2-D CPU tensor dispatches one slice add per
    // index in LibTorch 1.13, which costs more than the arithmetic at these row counts.
    const torch::Tensor rows = rows_to_update.contiguous();
    const torch::Tensor grad = row_gradients.contiguous();
    const int64_t* row = rows.data_ptr<int64_t>();
    const float* g = grad.data_ptr<float>();
    float* table = embeddings.data_ptr<float>();
    const auto scale = static_cast<float>(-learning_rate);
    for (int64_t i = 0; i < rows.numel(); ++i) {
      float* target = table + row[i] * dim;
      const float* source = g + i * dim;
      for (int64_t k = 0; k < dim; ++k) target[k] += scale * source[k];
    }
  } else {
    embeddings.index_add_(0, rows_to_update, row_gradients, -learning_rate);
  }
}

int64_t DlrmImpl::forward_macs() const {
  int64_t macs = 0;
  for (const auto& layer : bottom_) macs += layer->weight.numel();
  for (const auto& layer : top_) macs += layer->weight.numel();
  const int64_t vectors = static_cast<int64_t>(options_.table_sizes().size()) + 1;
  return macs + vectors * vectors * options_.embedding_dim();
}

std::vector<std::string> DlrmImpl::initialized_tensor_names() const {
  std::vector<std::string> names{"embeddings"};
  for (size_t i = 0; i < bottom_.size(); ++i) names.push_back("bottom_mlp_dense" + std::to_string(i + 1));
  for (size_t i = 0; i < top_.size(); ++i) names.push_back("top_mlp_dense" + std::to_string(i + 1));
  return names;
}

TrainingStep training_step(Dlrm model, DataParallel& parallel, const TrainingLoop& loop, torch::Tensor dense,
                           torch::Tensor sparse, torch::Tensor labels, double learning_rate) {
  // Each micro-batch's looked-up vectors; backward leaves their gradients in them.
  auto lookups = std::make_shared<std::vector<EmbeddingLookup>>();
  TrainingStep step;
  step.samples = dense.size(0);
  step.loss = [=](const BatchSlice& slice) mutable {
    EmbeddingLookup& lookup = lookups->emplace_back(model->lookup(slice.of(sparse)));
    lookup.vectors.requires_grad_(true);
    return torch::binary_cross_entropy_with_logits(model->predict(slice.of(dense), lookup.vectors), slice.of(labels));
  };
  step.update = [=, &parallel, &loop]() mutable {
    std::vector<torch::Tensor> touched, touched_gradients;
    for (const EmbeddingLookup& lookup : *lookups) {
      if (!lookup.vectors.grad().defined()) fail("dlrm training step", "the embedding lookup has no gradient");
      touched.push_back(lookup.rows);
      touched_gradients.push_back(lookup.vectors.grad().reshape({lookup.rows.numel(), -1}));
    }
    torch::Tensor rows = touched.size() == 1 ? touched[0] : torch::cat(touched);
    torch::Tensor row_gradients = touched_gradients.size() == 1 ? touched_gradients[0] : torch::cat(touched_gradients);
    if (loop.gradient_scale() != 1) row_gradients = row_gradients / loop.gradient_scale();
    if (const int world = parallel.communicator.world(); world > 1) {
      const auto exchange_start = std::chrono::steady_clock::now();
      rows = dist::allgather_concat(parallel.communicator, rows);
      row_gradients = dist::allgather_concat(parallel.communicator, row_gradients).div_(world);
      parallel.row_exchange_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_start).count();
    }
    model->sgd_step(rows, row_gradients, learning_rate);
  };
  return step;
}

double DlrmLrSchedule::at(int64_t step) const {
  // The reference counts scheduler steps from 1 and holds the last rate it computed between phases, so the
  // plateau after warmup is base * (W - 1) / W, not base.
  const int64_t count = step + 1;
  const auto decayed = [&](int64_t into_decay) {
    const double left = static_cast<double>(decay_steps - into_decay) / static_cast<double>(decay_steps);
    return std::max(1e-7, base_lr * left * left);
  };
  if (count < warmup_steps) return base_lr * static_cast<double>(count) / static_cast<double>(warmup_steps);
  if (decay_steps > 0 && count >= decay_start_step + decay_steps) return decayed(decay_steps - 1);
  if (decay_steps > 0 && count >= decay_start_step) return decayed(count - decay_start_step);
  return warmup_steps > 1 ? base_lr * static_cast<double>(warmup_steps - 1) / static_cast<double>(warmup_steps) : base_lr;
}

}  // namespace trainbench::dlrm
