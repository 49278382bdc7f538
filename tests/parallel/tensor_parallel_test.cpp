// The tensor-parallel layer (parallel/tensor_parallel.h) at T = 2 and 4 ranks in threads over Gloo: every output
// and every gradient (of the input and of each parameter, gathered) against the unsplit torch computation on the
// whole tensors, to 1e-6; then, at T = 2, against Megatron-LM's own mpu code (MegatronParity).
#include "parallel/tensor_parallel.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/python_script.h"
#include "support/torch_pickle.h"
#include "support/two_ranks.h"
#include "util/error.h"

namespace trainbench::parallel {
namespace {

constexpr double kTolerance = 1e-6;  // relative and absolute

// Chunk `rank` of `parts` along `dim`, by torch itself (not by the shard_of under test).
torch::Tensor piece(const torch::Tensor& whole, int64_t dim, int rank, int parts) {
  return whole.chunk(parts, dim)[rank];
}

// What a rank found wrong. A rank notes a mismatch and goes on, so that every rank keeps issuing the same
// collectives (one that threw midway would leave the others waiting for it); raise() ends its body with the list.
class Mismatches {
 public:
  void check(const torch::Tensor& actual, const torch::Tensor& expected, const std::string& what) {
    if (!actual.defined() || actual.sizes() != expected.sizes()) {
      note(what + ": shape " + (actual.defined() ? describe(actual.sizes()) : "undefined") + ", expected " +
           describe(expected.sizes()));
    } else if (!torch::allclose(actual, expected, kTolerance, kTolerance)) {
      std::ostringstream text;
      text << what << ": max difference " << (actual - expected).abs().max().item<double>();
      note(text.str());
    }
  }
  void check_equal(const torch::Tensor& actual, const torch::Tensor& expected, const std::string& what) {
    if (!actual.defined() || actual.sizes() != expected.sizes() || !torch::equal(actual, expected)) {
      std::ostringstream text;
      text << what << ": got " << actual << " expected " << expected;
      note(text.str());
    }
  }
  // `action` must throw trainbench::Error whose message holds `expected`.
  void check_refused(const std::function<void()>& action, const std::string& expected) {
    try {
      action();
      note("not refused: " + expected);
    } catch (const Error& error) {
      if (std::string(error.what()).find(expected) == std::string::npos)
        note("refused as \"" + std::string(error.what()) + "\", expected \"" + expected + "\"");
    }
  }
  void note(const std::string& what) { found_ += (found_.empty() ? "" : "\n") + what; }
  void raise() const {
    if (!found_.empty()) throw std::runtime_error(found_);
  }

