// The 3-D layout (parallel/plan.h) and the groups it forms over one world (parallel/context.h).
#include "parallel/context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/two_ranks.h"
#include "util/error.h"

namespace trainbench::parallel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Megatron-LM's own example (megatron/mpu/initialize.py): 16 ranks at tp 2 × pp 4 give tensor groups
// [0,1] [2,3] …, data groups [0,2] [1,3] [4,6] … and pipeline groups [0,4,8,12] [1,5,9,13] ….
TEST(ParallelPlan, GroupsFollowMegatronsRankOrder) {
  const ParallelPlan plan = make_plan(16, 2, 4, "test");
  EXPECT_EQ(plan.data, 2);
  EXPECT_THAT(group_members(plan, GroupKind::kTensor, 3), ElementsAre(2, 3));
  EXPECT_THAT(group_members(plan, GroupKind::kData, 0), ElementsAre(0, 2));
  EXPECT_THAT(group_members(plan, GroupKind::kData, 5), ElementsAre(5, 7));
  EXPECT_THAT(group_members(plan, GroupKind::kPipeline, 1), ElementsAre(1, 5, 9, 13));
  const PlanCoordinates at = coordinates_of(plan, 13);
  EXPECT_EQ(at.tensor, 1);
  EXPECT_EQ(at.data, 0);
  EXPECT_EQ(at.pipeline, 3);
  for (int rank = 0; rank < 16; ++rank) EXPECT_EQ(world_rank_of(plan, coordinates_of(plan, rank)), rank);
  // Names tell groups of one kind apart and are the same on every member.
  EXPECT_EQ(group_name(plan, GroupKind::kPipeline, 1), group_name(plan, GroupKind::kPipeline, 13));
  EXPECT_NE(group_name(plan, GroupKind::kPipeline, 1), group_name(plan, GroupKind::kPipeline, 0));
  EXPECT_EQ(group_name(plan, GroupKind::kTensor, 2), "tp1");
}

TEST(ParallelPlan, SizesThatDoNotDivideTheWorldAreRefusedByName) {
  try {
    make_plan(6, 4, 1, "--set tensor_parallel");
    FAIL() << "accepted tp 4 on 6 ranks";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("--set tensor_parallel"));
    EXPECT_THAT(error.what(), HasSubstr("not divisible"));
  }
  EXPECT_THROW(make_plan(4, 0, 1, "x"), Error);
  EXPECT_THROW(parse_pipeline_schedule("zigzag", "--set pipeline_schedule"), Error);
  EXPECT_EQ(parse_pipeline_schedule("1f1b", "x"), PipelineSchedule::kOneForwardOneBackward);
}

// Eight ranks at (tp, pp, dp) = (2, 2, 2): each group sums only its members' values, pipeline neighbours
// exchange tensors point to point, and each group counts what it carried.
TEST(ParallelGroups, EachGroupReducesOverItsMembersOnly) {
  std::vector<std::vector<double>> sums(8);
  std::vector<double> received(8, -1);
  std::vector<TrafficCount> tensor_traffic(8), world_traffic(8);
  const auto failures = testing::run_ranks(8, [&](Communicator& world) {
    ParallelContext context{std::shared_ptr<Communicator>(&world, [](Communicator*) {}), torch::kCPU};
    context = with_plan(context, make_plan(8, 2, 2, "test"));
    const auto rank = static_cast<size_t>(world.rank());
    for (Communicator* group : {&context.tensor_parallel(), &context.data_parallel(), &context.pipeline_parallel()}) {
      torch::Tensor value = torch::full({1}, static_cast<double>(world.rank()), torch::kFloat64);
      group->allreduce_sum(value).wait();
      sums[rank].push_back(value.item<double>());
    }
    Communicator& pipeline = context.pipeline_parallel();
    torch::Tensor message = torch::full({3}, static_cast<double>(world.rank()), torch::kFloat64);
    if (pipeline.rank() == 0) pipeline.send(message, 1, 7).wait();
    if (pipeline.rank() == 1) {
      pipeline.receive(message, 0, 7).wait();
      received[rank] = message[2].item<double>();
    }
    tensor_traffic[rank] = context.tensor_parallel().traffic(Collective::kAllReduce);
    world_traffic[rank] = world.traffic(Collective::kAllReduce);
  });
  EXPECT_EQ(failures, std::vector<std::string>(8));
  // Rank 5 = tp 1, dp 0, pp 1: tensor group {4, 5}, data group {5, 7}, pipeline group {1, 5}.
  EXPECT_THAT(sums[5], ElementsAre(9, 12, 6));
  EXPECT_THAT(sums[0], ElementsAre(1, 2, 4));
  EXPECT_EQ(received[5], 1);  // from rank 1, its stage-0 neighbour
  EXPECT_EQ(received[1], -1);
  EXPECT_EQ(tensor_traffic[3].calls, 1);
  EXPECT_EQ(tensor_traffic[3].bytes, 8);
  EXPECT_EQ(world_traffic[3].calls, 0);  // the groups' traffic is theirs, not the world's
}

}  // namespace
}  // namespace trainbench::parallel
