#include "parallel/tensor_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "util/error.h"

namespace trainbench::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::string sizes_of(torch::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + "]";
}
std::string sizes_of(const torch::Tensor& tensor) { return tensor.defined() ? sizes_of(tensor.sizes()) : "undefined"; }

void check_divisible(int64_t size, int parts, const std::string& where, const std::string& what) {
  if (parts < 1 || size % parts != 0)
    fail(where,
         what + " " + std::to_string(size) + " is not divisible by the tensor-parallel size " + std::to_string(parts));
}

int64_t wrap_dim(int64_t dim, int64_t dims) { return dim < 0 ? dim + dims : dim; }

// ---- Transfers without autograd: the halves the conjugate operators are made of. Each but identity gives a new
// tensor, not a view: autograd forbids changing in place a view that a custom function returned. ----

torch::Tensor identity(const torch::Tensor& input, Communicator&) { return input; }

torch::Tensor all_reduce(const torch::Tensor& input, Communicator& group) {
  torch::Tensor sum = input.clone(at::MemoryFormat::Contiguous);
  group.allreduce_sum(sum).wait();
  return sum;
}

torch::Tensor chunk_along(const torch::Tensor& input, int64_t dim, int rank, int parts) {
  dim = wrap_dim(dim, input.dim());
  const int64_t size = input.size(dim) / parts;
  return input.narrow(dim, rank * size, size).clone(at::MemoryFormat::Contiguous);
}

torch::Tensor split_last(const torch::Tensor& input, Communicator& group) {
  check_divisible(input.size(-1), group.world(), "scatter_to_tensor_parallel", "the last dimension");
  return chunk_along(input, -1, group.rank(), group.world());
}

torch::Tensor split_first(const torch::Tensor& input, Communicator& group) {
  check_divisible(input.size(0), group.world(), "sequence parallelism", "the first dimension");
  return chunk_along(input, 0, group.rank(), group.world());
}

// The ranks' equal tensors concatenated along `dim` in rank order. The communicator concatenates flat buffers,
// which is concatenation along dim 0; along another dimension the ranks' tensors arrive stacked along a new
// first dimension and are then laid side by side.
torch::Tensor gather_along(const torch::Tensor& input, int64_t dim, Communicator& group) {
  const torch::Tensor local = input.contiguous();
  dim = wrap_dim(dim, local.dim());
  std::vector<int64_t> shape = local.sizes().vec();
  if (dim == 0)
    shape[0] *= group.world();
  else
    shape.insert(shape.begin(), group.world());
  torch::Tensor gathered = torch::empty(shape, local.options());
  group.allgather(gathered, local).wait();
  return dim == 0 ? gathered : torch::cat(gathered.unbind(0), dim);
}

torch::Tensor gather_last(const torch::Tensor& input, Communicator& group) { return gather_along(input, -1, group); }
torch::Tensor gather_first(const torch::Tensor& input, Communicator& group) { return gather_along(input, 0, group); }

torch::Tensor reduce_scatter_first(const torch::Tensor& input, Communicator& group) {
  check_divisible(input.size(0), group.world(), "sequence parallelism", "the first dimension");
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] /= group.world();
  torch::Tensor output = torch::empty(shape, input.options());
  group.reduce_scatter_sum(output, input.contiguous()).wait();
  return output;
}

// ---- The conjugate operators: one autograd function per pair of transfers ----

using Transfer = torch::Tensor (*)(const torch::Tensor&, Communicator&);

// The group rides in the autograd context by address (an IValue holds no pointers); it outlives the graph.
Communicator& group_of(AutogradContext* context) {
  return *reinterpret_cast<Communicator*>(context->saved_data.at("group").toInt());
}

template <Transfer kForward, Transfer kBackward>
struct Conjugate : torch::autograd::Function<Conjugate<kForward, kBackward>> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& input, Communicator* group) {
    context->saved_data["group"] = reinterpret_cast<int64_t>(group);
    return kForward(input, *group);
  }
  static variable_list backward(AutogradContext* context, variable_list gradients) {
    return {kBackward(gradients[0], group_of(context)), torch::Tensor()};
  }
};

// A group of one makes every pair the identity: no graph node, no copy (Megatron bypasses them too).
template <Transfer kForward, Transfer kBackward>
torch::Tensor conjugate(const torch::Tensor& input, Communicator& group) {
  if (group.world() == 1) return input;
  return Conjugate<kForward, kBackward>::apply(input, &group);
}