 private:
  static std::string describe(torch::IntArrayRef sizes) {
    std::ostringstream text;
    text << sizes;
    return text.str();
  }
  std::string found_;
};

// The unsplit computation: `compute` on leaf copies of `inputs` (the floating ones require grad), then backward
// from sum(output · upstream). gradients[i] is inputs[i]'s (undefined for ids).
struct Reference {
  torch::Tensor output;
  std::vector<torch::Tensor> gradients;
};

using Computation = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

Reference unsplit(const std::vector<torch::Tensor>& inputs, const Computation& compute, const torch::Tensor& upstream) {
  std::vector<torch::Tensor> leaves;
  for (const auto& input : inputs)
    leaves.push_back(input.is_floating_point() ? input.clone().requires_grad_(true) : input);
  Reference reference;
  reference.output = compute(leaves);
  (reference.output * upstream).sum().backward();
  reference.output = reference.output.detach();
  for (const auto& leaf : leaves) reference.gradients.push_back(leaf.requires_grad() ? leaf.grad() : torch::Tensor());
  return reference;
}

torch::Tensor linear_of(const std::vector<torch::Tensor>& t) {
  return t.size() > 2 ? torch::linear(t[0], t[1], t[2]) : torch::linear(t[0], t[1]);
}

// Runs `body` on every rank of a group of T (threads over Gloo) and expects no rank to report a failure.
void run_group(int parts, const std::function<void(Communicator&, Mismatches&)>& body) {
  const std::vector<std::string> failures = testing::run_ranks(parts, [&](Communicator& group) {
    Mismatches mismatches;
    body(group, mismatches);
    mismatches.raise();
  });
  EXPECT_EQ(failures, std::vector<std::string>(static_cast<size_t>(parts), ""));
}

class TensorParallel : public ::testing::TestWithParam<int> {
 protected:
  int parts() const { return GetParam(); }
};

// Forward and backward of each conjugate operator: inputs and upstream gradients that differ by rank (the factor
// rank + 1) show which ranks' values were summed.
TEST_P(TensorParallel, ConjugateOperatorsMoveValuesForwardAndGradientsBackward) {
  const int T = parts();
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({2 * T, 3, 2 * T}), u = torch::randn({2 * T, 3, 2 * T});
  const double all = T * (T + 1) / 2.0;  // the sum of the factors
  using Operator = std::function<torch::Tensor(const torch::Tensor&, Communicator&)>;
  using Value = std::function<torch::Tensor(int rank, double factor)>;
  struct Case {
    std::string name;
    Operator op;
    Value input, output, upstream, gradient;
  };
  const auto last = [&](const torch::Tensor& t, int rank) { return piece(t, -1, rank, T); };
  const auto first = [&](const torch::Tensor& t, int rank) { return piece(t, 0, rank, T); };
  const std::vector<Case> cases{
      {"copy_to_tensor_parallel", copy_to_tensor_parallel, [&](int, double) { return x; },
       [&](int, double) { return x; }, [&](int, double f) { return u * f; }, [&](int, double) { return u * all; }},
      {"reduce_from_tensor_parallel", reduce_from_tensor_parallel, [&](int, double f) { return x * f; },
       [&](int, double) { return x * all; }, [&](int, double) { return u; }, [&](int, double) { return u; }},
      {"gather_from_tensor_parallel", gather_from_tensor_parallel, [&](int r, double) { return last(x, r); },
       [&](int, double) { return x; }, [&](int, double) { return u; }, [&](int r, double) { return last(u, r); }},
      {"scatter_to_tensor_parallel", scatter_to_tensor_parallel, [&](int, double) { return x; },
       [&](int r, double) { return last(x, r); }, [&](int r, double) { return last(u, r); },
       [&](int, double) { return u; }},
      {"scatter_to_sequence_parallel", scatter_to_sequence_parallel, [&](int, double) { return x; },
       [&](int r, double) { return first(x, r); }, [&](int r, double) { return first(u, r); },
       [&](int, double) { return u; }},
      {"gather_from_sequence_parallel",
       [](const torch::Tensor& t, Communicator& g) { return gather_from_sequence_parallel(t, g); },
       [&](int r, double) { return first(x, r); }, [&](int, double) { return x; }, [&](int, double f) { return u * f; },
       [&](int r, double) { return first(u, r) * all; }},
      {"gather_from_sequence_parallel without tensor-parallel gradients",
       [](const torch::Tensor& t, Communicator& g) { return gather_from_sequence_parallel(t, g, false); },
       [&](int r, double) { return first(x, r); }, [&](int, double) { return x; }, [&](int, double f) { return u * f; },
       [&](int r, double f) { return first(u, r) * f; }},
      {"reduce_scatter_to_sequence_parallel", reduce_scatter_to_sequence_parallel, [&](int, double f) { return x * f; },
       [&](int r, double) { return first(x, r) * all; }, [&](int r, double) { return first(u, r); },
       [&](int, double) { return u; }},
  };
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    const int rank = group.rank();
    const double factor = rank + 1;
    for (const Case& c : cases) {
      const torch::Tensor input = c.input(rank, factor).clone().requires_grad_(true);
      const torch::Tensor output = c.op(input, group);
      (output * c.upstream(rank, factor)).sum().backward();
      mismatches.check(output, c.output(rank, factor), c.name + " forward");
      mismatches.check(input.grad(), c.gradient(rank, factor), c.name + " backward");
    }
  });
}

