// The cut of a replica's update phase into groups of ops that may run in any order or at once
// (the tasks after an overlapped data-parallel step's barrier, barrier_tasks.h).

#include "trainer/barrier_tasks.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "op_list_program.h"

namespace fleet::trainer {
namespace {

std::vector<std::vector<std::string>> Types(
    const std::vector<std::unique_ptr<framework::PreparedProgram>>& groups) {
  std::vector<std::vector<std::string>> out;
  for (const auto& group : groups) {
    out.emplace_back();
    for (const auto& op : group->ops) out.back().push_back(op.spec.type);
  }
  return out;
}

TEST(BarrierTasks, EachParametersUpdateIsAGroupAndSharedReadsDoNotJoinThem) {
  framework::PreparedProgram program = OpListProgram({
      {{"w@GRAD"}, {"w@GRAD"}},                       // 0 weight decay on w's gradient
      {{"b", "b@GRAD", "lr", "beta1"}, {"b", "mb"}},  // 1 b's update
      {{"w", "w@GRAD", "lr", "beta1"}, {"w", "mw"}},  // 2 w's update, after its decay
      {{"e", "e@GRAD@ROWS", "lr"}, {"e"}},            // 3 a share of e's rows
  });
  auto groups = CutIntoIndependentGroups(program);
  // lr and beta1 are read by every group and written by none: they tie nothing together.
  EXPECT_EQ(Types(groups),
            (std::vector<std::vector<std::string>>{{"op0", "op2"}, {"op1"}, {"op3"}}));
  EXPECT_TRUE(Touches(*groups[0], "w@GRAD"));
  EXPECT_FALSE(Touches(*groups[0], "b@GRAD"));
  EXPECT_TRUE(Touches(*groups[2], "e@GRAD@ROWS"));
}

TEST(BarrierTasks, ReadersAndWritersOfAVariableAreOneGroupInProgramOrder) {
  framework::PreparedProgram program = OpListProgram({
      {{"g1"}, {"norm"}},        // 0 writes norm...
      {{"p2", "g2"}, {"p2"}},    // 1 independent of the others
      {{"norm", "g1"}, {"p1"}},  // 2 ...which this reads
      {{"p3", "norm"}, {"p3"}},  // 3 and this: one group with 0 and 2
      {{"p4"}, {"p4"}},          // 4 alone
      {{"p4", "x"}, {"p4"}},     // 5 writes what 4 writes: with it
  });
  auto groups = CutIntoIndependentGroups(program);
  EXPECT_EQ(Types(groups), (std::vector<std::vector<std::string>>{
                               {"op0", "op2", "op3"}, {"op1"}, {"op4", "op5"}}));
  for (const auto& group : groups) EXPECT_TRUE(group->vars.empty());
}

TEST(BarrierTasks, AGroupMayRunOnceEverySegmentTouchingItsVariablesHasRun) {
  std::vector<std::unique_ptr<framework::PreparedProgram>> segments;
  segments.push_back(std::make_unique<framework::PreparedProgram>(OpListProgram({
      {{"x", "w", "b", "lr@in"}, {"h", "lr"}},  // forward, and a rate computed from lr@in
  })));
  segments.push_back(std::make_unique<framework::PreparedProgram>(OpListProgram({
      {{"h", "w"}, {"w@GRAD", "b@GRAD"}},  // b's gradient and w's, and w's last read
  })));
  segments.push_back(std::make_unique<framework::PreparedProgram>(OpListProgram({
      {{"h@GRAD", "w"}, {"x@GRAD"}},  // w read again after its gradient is final
  })));
  const auto through = SegmentsThroughLastAccess(segments);
  EXPECT_EQ(through.at("lr"), 1u);
  EXPECT_EQ(through.at("b"), 1u);
  EXPECT_EQ(through.at("b@GRAD"), 2u);
  EXPECT_EQ(through.at("w"), 3u);  // the last access counts, not the first
  EXPECT_EQ(through.count("mb"), 0u);
  // b's update reads its gradient (final after segment 2) and writes b and its moment.
  auto b_update = OpListProgram({{{"b", "b@GRAD", "lr", "mb"}, {"b", "mb"}}});
  EXPECT_EQ(SegmentsBeforeGroup(b_update, through), 2u);
  // w's may not run before the op of segment 3 has read w in every replica.
  auto w_update = OpListProgram({{{"w", "w@GRAD", "lr"}, {"w"}}});
  EXPECT_EQ(SegmentsBeforeGroup(w_update, through), 3u);
  // A group the compute program never touches may run at once.
  auto beta = OpListProgram({{{"beta1"}, {"beta1"}}});
  EXPECT_EQ(SegmentsBeforeGroup(beta, through), 0u);
}

TEST(BarrierTasks, AProgramOfNoOpsHasNoGroups) {
  EXPECT_TRUE(CutIntoIndependentGroups(framework::PreparedProgram{}).empty());
}

}  // namespace
}  // namespace fleet::trainer
