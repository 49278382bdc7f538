// transformer_cost.h against hand-computed values on a shape small enough to count by hand: 4 layers, hidden 8,
// 2 heads, feed-forward 32, sequences of 16, a vocabulary of 100 padded by 4·t.
#include "parallel/transformer_cost.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace trainbench::parallel {
namespace {

TransformerShape small_shape() {
  TransformerShape shape;
  shape.layers = 4;
  shape.hidden = 8;
  shape.heads = 2;
  shape.ffn_hidden = 32;
  shape.seq_length = 16;
  shape.vocab_size = 100;
  shape.make_vocab_size_divisible_by = 4;
  shape.max_positions = 16;
  return shape;
}

ParallelPlan tp2_pp2_dp2() {
  ParallelPlan plan;
  plan.tensor = 2;
  plan.pipeline = 2;
  plan.data = 2;
  return plan;
}

TEST(TransformerCost, PadsTheVocabularyAsMegatron) {
  EXPECT_EQ(padded_vocab_size(50257, 128, 8), 51200);
  EXPECT_EQ(padded_vocab_size(50257, 128, 4), 50688);
  EXPECT_EQ(padded_vocab_size(100, 4, 2), 104);
  EXPECT_THROW(padded_vocab_size(0, 128, 1), Error);
}

TEST(TransformerCost, TheBubbleIsStagesLessOneOverChunksTimesMicroBatches) {
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(8, 128, 12), 7.0 / 1536);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(8, 192, 1), 7.0 / 192);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(1, 4, 1), 0);
}

TEST(TransformerCost, StepFlopsByHand) {
  TransformerShape shape = small_shape();
  shape.layers = 2;
  shape.hidden = 4;
  shape.seq_length = 8;
  // 72·3·8·2·16 = 55296, times 1 + 8/24 + 16/96 = 1.5; the recomputed attention 4·3·64·4·2 = 6144 more;
  // whole layers: 96·3·8·2·16 = 73728 times 1 + 1/3 + 16/128.
  const StepFlops flops = step_flops(shape, 3, 16, true);
  EXPECT_DOUBLE_EQ(flops.model, 82944);
  EXPECT_DOUBLE_EQ(flops.computed, 82944 + 6144);
  EXPECT_DOUBLE_EQ(flops.full_recompute, 73728 * (1 + 1.0 / 3 + 0.125));
  EXPECT_DOUBLE_EQ(step_flops(shape, 3, 16, false).computed, 82944);
}

// BERT's masked-LM head: the decoder over k = 2 of the 8 positions, behind a dense transform of h = 4 more columns.
// The layers' 72·3·8·2·16·(1 + 8/24) = 73728, and the head's 6·3·2·4·(16 + 4) = 2880 (3 sequences, forward and
// backward, 2 positions each); whole layers recomputed, 96·3·8·2·16·(1 + 1/3) = 98304 and the same head.
TEST(TransformerCost, AMaskedLmHeadComputesItsLogitsOverTheMaskedPositionsOnly) {
  TransformerShape shape = small_shape();
  shape.layers = 2;
  shape.hidden = 4;
  shape.seq_length = 8;
  shape.lm_head_positions = 2;
  shape.lm_head_transform = true;
  const StepFlops flops = step_flops(shape, 3, 16, false);
  EXPECT_DOUBLE_EQ(flops.model, 73728 + 2880);
  EXPECT_DOUBLE_EQ(flops.computed, flops.model);  // the scores are stored: no second forward
  EXPECT_DOUBLE_EQ(flops.full_recompute, 98304 + 2880);
  // The same head over every position without the transform is GPT's: 6·3·8·4·16 = 9216.
  shape.lm_head_positions = 0;
  shape.lm_head_transform = false;
  EXPECT_DOUBLE_EQ(step_flops(shape, 3, 16, false).model, 73728 + 9216);
}