TEST_P(TensorParallel, ShardsOfAWholeTensorGatherBackToIt) {
  const int T = parts();
  torch::manual_seed(4);
  const torch::Tensor whole = torch::randn({2 * T, 3 * T, 4}).requires_grad_(true);
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    for (const int64_t dim : {0, 1, -1}) {
      const std::string name = "dim " + std::to_string(dim);
      const torch::Tensor shard = shard_of(whole, dim, group.rank(), T);
      mismatches.check_equal(shard, piece(whole, dim, group.rank(), T), name + " shard");
      if (!shard.is_contiguous() || shard.requires_grad()) mismatches.note(name + ": not a plain contiguous tensor");
      const torch::Tensor gathered = gather_shards(shard, dim, group);
      mismatches.check_equal(gathered, whole.detach(), name + " gathered");
    }
  });
}

TEST_P(TensorParallel, ColumnParallelLinearMatchesTorchLinear) {
  const int T = parts();
  const int64_t in = 6, out = 2 * T;
  torch::manual_seed(11);
  const torch::Tensor x = torch::randn({2 * T, 3, in}), weight = torch::randn({out, in}) / std::sqrt(in),
                      bias = torch::randn({out}), upstream = torch::randn({2 * T, 3, out});
  const Reference with_bias = unsplit({x, weight, bias}, linear_of, upstream);
  const Reference without_bias = unsplit({x, weight}, linear_of, upstream);
  struct Variant {
    bool bias, gather_output, sequence_parallel;
  };
  const std::vector<Variant> variants{
      {true, false, false}, {true, true, false}, {true, false, true}, {true, true, true}, {false, false, false}};
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    const int rank = group.rank();
    for (const Variant& v : variants) {
      const std::string name = std::string("bias ") + (v.bias ? "1" : "0") + " gather_output " +
                               (v.gather_output ? "1" : "0") + " sequence_parallel " +
                               (v.sequence_parallel ? "1" : "0");
      const Reference& reference = v.bias ? with_bias : without_bias;
      ColumnParallelLinear layer(ColumnParallelLinearOptions(in, out)
                                     .bias(v.bias)
                                     .gather_output(v.gather_output)
                                     .sequence_parallel(v.sequence_parallel),
                                 group);
      layer->load_full(weight, bias);
      const auto split_output = [&](const torch::Tensor& t) { return v.gather_output ? t : piece(t, -1, rank, T); };
      const auto split_input = [&](const torch::Tensor& t) { return v.sequence_parallel ? piece(t, 0, rank, T) : t; };
      const torch::Tensor input = split_input(x).clone().requires_grad_(true);
      const torch::Tensor output = layer(input);
      (output * split_output(upstream)).sum().backward();
      mismatches.check(output, split_output(reference.output), name + ": output");
      mismatches.check(input.grad(), split_input(reference.gradients[0]), name + ": input gradient");
      mismatches.check(gather_shards(layer->weight.grad(), 0, group), reference.gradients[1],
                       name + ": weight gradient");
      if (v.bias)
        mismatches.check(gather_shards(layer->bias.grad(), 0, group), reference.gradients[2], name + ": bias");
      if (!v.bias && layer->bias.defined()) mismatches.note(name + ": a bias was made");
    }
  });
}

TEST_P(TensorParallel, RowParallelLinearMatchesTorchLinear) {
  const int T = parts();
  const int64_t in = 8, out = 5;
  torch::manual_seed(12);
  const torch::Tensor x = torch::randn({2 * T, 3, in}), weight = torch::randn({out, in}) / std::sqrt(in),
                      bias = torch::randn({out}), upstream = torch::randn({2 * T, 3, out});
  const Reference with_bias = unsplit({x, weight, bias}, linear_of, upstream);
  const Reference without_bias = unsplit({x, weight}, linear_of, upstream);
  struct Variant {
    bool bias, input_is_parallel, sequence_parallel;
  };
  const std::vector<Variant> variants{
      {true, true, false}, {true, false, false}, {true, true, true}, {true, false, true}, {false, true, false}};
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    const int rank = group.rank();
    for (const Variant& v : variants) {
      const std::string name = std::string("bias ") + (v.bias ? "1" : "0") + " input_is_parallel " +
                               (v.input_is_parallel ? "1" : "0") + " sequence_parallel " +
                               (v.sequence_parallel ? "1" : "0");
      const Reference& reference = v.bias ? with_bias : without_bias;
      RowParallelLinear layer(RowParallelLinearOptions(in, out)
                                  .bias(v.bias)
                                  .input_is_parallel(v.input_is_parallel)
                                  .sequence_parallel(v.sequence_parallel),
                              group);
      layer->load_full(weight, bias);
      const auto split_input = [&](const torch::Tensor& t) { return v.input_is_parallel ? piece(t, -1, rank, T) : t; };
      const auto split_output = [&](const torch::Tensor& t) { return v.sequence_parallel ? piece(t, 0, rank, T) : t; };
      const torch::Tensor input = split_input(x).clone().requires_grad_(true);
      const torch::Tensor output = layer(input);
      (output * split_output(upstream)).sum().backward();
      mismatches.check(output, split_output(reference.output), name + ": output");
      mismatches.check(input.grad(), split_input(reference.gradients[0]), name + ": input gradient");
      mismatches.check(gather_shards(layer->weight.grad(), 1, group), reference.gradients[1],
                       name + ": weight gradient");
      // The bias is whole on every rank, and so must its gradient be (summed over the rows of every rank).
      if (v.bias) mismatches.check(layer->bias.grad(), reference.gradients[2], name + ": bias gradient");
    }
  });
}