// ---- Default weights: drawn whole as the unsplit torch::nn layer draws them ----

struct LinearDraw {
  torch::Tensor weight, bias;
};

// torch::nn::Linear's reset_parameters(): Kaiming-uniform weight (a = √5), bias uniform in ±1/√in.
LinearDraw draw_linear(int64_t in_features, int64_t out_features, bool bias) {
  torch::NoGradGuard no_grad;
  LinearDraw draw;
  draw.weight = torch::empty({out_features, in_features});
  torch::nn::init::kaiming_uniform_(draw.weight, std::sqrt(5.0));
  if (bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    draw.bias = torch::empty({out_features}).uniform_(-bound, bound);
  }
  return draw;
}

void check_full(const torch::Tensor& full, const std::vector<int64_t>& expected, const std::string& where,
                const std::string& what) {
  if (!full.defined() || full.sizes() != torch::IntArrayRef(expected))
    fail(where, "the full " + what + " is " + sizes_of(full) + ", not " + sizes_of(expected));
}

void copy_shard(torch::Tensor& parameter, const torch::Tensor& full, int64_t dim, Communicator& group) {
  torch::NoGradGuard no_grad;
  parameter.copy_(shard_of(full, dim, group.rank(), group.world()));
}

}  // namespace

torch::Tensor copy_to_tensor_parallel(const torch::Tensor& input, Communicator& group) {
  return conjugate<identity, all_reduce>(input, group);
}
torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& input, Communicator& group) {
  return conjugate<all_reduce, identity>(input, group);
}
torch::Tensor gather_from_tensor_parallel(const torch::Tensor& input, Communicator& group) {
  return conjugate<gather_last, split_last>(input, group);
}
torch::Tensor scatter_to_tensor_parallel(const torch::Tensor& input, Communicator& group) {
  return conjugate<split_last, gather_last>(input, group);
}
torch::Tensor scatter_to_sequence_parallel(const torch::Tensor& input, Communicator& group) {
  return conjugate<split_first, gather_first>(input, group);
}
torch::Tensor gather_from_sequence_parallel(const torch::Tensor& input, Communicator& group,
                                            bool tensor_parallel_output_grad) {
  if (tensor_parallel_output_grad) return conjugate<gather_first, reduce_scatter_first>(input, group);
  return conjugate<gather_first, split_first>(input, group);
}
torch::Tensor reduce_scatter_to_sequence_parallel(const torch::Tensor& input, Communicator& group) {
  return conjugate<reduce_scatter_first, gather_first>(input, group);
}

torch::Tensor shard_of(const torch::Tensor& full, int64_t dim, int rank, int parts) {
  if (dim < -full.dim() || dim >= full.dim())
    fail("shard_of", "dimension " + std::to_string(dim) + " of a tensor of " + sizes_of(full));
  if (parts < 1 || rank < 0 || rank >= parts)
    fail("shard_of", "shard " + std::to_string(rank) + " of " + std::to_string(parts));
  if (full.size(dim) % parts != 0)
    fail("shard_of", "dimension " + std::to_string(dim) + " of " + sizes_of(full) + " does not divide into " +
                         std::to_string(parts) + " shards");
  torch::NoGradGuard no_grad;
  return chunk_along(full, dim, rank, parts);
}

torch::Tensor gather_shards(const torch::Tensor& local, int64_t dim, Communicator& group) {
  if (dim < -local.dim() || dim >= local.dim())
    fail("gather_shards", "dimension " + std::to_string(dim) + " of a tensor of " + sizes_of(local));
  torch::NoGradGuard no_grad;
  if (group.world() == 1) return local.detach().clone();
  return gather_along(local.detach(), dim, group);
}

// ---- ColumnParallelLinear ----

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const ColumnParallelLinearOptions& options, Communicator& group)
    : options(options), group_(&group) {
  check_divisible(options.out_features(), group.world(), "ColumnParallelLinear", "out_features");
  reset();
}

void ColumnParallelLinearImpl::reset() {
  const int64_t rows = options.out_features() / group_->world();
  weight = register_parameter("weight", torch::empty({rows, options.in_features()}));
  bias = options.bias() ? register_parameter("bias", torch::empty({rows})) : register_parameter("bias", {}, false);
  reset_parameters();
}