// Per layer at t = 2: qkv (3·64 + 24)/2 = 108, attention output 64/2 + 8 = 40, first MLP (256 + 32)/2 = 144,
// second 256/2 + 8 = 136, LayerNorms 32: 460, two layers a stage. Stage 0 adds its half of the 104-row
// embedding (416) and the positions (128); the last stage the final LayerNorm (16) and the tied copy (416).
TEST(TransformerCost, ParametersAndBytesPerRankByHand) {
  FootprintOptions options;
  options.micro_batches = 4;
  options.micro_batch_size = 1;
  const StageFootprint first = stage_footprint(small_shape(), tp2_pp2_dp2(), 0, options);
  const StageFootprint last = stage_footprint(small_shape(), tp2_pp2_dp2(), 1, options);
  EXPECT_EQ(first.parameters, 1464);
  EXPECT_EQ(last.parameters, 1352);
  EXPECT_DOUBLE_EQ(first.parameter_bytes, 4 * 1464);
  EXPECT_DOUBLE_EQ(first.gradient_bytes, 4 * 1464);
  EXPECT_DOUBLE_EQ(first.optimizer_bytes, 8 * 1464);
  // 1F1B holds min(m, p − stage) micro-batches: 2 on stage 0. s·b·h = 128 and (10 + 24/2 + 5·2·16/(8·2)) = 32 a
  // layer at 2 bytes.
  EXPECT_DOUBLE_EQ(first.activation_bytes, 2 * 2 * 128 * 32);
  EXPECT_DOUBLE_EQ(last.activation_bytes, 1 * 2 * 128 * 32);
  // A message is s·b·h·2 = 256 bytes: tp 4 a layer and the embedding's, 4 micro-batches; pp one boundary.
  EXPECT_DOUBLE_EQ(first.activation_message_bytes, 256);
  EXPECT_DOUBLE_EQ(first.tensor_bytes, 4 * (2 * 4 * 256 + 256));
  EXPECT_DOUBLE_EQ(first.pipeline_bytes, 4 * 256);
  EXPECT_DOUBLE_EQ(first.data_bytes, 4 * 1464);
  EXPECT_DOUBLE_EQ(first.embedding_bytes, 4 * 52 * 8);
}

// The head's transform, a dense 8×8 layer with its bias (72) and a LayerNorm (16), whole on the last stage.
TEST(TransformerCost, TheHeadsTransformIsOnTheLastStage) {
  TransformerShape shape = small_shape();
  shape.lm_head_transform = true;
  FootprintOptions options;
  EXPECT_EQ(stage_footprint(shape, tp2_pp2_dp2(), 0, options).parameters, 1464);
  EXPECT_EQ(stage_footprint(shape, tp2_pp2_dp2(), 1, options).parameters, 1352 + 88);
}

TEST(TransformerCost, MixedPrecisionDistributedOptimizerAndSequenceParallelism) {
  FootprintOptions options;
  options.micro_batches = 4;
  options.recompute_attention = true;
  options.weight_element_bytes = 2;
  options.master_weights = true;
  options.distributed_optimizer = true;
  ParallelPlan plan = tp2_pp2_dp2();
  plan.sequence_parallel = true;
  const StageFootprint first = stage_footprint(small_shape(), plan, 0, options);
  EXPECT_DOUBLE_EQ(first.parameter_bytes, 2 * 1464);
  EXPECT_DOUBLE_EQ(first.gradient_bytes, 4 * 1464);
  EXPECT_DOUBLE_EQ(first.optimizer_bytes, 12 * 1464 / 2.0);    // master and two moments over dp 2
  EXPECT_DOUBLE_EQ(first.activation_bytes, 2 * 2 * 128 * 17);  // 34/t, the scores not kept
  EXPECT_DOUBLE_EQ(first.pipeline_bytes, 4 * 256 / 2.0);       // the boundary split over the tensor ranks
  EXPECT_DOUBLE_EQ(first.total_bytes(), 2928 + 5856 + 8784 + 8704);
}

TEST(TransformerCost, InterleavingHoldsMegatronsWarmUpChunks) {
  ParallelPlan plan = tp2_pp2_dp2();
  plan.schedule = PipelineSchedule::kInterleaved;
  plan.virtual_stages = 2;
  FootprintOptions options;
  options.micro_batches = 4;
  // Stage 0: (2 − 0 − 1)·2 + (2 − 1)·2 + 1 = 5 chunks of one layer: 2.5 stages' worth.
  EXPECT_DOUBLE_EQ(stage_footprint(small_shape(), plan, 0, options).activation_bytes, 2.5 * 2 * 128 * 32);
  // Boundaries: 2v − 1 on the first and the last stage.
  EXPECT_DOUBLE_EQ(stage_footprint(small_shape(), plan, 1, options).pipeline_bytes, 4 * 3 * 256);
}

}  // namespace
}  // namespace trainbench::parallel