TEST_P(TensorParallel, ColumnThenRowMlpMatchesTheUnsplitMlp) {
  const int T = parts();
  const int64_t hidden = 6, ffn = 8;
  torch::manual_seed(13);
  const torch::Tensor x = torch::randn({2 * T, 2, hidden}), upstream = torch::randn({2 * T, 2, hidden});
  const torch::Tensor w1 = torch::randn({ffn, hidden}) / std::sqrt(hidden), b1 = torch::randn({ffn}),
                      w2 = torch::randn({hidden, ffn}) / std::sqrt(ffn), b2 = torch::randn({hidden});
  const Reference reference = unsplit(
      {x, w1, b1, w2, b2},
      [](const std::vector<torch::Tensor>& t) {
        return torch::linear(torch::gelu(torch::linear(t[0], t[1], t[2])), t[3], t[4]);
      },
      upstream);
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    const int rank = group.rank();
    for (const bool sequence_parallel : {false, true}) {
      const std::string name = sequence_parallel ? "sequence-parallel MLP" : "MLP";
      ColumnParallelLinear up(ColumnParallelLinearOptions(hidden, ffn).sequence_parallel(sequence_parallel), group);
      RowParallelLinear down(RowParallelLinearOptions(ffn, hidden).sequence_parallel(sequence_parallel), group);
      up->load_full(w1, b1);
      down->load_full(w2, b2);
      const auto split = [&](const torch::Tensor& t) { return sequence_parallel ? piece(t, 0, rank, T) : t; };
      const torch::Tensor input = split(x).clone().requires_grad_(true);
      const torch::Tensor output = down(torch::gelu(up(input)));
      (output * split(upstream)).sum().backward();
      mismatches.check(output, split(reference.output), name + ": output");
      mismatches.check(input.grad(), split(reference.gradients[0]), name + ": input gradient");
      mismatches.check(gather_shards(up->weight.grad(), 0, group), reference.gradients[1], name + ": first weight");
      mismatches.check(gather_shards(up->bias.grad(), 0, group), reference.gradients[2], name + ": first bias");
      mismatches.check(gather_shards(down->weight.grad(), 1, group), reference.gradients[3], name + ": second weight");
      mismatches.check(down->bias.grad(), reference.gradients[4], name + ": second bias");
    }
  });
}

TEST_P(TensorParallel, VocabParallelEmbeddingMatchesTorchEmbedding) {
  const int T = parts();
  const int64_t vocab = padded_vocab_size(45, 4, T), dim = 5;
  ASSERT_EQ(vocab, 48);
  torch::manual_seed(14);
  const torch::Tensor weight = torch::randn({vocab, dim}), upstream = torch::randn({3, 4, dim});
  torch::Tensor ids = torch::randint(vocab, {3, 4}, torch::kLong);
  // Every rank's first id, the last id, and one id twice (its gradient rows add up).
  for (int rank = 0; rank < T; ++rank) ids.view(-1)[rank] = rank * vocab / T;
  ids.view(-1)[T] = vocab - 1;
  ids.view(-1)[T + 1] = 7;
  ids.view(-1)[T + 2] = 7;
  const Reference reference = unsplit(
      {ids, weight}, [](const std::vector<torch::Tensor>& t) { return torch::embedding(t[1], t[0]); }, upstream);
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    VocabParallelEmbedding table(VocabParallelEmbeddingOptions(vocab, dim), group);
    if (table->vocab_start() != group.rank() * vocab / T || table->vocab_end() != (group.rank() + 1) * vocab / T)
      mismatches.note("vocabulary range " + std::to_string(table->vocab_start()) + ".." +
                      std::to_string(table->vocab_end()));
    table->load_full(weight);
    const torch::Tensor output = table(ids);
    (output * upstream).sum().backward();
    mismatches.check(output, reference.output, "output");
    mismatches.check(gather_shards(table->weight.grad(), 0, group), reference.gradients[1], "weight gradient");
  });
}