void ColumnParallelLinearImpl::reset_parameters() {
  const LinearDraw draw = draw_linear(options.in_features(), options.out_features(), options.bias());
  load_full(draw.weight, draw.bias);
}

void ColumnParallelLinearImpl::load_full(const torch::Tensor& full_weight, const torch::Tensor& full_bias) {
  check_full(full_weight, {options.out_features(), options.in_features()}, "ColumnParallelLinear", "weight");
  copy_shard(weight, full_weight, 0, *group_);
  if (!bias.defined()) return;
  check_full(full_bias, {options.out_features()}, "ColumnParallelLinear", "bias");
  copy_shard(bias, full_bias, 0, *group_);
}

torch::Tensor ColumnParallelLinearImpl::full_weight() const { return gather_shards(weight, 0, *group_); }

torch::Tensor ColumnParallelLinearImpl::full_bias() const {
  return bias.defined() ? gather_shards(bias, 0, *group_) : torch::Tensor();
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& input) {
  const torch::Tensor whole_input = options.sequence_parallel() ? gather_from_sequence_parallel(input, *group_)
                                                                : copy_to_tensor_parallel(input, *group_);
  const torch::Tensor output = torch::linear(whole_input, weight, bias);
  return options.gather_output() ? gather_from_tensor_parallel(output, *group_) : output;
}

void ColumnParallelLinearImpl::pretty_print(std::ostream& stream) const {
  stream << "trainbench::parallel::ColumnParallelLinear(in_features=" << options.in_features()
         << ", out_features=" << options.out_features() << ", bias=" << std::boolalpha << options.bias()
         << ", gather_output=" << options.gather_output() << ", sequence_parallel=" << options.sequence_parallel()
         << ", tensor_parallel=" << group_->world() << ")";
}

// ---- RowParallelLinear ----

RowParallelLinearImpl::RowParallelLinearImpl(const RowParallelLinearOptions& options, Communicator& group)
    : options(options), group_(&group) {
  check_divisible(options.in_features(), group.world(), "RowParallelLinear", "in_features");
  reset();
}

void RowParallelLinearImpl::reset() {
  const int64_t columns = options.in_features() / group_->world();
  weight = register_parameter("weight", torch::empty({options.out_features(), columns}));
  bias = options.bias() ? register_parameter("bias", torch::empty({options.out_features()}))
                        : register_parameter("bias", {}, false);
  reset_parameters();
}

void RowParallelLinearImpl::reset_parameters() {
  const LinearDraw draw = draw_linear(options.in_features(), options.out_features(), options.bias());
  load_full(draw.weight, draw.bias);
}

void RowParallelLinearImpl::load_full(const torch::Tensor& full_weight, const torch::Tensor& full_bias) {
  check_full(full_weight, {options.out_features(), options.in_features()}, "RowParallelLinear", "weight");
  copy_shard(weight, full_weight, 1, *group_);
  if (!bias.defined()) return;
  check_full(full_bias, {options.out_features()}, "RowParallelLinear", "bias");
  torch::NoGradGuard no_grad;
  bias.copy_(full_bias);
}

torch::Tensor RowParallelLinearImpl::full_weight() const { return gather_shards(weight, 1, *group_); }

torch::Tensor RowParallelLinearImpl::full_bias() const { return bias.defined() ? bias.detach().clone() : bias; }

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& input) {
  if (options.sequence_parallel() && input.dim() > 0 && input.size(0) % group_->world() != 0)
    fail("RowParallelLinear",
         "sequence_parallel splits the first dimension of the output, " + std::to_string(input.size(0)) +
             ", which is not divisible by the tensor-parallel size " + std::to_string(group_->world()));
  const torch::Tensor parallel_input = options.input_is_parallel() ? input : scatter_to_tensor_parallel(input, *group_);
  const torch::Tensor partial = torch::linear(parallel_input, weight);
  const torch::Tensor output = options.sequence_parallel() ? reduce_scatter_to_sequence_parallel(partial, *group_)
                                                           : reduce_from_tensor_parallel(partial, *group_);
  if (!bias.defined()) return output;
  // Under sequence parallelism this rank's rows hold a part of the bias's gradient: f sums the parts.
  return output + (options.sequence_parallel() ? copy_to_tensor_parallel(bias, *group_) : bias);
}