// With a padded vocabulary the loss and gradients are those over the real columns alone; the padding holds large
// logits, which would change both if they took part.
TEST_P(TensorParallel, VocabParallelCrossEntropyMatchesTorchOnTheRealVocabulary) {
  const int T = parts();
  const int64_t real = 45, vocab = padded_vocab_size(real, 4, T);
  torch::manual_seed(15);
  torch::Tensor logits = 2 * torch::randn({3, 4, vocab});
  logits.narrow(-1, real, vocab - real).fill_(50);
  const torch::Tensor target = torch::randint(real, {3, 4}, torch::kLong), weight = torch::randn({3, 4});
  const auto torch_loss = [&](int64_t columns) {
    return [columns](const std::vector<torch::Tensor>& t) {
      const torch::Tensor flat = t[0].narrow(-1, 0, columns).reshape({-1, columns});
      return torch::nn::functional::cross_entropy(
                 flat, t[1].reshape({-1}), torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
          .view(t[1].sizes());
    };
  };
  const Reference padded = unsplit({logits, target}, torch_loss(real), weight);
  const Reference unpadded = unsplit({logits, target}, torch_loss(vocab), weight);
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    for (const int64_t limit : {real, vocab}) {
      const std::string name = "vocab_limit " + std::to_string(limit);
      const Reference& reference = limit == real ? padded : unpadded;
      const torch::Tensor local = piece(logits, -1, group.rank(), T).clone().requires_grad_(true);
      const torch::Tensor loss = vocab_parallel_cross_entropy(local, target, group, limit);
      (loss * weight).sum().backward();
      mismatches.check(loss, reference.output, name + ": loss");
      mismatches.check(local.grad(), piece(reference.gradients[0], -1, group.rank(), T), name + ": logit gradient");
    }
  });
}

TEST_P(TensorParallel, VocabParallelArgmaxTakesTheLowestIdOfTheMaximum) {
  const int T = parts();
  const int64_t real = 45, vocab = padded_vocab_size(real, 4, T), last_rank_start = vocab / T * (T - 1);
  torch::manual_seed(16);
  torch::Tensor logits = torch::randn({2, 3, vocab});
  torch::Tensor rows = logits.view({6, vocab});
  // Row 0: a tie between the first and the last rank; row 1: a tie within a rank; row 2: padding that must not
  // win; row 3: the last real id.
  for (const int64_t column : {int64_t{1}, last_rank_start + 1}) rows[0][column] = 10;
  for (const int64_t column : {3, 4}) rows[1][column] = 10;
  rows[2][46] = 100;
  rows[2][40] = 10;
  rows[3][44] = 10;
  const torch::Tensor expected = logits.narrow(-1, 0, real).argmax(-1);
  ASSERT_EQ(expected[0][0].item<int64_t>(), 1);
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    const torch::Tensor local = piece(logits, -1, group.rank(), T).contiguous();
    mismatches.check_equal(vocab_parallel_argmax(local, group, real), expected, "argmax");
    mismatches.check_equal(vocab_parallel_argmax(local, group, vocab), logits.argmax(-1), "argmax unpadded");
  });
}

// Ranks seeded alike draw one model, the unsplit torch::nn layer's, at any T.
TEST_P(TensorParallel, DefaultWeightsAreTheUnsplitTorchLayersWeights) {
  const int T = parts();
  torch::manual_seed(5);
  torch::nn::Linear linear(2 * T, 4 * T);
  torch::manual_seed(5);
  torch::nn::Embedding embedding(4 * T, 3);
  std::mutex seeding;  // the ranks share the default generator
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    ColumnParallelLinear column{nullptr};
    RowParallelLinear row{nullptr};
    VocabParallelEmbedding table{nullptr};
    {
      std::lock_guard<std::mutex> lock(seeding);
      torch::manual_seed(5);
      column = ColumnParallelLinear(ColumnParallelLinearOptions(2 * T, 4 * T), group);
      torch::manual_seed(5);
      row = RowParallelLinear(RowParallelLinearOptions(2 * T, 4 * T), group);
      torch::manual_seed(5);
      table = VocabParallelEmbedding(VocabParallelEmbeddingOptions(4 * T, 3), group);
    }
    mismatches.check_equal(column->full_weight(), linear->weight.detach(), "column weight");
    mismatches.check_equal(column->full_bias(), linear->bias.detach(), "column bias");
    mismatches.check_equal(row->full_weight(), linear->weight.detach(), "row weight");
    mismatches.check_equal(row->full_bias(), linear->bias.detach(), "row bias");
    mismatches.check_equal(table->full_weight(), embedding->weight.detach(), "embedding");
  });
}

TEST_P(TensorParallel, IndivisibleSizesAreRefusedNamingTheLayer) {
  const int T = parts();
  const int64_t odd = 2 * T + 1;
  const std::string indivisible =
      std::to_string(odd) + " is not divisible by the tensor-parallel size " + std::to_string(T);
  run_group(T, [&](Communicator& group, Mismatches& mismatches) {
    mismatches.check_refused([&] { ColumnParallelLinear(ColumnParallelLinearOptions(4, odd), group); },
                             "ColumnParallelLinear: out_features " + indivisible);
    mismatches.check_refused([&] { RowParallelLinear(RowParallelLinearOptions(odd, 4), group); },
                             "RowParallelLinear: in_features " + indivisible);
    mismatches.check_refused([&] { VocabParallelEmbedding(VocabParallelEmbeddingOptions(odd, 4), group); },
                             "VocabParallelEmbedding: num_embeddings " + indivisible);
    RowParallelLinear row(RowParallelLinearOptions(2 * T, 3).sequence_parallel(true), group);
    mismatches.check_refused([&] { row(torch::randn({odd, 1, 2})); }, "RowParallelLinear: sequence_parallel");
    mismatches.check_refused(
        [&] {
          scatter_to_sequence_parallel(torch::zeros({odd, 2}), group);
        },
        "sequence parallelism: the first dimension " + indivisible);
    mismatches.check_refused([&] { shard_of(torch::zeros({odd}), 0, group.rank(), T); }, "shard_of: dimension 0");
    ColumnParallelLinear column(ColumnParallelLinearOptions(4, 2 * T), group);
    mismatches.check_refused(
        [&] {
          column->load_full(torch::zeros({2 * T, 5}), torch::zeros({2 * T}));
        },
        "ColumnParallelLinear: the full weight is [" + std::to_string(2 * T) + ", 5], not [" + std::to_string(2 * T) +
            ", 4]");
    mismatches.check_refused(
        [&] {
          vocab_parallel_cross_entropy(torch::zeros({2, 3}), torch::zeros({2}, torch::kLong), group, 3 * T + 1);
        },
        "vocab_parallel_cross_entropy: vocab_limit " + std::to_string(3 * T + 1));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TensorParallel, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "tp" + std::to_string(info.param); });

// A group of one is the unsplit layer, with no process group: the same numbers as torch::nn's layers seeded alike.
TEST(TensorParallelOneRank, LayersAreTheUnsplitTorchLayers) {
  const auto single = Communicator::connect(RankEnvironment{});
  Communicator& group = *single;
  torch::manual_seed(21);
  const torch::Tensor x = torch::randn({4, 6});
  EXPECT_TRUE(copy_to_tensor_parallel(x, group).is_same(x));
  EXPECT_TRUE(reduce_scatter_to_sequence_parallel(x, group).is_same(x));

  torch::manual_seed(22);
  torch::nn::Linear linear(6, 4);
  torch::nn::Embedding embedding(10, 3);
  torch::manual_seed(22);
  ColumnParallelLinear column(ColumnParallelLinearOptions(6, 4), group);
  VocabParallelEmbedding table(VocabParallelEmbeddingOptions(10, 3), group);
  torch::manual_seed(22);
  RowParallelLinear row(RowParallelLinearOptions(6, 4), group);
  EXPECT_TRUE(torch::equal(column(x), linear(x)));
  EXPECT_TRUE(torch::allclose(row(x), linear(x), kTolerance, kTolerance));
  const torch::Tensor ids = torch::tensor({3, 9, 0}, torch::kLong);
  EXPECT_TRUE(torch::equal(table(ids), embedding(ids)));

  const torch::Tensor logits = torch::randn({5, 10}), target = torch::tensor({0, 9, 4, 4, 2}, torch::kLong);
  EXPECT_TRUE(
      torch::allclose(vocab_parallel_cross_entropy(logits, target, group, 10),
                      torch::nn::functional::cross_entropy(
                          logits, target, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone)),
                      kTolerance, kTolerance));
  EXPECT_TRUE(torch::equal(vocab_parallel_argmax(logits, group, 10), logits.argmax(1)));
}