void RowParallelLinearImpl::pretty_print(std::ostream& stream) const {
  stream << "trainbench::parallel::RowParallelLinear(in_features=" << options.in_features()
         << ", out_features=" << options.out_features() << ", bias=" << std::boolalpha << options.bias()
         << ", input_is_parallel=" << options.input_is_parallel()
         << ", sequence_parallel=" << options.sequence_parallel() << ", tensor_parallel=" << group_->world() << ")";
}

// ---- VocabParallelEmbedding ----

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(const VocabParallelEmbeddingOptions& options,
                                                       Communicator& group)
    : options(options), group_(&group) {
  check_divisible(options.num_embeddings(), group.world(), "VocabParallelEmbedding", "num_embeddings");
  reset();
}

void VocabParallelEmbeddingImpl::reset() {
  weight = register_parameter("weight", torch::empty({vocab_end() - vocab_start(), options.embedding_dim()}));
  reset_parameters();
}

// torch::nn::Embedding's draw: normal(0, 1).
void VocabParallelEmbeddingImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  load_full(torch::empty({options.num_embeddings(), options.embedding_dim()}).normal_());
}

int64_t VocabParallelEmbeddingImpl::vocab_start() const {
  return group_->rank() * (options.num_embeddings() / group_->world());
}

int64_t VocabParallelEmbeddingImpl::vocab_end() const {
  return vocab_start() + options.num_embeddings() / group_->world();
}

void VocabParallelEmbeddingImpl::load_full(const torch::Tensor& full_weight) {
  check_full(full_weight, {options.num_embeddings(), options.embedding_dim()}, "VocabParallelEmbedding", "weight");
  copy_shard(weight, full_weight, 0, *group_);
}

torch::Tensor VocabParallelEmbeddingImpl::full_weight() const { return gather_shards(weight, 0, *group_); }

torch::Tensor VocabParallelEmbeddingImpl::forward(const torch::Tensor& ids) {
  if (group_->world() == 1) return torch::embedding(weight, ids);
  // Ids another rank holds look up row 0 here, and their rows are zeroed before the sum over ranks.
  const torch::Tensor elsewhere = (ids < vocab_start()) | (ids >= vocab_end());
  const torch::Tensor local_ids = (ids - vocab_start()).masked_fill(elsewhere, 0);
  const torch::Tensor rows = torch::embedding(weight, local_ids).masked_fill(elsewhere.unsqueeze(-1), 0);
  return reduce_from_tensor_parallel(rows, *group_);
}

void VocabParallelEmbeddingImpl::pretty_print(std::ostream& stream) const {
  stream << "trainbench::parallel::VocabParallelEmbedding(num_embeddings=" << options.num_embeddings()
         << ", embedding_dim=" << options.embedding_dim() << ", tensor_parallel=" << group_->world() << ")";
}

// ---- Cross-entropy and argmax over vocabulary-parallel logits ----