// ---- Parity with Megatron-LM's own mpu code (megatron_mpu_reference.py) ----
// Runs: ColumnParallelLinear (plain, gather_output, sequence-parallel), RowParallelLinear (parallel input, split
// input, sequence-parallel), VocabParallelEmbedding and vocab_parallel_cross_entropy (on a padded vocabulary, its
// padding at -inf on Megatron's side) at tp=2, on two processes over Gloo, with the stand-ins the script lists.
// Not run: Megatron's paths that need CUDA or apex (gradient-accumulation fusion, the asynchronous all-reduce of
// the input gradient, the CUDA RNG tracker), none of which changes the numbers; Megatron has no vocab argmax.

using Tensors = std::map<std::string, torch::Tensor>;

Tensors megatron_inputs() {
  torch::manual_seed(42);
  Tensors inputs{{"column.x", torch::randn({4, 2, 8})},
                 {"column.upstream", torch::randn({4, 2, 12})},
                 {"column.weight", torch::randn({12, 8})},
                 {"column.bias", torch::randn({12})},
                 {"row.x", torch::randn({4, 2, 12})},
                 {"row.upstream", torch::randn({4, 2, 8})},
                 {"row.weight", torch::randn({8, 12})},
                 {"row.bias", torch::randn({8})},
                 {"embedding.weight", torch::randn({48, 6})},
                 {"embedding.upstream", torch::randn({4, 2, 6})},
                 {"cross_entropy.logits", torch::randn({4, 2, 48})},
                 {"cross_entropy.loss_weight", torch::randn({4, 2})}};
  inputs["embedding.ids"] = torch::tensor({0, 47, 23, 24, 5, 5, 30, 12}, torch::kLong).view({4, 2});
  inputs["cross_entropy.target"] = torch::tensor({0, 44, 23, 24, 3, 40, 17, 30}, torch::kLong).view({4, 2});
  inputs["cross_entropy.vocab_limit"] = torch::tensor(45, torch::kLong);
  return inputs;
}

struct LinearCase {
  std::string name;
  bool column, gather_output, input_is_parallel, sequence_parallel;
};

// One case as the script runs it: the same input and upstream slices, outputs and gradients of this rank.
Tensors trainbench_linear(const LinearCase& c, const Tensors& in, Communicator& group) {
  const int rank = group.rank();
  const std::string kind = c.column ? "column" : "row";
  torch::Tensor x = in.at(kind + ".x"), upstream = in.at(kind + ".upstream");
  torch::Tensor weight, bias, output;
  if (c.column) {
    ColumnParallelLinear layer(
        ColumnParallelLinearOptions(8, 12).gather_output(c.gather_output).sequence_parallel(c.sequence_parallel),
        group);
    layer->load_full(in.at("column.weight"), in.at("column.bias"));
    x = (c.sequence_parallel ? piece(x, 0, rank, 2) : x).clone().requires_grad_(true);
    upstream = c.gather_output ? upstream : piece(upstream, -1, rank, 2);
    output = layer(x);
    weight = layer->weight, bias = layer->bias;
  } else {
    RowParallelLinear layer(
        RowParallelLinearOptions(12, 8).input_is_parallel(c.input_is_parallel).sequence_parallel(c.sequence_parallel),
        group);
    layer->load_full(in.at("row.weight"), in.at("row.bias"));
    x = (c.input_is_parallel ? piece(x, -1, rank, 2) : x).clone().requires_grad_(true);
    upstream = c.sequence_parallel ? piece(upstream, 0, rank, 2) : upstream;
    output = layer(x);
    weight = layer->weight, bias = layer->bias;
  }
  (output * upstream).sum().backward();
  return {{c.name + ".output", output.detach()},
          {c.name + ".input_grad", x.grad()},
          {c.name + ".weight_grad", weight.grad()},
          {c.name + ".bias_grad", bias.grad()}};
}

Tensors trainbench_vocabulary(const Tensors& in, Communicator& group) {
  VocabParallelEmbedding table(VocabParallelEmbeddingOptions(48, 6), group);
  table->load_full(in.at("embedding.weight"));
  const torch::Tensor embedded = table(in.at("embedding.ids"));
  (embedded * in.at("embedding.upstream")).sum().backward();
  const torch::Tensor logits = piece(in.at("cross_entropy.logits"), -1, group.rank(), 2).clone().requires_grad_(true);
  const torch::Tensor loss = vocab_parallel_cross_entropy(logits, in.at("cross_entropy.target"), group,
                                                          in.at("cross_entropy.vocab_limit").item<int64_t>());
  (loss * in.at("cross_entropy.loss_weight")).sum().backward();
  return {{"embedding.output", embedded.detach()},
          {"embedding.weight_grad", table->weight.grad()},
          {"cross_entropy.loss", loss.detach()},
          {"cross_entropy.logits_grad", logits.grad()}};
}

Tensors load_tensors(const std::filesystem::path& path) {
  Tensors tensors;
  for (const auto& entry : testing::load_dict(path)) tensors[entry.key().toStringRef()] = entry.value().toTensor();
  return tensors;
}

TEST(MegatronParity, MpuLayersAtTwoRanksGiveTheSameOutputsAndGradients) {
  if (!testing::python_has("torch")) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  std::string directory_template = (std::filesystem::temp_directory_path() / "trainbench_megatron_XXXXXX").string();
  ASSERT_NE(::mkdtemp(directory_template.data()), nullptr);
  const std::filesystem::path directory = directory_template;
  const Tensors inputs = megatron_inputs();
  c10::Dict<std::string, torch::Tensor> saved;
  for (const auto& [key, value] : inputs) saved.insert(key, value);
  testing::save_dict(saved, directory / "inputs.pt");

  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_MEGATRON_MPU_SCRIPT, std::string(TRAINBENCH_MEGATRON_LM_DIR) + " " + directory.string());
  if (run.missing_reference_code()) {
    std::filesystem::remove_all(directory);
    GTEST_SKIP() << "no Megatron-LM at " << TRAINBENCH_MEGATRON_LM_DIR;
  }
  ASSERT_TRUE(testing::succeeded(run));
  const std::vector<Tensors> megatron{load_tensors(directory / "rank0.pt"), load_tensors(directory / "rank1.pt")};
  std::filesystem::remove_all(directory);

  const std::vector<LinearCase> cases{
      {"column", true, false, true, false},      {"column_gathered", true, true, true, false},
      {"column_sp", true, false, true, true},    {"row", false, false, true, false},
      {"row_split", false, false, false, false}, {"row_sp", false, false, true, true}};
  run_group(2, [&](Communicator& group, Mismatches& mismatches) {
    Tensors ours = trainbench_vocabulary(inputs, group);
    for (const LinearCase& c : cases) ours.merge(trainbench_linear(c, inputs, group));
    const Tensors& theirs = megatron[static_cast<size_t>(group.rank())];
    for (const auto& [key, expected] : theirs) {
      if (ours.count(key) == 0)
        mismatches.note(key + ": not computed here");
      else
        mismatches.check(ours.at(key), expected, "rank " + std::to_string(group.rank()) + " " + key);
    }
    if (ours.size() != theirs.size()) mismatches.note("Megatron gave " + std::to_string(theirs.size()) + " tensors");
  });
}

}  // namespace
}  // namespace trainbench::parallel