namespace {

void check_vocab_logits(const torch::Tensor& local_logits, Communicator& group, int64_t vocab_limit,
                        const std::string& where) {
  if (!local_logits.defined() || local_logits.dim() < 1) fail(where, "the logits need a vocabulary dimension");
  const int64_t vocab = local_logits.size(-1) * group.world();
  if (vocab_limit < 1 || vocab_limit > vocab)
    fail(where, "vocab_limit " + std::to_string(vocab_limit) + " is outside the " + std::to_string(vocab) +
                    " columns of the logits (" + std::to_string(group.world()) + " ranks of " + sizes_of(local_logits) +
                    ")");
}

// [rows, V/T] logits with the padding columns (global index >= vocab_limit) at -inf, which takes them out of
// the softmax and the argmax; the input itself where this rank holds no padding.
torch::Tensor without_padding(const torch::Tensor& rows, int64_t first_column, int64_t vocab_limit) {
  const int64_t columns = rows.size(1);
  const int64_t real = std::clamp<int64_t>(vocab_limit - first_column, 0, columns);
  if (real == columns) return rows;
  torch::Tensor masked = rows.clone();
  masked.narrow(1, real, columns - real).fill_(-std::numeric_limits<double>::infinity());
  return masked;
}

// Each row's maximum over every rank's columns. The communicator only sums, so the ranks' maxima are gathered.
torch::Tensor global_row_max(const torch::Tensor& rows, Communicator& group) {
  const torch::Tensor local_max = rows.amax(1).contiguous();
  if (group.world() == 1) return local_max;
  torch::Tensor all = torch::empty({group.world(), local_max.size(0)}, local_max.options());
  group.allgather(all, local_max).wait();
  return all.amax(0);
}

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& local_logits, const torch::Tensor& target,
                               Communicator* group, int64_t vocab_limit) {
    const int64_t columns = local_logits.size(-1);
    const int64_t first_column = group->rank() * columns;
    const torch::Tensor rows = without_padding(local_logits.reshape({-1, columns}), first_column, vocab_limit);
    const torch::Tensor shifted = rows - global_row_max(rows, *group).unsqueeze(1);

    const torch::Tensor flat_target = target.reshape({-1});
    const torch::Tensor owned = (flat_target >= first_column) & (flat_target < first_column + columns);
    const torch::Tensor local_target = (flat_target - first_column).masked_fill(~owned, 0);
    const torch::Tensor target_logit = shifted.gather(1, local_target.unsqueeze(1)).squeeze(1).masked_fill(~owned, 0);
    torch::Tensor softmax = shifted.exp();
    // One all-reduce carries both sums: the target's logit (held by one rank) and the softmax's denominator.
    torch::Tensor sums = torch::stack({target_logit, softmax.sum(1)});
    group->allreduce_sum(sums).wait();
    softmax.div_(sums[1].unsqueeze(1));

    context->save_for_backward({softmax, owned, local_target});
    context->saved_data["logits_shape"] = local_logits.sizes();
    // Shaped before the subtraction, so the loss is no view (which autograd would not let be changed in place).
    return sums[1].view(target.sizes()).log() - sums[0].view(target.sizes());
  }

  // d loss / d logit = softmax - onehot(target), the one only on the rank holding the target; no collective.
  static variable_list backward(AutogradContext* context, variable_list gradients) {
    const variable_list saved = context->get_saved_variables();
    const torch::Tensor& softmax = saved[0];
    const torch::Tensor row_gradient = gradients[0].reshape({-1, 1});
    torch::Tensor gradient = softmax * row_gradient;
    gradient.scatter_add_(1, saved[2].unsqueeze(1), -saved[1].to(gradient.scalar_type()).unsqueeze(1) * row_gradient);
    return {gradient.view(context->saved_data.at("logits_shape").toIntVector()), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& local_logits, const torch::Tensor& target,
                                           Communicator& group, int64_t vocab_limit) {
  check_vocab_logits(local_logits, group, vocab_limit, "vocab_parallel_cross_entropy");
  if (!target.defined() || target.sizes() != local_logits.sizes().slice(0, local_logits.dim() - 1))
    fail("vocab_parallel_cross_entropy",
         "the targets " + sizes_of(target) + " do not match the logits " + sizes_of(local_logits));
  return VocabParallelCrossEntropy::apply(local_logits, target, &group, vocab_limit);
}

torch::Tensor vocab_parallel_argmax(const torch::Tensor& local_logits, Communicator& group, int64_t vocab_limit) {
  check_vocab_logits(local_logits, group, vocab_limit, "vocab_parallel_argmax");
  torch::NoGradGuard no_grad;
  const int64_t columns = local_logits.size(-1);
  const int64_t first_column = group.rank() * columns;
  const torch::Tensor rows = without_padding(local_logits.reshape({-1, columns}), first_column, vocab_limit);
  const torch::Tensor local_index = rows.argmax(1);
  // Each rank's best value and its global id travel in one all-gather, as doubles: exact for both.
  const torch::Tensor best = torch::stack({rows.gather(1, local_index.unsqueeze(1)).squeeze(1).to(torch::kDouble),
                                           (local_index + first_column).to(torch::kDouble)});
  torch::Tensor all = torch::empty({group.world(), 2, best.size(1)}, best.options());
  group.allgather(all, best).wait();
  const torch::Tensor values = all.select(1, 0), ids = all.select(1, 1);
  // Ranks hold ascending ids, so the lowest rank holding the maximum holds its lowest id.
  const torch::Tensor first_rank = values.eq(values.amax(0)).to(torch::kFloat).argmax(0);
  const std::vector<int64_t> shape = local_logits.sizes().slice(0, local_logits.dim() - 1).vec();
  return ids.gather(0, first_rank.unsqueeze(0)).squeeze(0).to(torch::kLong).view(shape);
}

}  // namespace trainbench::parallel
