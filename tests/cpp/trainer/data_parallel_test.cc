// The pieces of one-process data parallelism without programs: how a batch is cut into shares
// (Paddle's SplitLoDTensor), the in-memory reduction of dense gradients in ranges and of sparse
// gradients by concatenation into the owner or every replica, or split by rows (sparse or dense)
// into a share a replica, and the replica pool's fork-join
// with its error reporting, and the cut of a compute program after each gradient's last access
// (the overlapped reduction's segments).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "op_list_program.h"
#include "trainer/batch_split.h"
#include "trainer/compute_segments.h"
#include "trainer/gradient_reduce.h"
#include "trainer/replica_pool.h"

namespace fleet::trainer {
namespace {

LoDTensor Rows(int64_t rows, int64_t width, float first = 0) {
  LoDTensor t;
  t.Resize({rows, width});
  float* p = t.mutable_data<float>();
  std::iota(p, p + rows * width, first);
  return t;
}

TEST(BatchSplit, FiveSamplesOnTwoReplicasAreThreeAndTwo) {
  auto shares = SplitBatch(Rows(5, 2), 2, "x");
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].dim(0), 3);
  EXPECT_EQ(shares[1].dim(0), 2);
  EXPECT_EQ(shares[1].data<float>()[0], 6.0f);  // a view of row 3, not a copy
}

TEST(BatchSplit, SequencesAreSplitByTheirTopLevelAndRebased) {
  LoDTensor batch = Rows(6, 1);
  batch.set_lod({{0, 1, 3, 6}});  // sequences of 1, 2 and 3 rows
  auto shares = SplitBatch(batch, 2, "ids");
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].lod(), (LoD{{0, 1, 3}}));
  EXPECT_EQ(shares[0].dim(0), 3);
  EXPECT_EQ(shares[1].lod(), (LoD{{0, 3}}));
  EXPECT_EQ(shares[1].data<float>()[0], 3.0f);
}

TEST(BatchSplit, TooFewSamplesNameTheSizes) {
  try {
    SplitBatch(Rows(5, 1), 4, "label");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("feed 'label'"), std::string::npos) << what;
    EXPECT_NE(what.find("batch of 5 samples cannot be split across 4 replicas"), std::string::npos)
        << what;
  }
}

// Three replicas' scopes, each with a dense gradient "w@GRAD" of `n` elements holding r + 1.
struct Replicas {
  explicit Replicas(int64_t n, int count = 3) {
    slot.name = "w@GRAD";
    for (int r = 0; r < count; ++r) {
      vars.push_back(std::make_unique<Variable>());
      auto* t = vars.back()->GetMutable<LoDTensor>();
      t->Resize({n});
      float* p = t->mutable_data<float>();
      std::fill(p, p + n, static_cast<float>(r + 1));
      slot.replica.push_back(vars.back().get());
    }
  }
  void RunAll(const ReducePlan& plan) {
    for (int r = 0; r < static_cast<int>(vars.size()); ++r) RunReduceTasks(plan, r);
  }
  const float* Of(int r) { return vars[r]->Get<LoDTensor>().data<float>(); }

  std::vector<std::unique_ptr<Variable>> vars;
  GradientSlot slot;
};

TEST(GradientReduce, LargeDenseGradientsAreCutIntoOneRangePerReplica) {
  Replicas rs(100000);
  std::vector<GradientSlot> grads{rs.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1, 2}, 3, 1.0f / 3, /*all_reduce=*/true);
  ASSERT_EQ(plan.tasks.size(), 3u);
  EXPECT_EQ(plan.tasks[2].worker, 2);
  EXPECT_EQ(plan.tasks[2].end, 100000);
  rs.RunAll(plan);
  for (int r = 0; r < 3; ++r) {
    EXPECT_FLOAT_EQ(rs.Of(r)[0], 2.0f);  // (1 + 2 + 3) / 3
    EXPECT_FLOAT_EQ(rs.Of(r)[99999], 2.0f);
  }
}

TEST(GradientReduce, BalancedOwnersReduceTheirOwnGradientsWhole) {
  Replicas a(100000, 2), b(100000, 2);
  b.slot.name = "v@GRAD";
  b.slot.owner = 1;
  std::vector<GradientSlot> grads{a.slot, b.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1}, 2, 0.5f, /*all_reduce=*/true);
  EXPECT_TRUE(plan.owner_local);
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[1].worker, 1);
  EXPECT_EQ(plan.tasks[1].end, 100000);
  RunReduceTasks(plan, 0);
  RunReduceTasks(plan, 1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(a.Of(r)[99999], 1.5f);  // (1 + 2) / 2, in every replica (AllReduce)
    EXPECT_FLOAT_EQ(b.Of(r)[0], 1.5f);
  }
  grads[0].everywhere = true;  // read by ops of both replicas: no update may run before it is
  EXPECT_FALSE(PlanReduction(grads, {0, 1}, 2, 0.5f, true).owner_local);
}

TEST(GradientReduce, ReduceGivesOnlyTheOwnerTheSumAndASmallGradientIsOneTask) {
  Replicas rs(10);
  rs.slot.owner = 2;
  std::vector<GradientSlot> grads{rs.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1}, 3, 1.0f, /*all_reduce=*/false);
  ASSERT_EQ(plan.tasks.size(), 1u);
  EXPECT_EQ(plan.tasks[0].worker, 2);
  rs.RunAll(plan);
  EXPECT_FLOAT_EQ(rs.Of(2)[3], 3.0f);  // replicas 0 and 1 ran the step: 1 + 2
  EXPECT_FLOAT_EQ(rs.Of(0)[3], 1.0f);  // untouched
}

TEST(GradientReduce, SparseGradientsAreConcatenatedIntoMemoryOfEachReplicasOwn) {
  std::vector<std::unique_ptr<Variable>> vars;
  GradientSlot slot;
  slot.name = "emb@GRAD";
  for (int r = 0; r < 2; ++r) {
    vars.push_back(std::make_unique<Variable>());
    auto* s = vars.back()->GetMutable<SelectedRows>();
    s->set_height(10);
    *s->mutable_rows() = {static_cast<int64_t>(r), 7};
    *s->mutable_value() = Rows(2, 3, static_cast<float>(10 * r));
    slot.replica.push_back(vars.back().get());
  }
  std::vector<GradientSlot> grads{slot};
  ReducePlan plan = PlanReduction(grads, {0, 1}, 2, 0.5f, /*all_reduce=*/true);
  ASSERT_EQ(plan.tasks.size(), 1u);
  RunReduceTasks(plan, 0);
  for (int r = 0; r < 2; ++r) {
    const auto& s = vars[r]->Get<SelectedRows>();
    EXPECT_EQ(s.rows(), (std::vector<int64_t>{0, 7, 1, 7}));
    EXPECT_FLOAT_EQ(s.value().data<float>()[6], 5.0f);  // replica 1's first value, halved
  }
  EXPECT_NE(vars[0]->Get<SelectedRows>().value().raw_data(),
            vars[1]->Get<SelectedRows>().value().raw_data());
}

// Two replicas' sparse gradients "emb@GRAD" of width 2 over a table of 1000 rows, replica r
// holding `rows[r]` with values 100 * r + the element's index; each replica has its own
// variable for its share of the rows when the gradient is split.
struct SparseReplicas {
  explicit SparseReplicas(const std::vector<std::vector<int64_t>>& rows, bool split) {
    slot.name = "emb@GRAD";
    for (size_t r = 0; r < rows.size(); ++r) {
      vars.push_back(std::make_unique<Variable>());
      auto* s = vars.back()->GetMutable<SelectedRows>();
      s->set_height(1000);
      *s->mutable_rows() = rows[r];
      *s->mutable_value() =
          Rows(static_cast<int64_t>(rows[r].size()), 2, static_cast<float>(100 * r));
      slot.replica.push_back(vars.back().get());
      parts.push_back(std::make_unique<Variable>());
      if (split) slot.row_part.push_back(parts.back().get());
    }
  }
  const SelectedRows& Part(int r) { return parts[r]->Get<SelectedRows>(); }
  std::vector<std::unique_ptr<Variable>> vars, parts;
  GradientSlot slot;
};

TEST(GradientReduce, ASplitSparseGradientGivesEachReplicaItsShareOfTheRowsInOrder) {
  // Rows 0..63 on replica 0, and 3 twice then 40 on replica 1: whole, they concatenate to
  // 0..63, 3, 3, 40 (SparseGradientsAreConcatenated... above).
  std::vector<int64_t> first(64);
  std::iota(first.begin(), first.end(), 0);
  SparseReplicas split({first, {3, 3, 40}}, /*split=*/true);
  SparseReplicas whole({first, {3, 3, 40}}, /*split=*/false);
  std::vector<GradientSlot> grads{split.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1}, 2, 0.5f, /*all_reduce=*/true);
  ASSERT_EQ(plan.tasks.size(), 2u);  // one share a replica
  EXPECT_TRUE(plan.owner_local);     // each replica's update reads only what it wrote
  for (int r = 0; r < 2; ++r) RunReduceTasks(plan, r);
  std::vector<GradientSlot> whole_grads{whole.slot};
  RunReduceTasks(PlanReduction(whole_grads, {0, 1}, 2, 0.5f, true), 0);
  const SelectedRows& all = whole.vars[0]->Get<SelectedRows>();
  // Each share is the whole concatenation's rows of that share, in the same order, with the
  // same scaled values (bit for bit), and the shares together are every row once.
  size_t taken[2] = {0, 0};
  for (size_t i = 0; i < all.rows().size(); ++i) {
    const int64_t row = all.rows()[i];
    const int r = RowShare(row, 2);
    ASSERT_LT(taken[r], split.Part(r).rows().size()) << "row " << row;
    EXPECT_EQ(split.Part(r).rows()[taken[r]], row);
    EXPECT_EQ(std::memcmp(split.Part(r).value().data<float>() + 2 * taken[r],
                          all.value().data<float>() + 2 * i, 2 * sizeof(float)),
              0)
        << "row " << row;
    ++taken[r];
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(taken[r], split.Part(r).rows().size()) << r;
    EXPECT_EQ(split.Part(r).height(), 1000);
    EXPECT_GT(taken[r], 16u) << "64 sequential rows spread over both shares";
  }
  // The replicas' own gradients are only read: the next backward pass writes them again.
  EXPECT_EQ(split.vars[1]->Get<SelectedRows>().rows(), (std::vector<int64_t>{3, 3, 40}));
}

// Reduces each of 2 replicas' shares under Reduce twice, through the plan into `planned` and
// alone (ReduceGradient) into `alone`, and expects the same rows and the same bits.
template <typename Replicas>
void ReduceEachShareThroughThePlanAndAlone(Replicas& planned, Replicas& alone) {
  std::vector<GradientSlot> grads{planned.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1}, 2, 0.5f, /*all_reduce=*/false);
  for (int r = 0; r < 2; ++r) {
    RunReduceTasks(plan, r);
    ReduceGradient(alone.slot, {0, 1}, 2, 0.5f, /*all_reduce=*/false, r);
    EXPECT_EQ(alone.Part(r).rows(), planned.Part(r).rows()) << r;
    ASSERT_EQ(alone.Part(r).value().numel(), planned.Part(r).value().numel()) << r;
    EXPECT_EQ(std::memcmp(alone.Part(r).value().raw_data(), planned.Part(r).value().raw_data(),
                          planned.Part(r).value().nbytes()),
              0)
        << r;
  }
}

TEST(GradientReduce, AShareReducedAloneEqualsThePlannedShare) {
  SparseReplicas planned({{5, 9, 12}, {9, 700}}, true), alone({{5, 9, 12}, {9, 700}}, true);
  ReduceEachShareThroughThePlanAndAlone(planned, alone);
  EXPECT_EQ(alone.Part(0).rows().size() + alone.Part(1).rows().size(), 5u);
}

// Replicas' dense gradients "w@GRAD" of shape [rows, 3], replica r's elements 100 * r + their
// index, with a variable for each replica's share when the gradient is split by rows.
struct DenseReplicas {
  DenseReplicas(int64_t rows, int count, bool split) {
    slot.name = "w@GRAD";
    for (int r = 0; r < count; ++r) {
      vars.push_back(std::make_unique<Variable>());
      *vars.back()->GetMutable<LoDTensor>() = Rows(rows, 3, static_cast<float>(100 * r));
      slot.replica.push_back(vars.back().get());
      parts.push_back(std::make_unique<Variable>());
      if (split) slot.row_part.push_back(parts.back().get());
    }
  }
  const float* Of(int r) { return vars[r]->Get<LoDTensor>().data<float>(); }
  const SelectedRows& Part(int r) { return parts[r]->Get<SelectedRows>(); }
  std::vector<std::unique_ptr<Variable>> vars, parts;
  GradientSlot slot;
};

TEST(GradientReduce, ADenseGradientSplitByRowsGivesEachReplicaABlockOfTheWholeSum) {
  // 31 rows over 3 replicas: blocks [0, 10), [10, 20), [20, 31).
  DenseReplicas split(31, 3, /*split=*/true), whole(31, 3, /*split=*/false);
  std::vector<GradientSlot> grads{split.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1, 2}, 3, 1.0f / 3, /*all_reduce=*/true);
  ASSERT_EQ(plan.tasks.size(), 3u);  // one block a replica
  EXPECT_TRUE(plan.owner_local);     // each replica's update reads only what it summed
  for (int r = 0; r < 3; ++r) RunReduceTasks(plan, r);
  std::vector<GradientSlot> whole_grads{whole.slot};
  RunReduceTasks(PlanReduction(whole_grads, {0, 1, 2}, 3, 1.0f / 3, true), 0);
  const int64_t first_row[] = {0, 10, 20, 31};
  for (int r = 0; r < 3; ++r) {
    const SelectedRows& part = split.Part(r);
    std::vector<int64_t> rows;
    for (int64_t i = first_row[r]; i < first_row[r + 1]; ++i) rows.push_back(i);
    EXPECT_EQ(part.rows(), rows) << r;
    EXPECT_EQ(part.height(), 31);
    // The share's values are the reduced rows of the replica's own gradient, in place.
    EXPECT_EQ(part.value().raw_data(), split.Of(r) + 3 * first_row[r]) << r;
    // AllReduce: every replica's gradient holds the whole sum, bit for bit the unsplit one's.
    EXPECT_EQ(std::memcmp(split.Of(r), whole.Of(0), 93 * sizeof(float)), 0) << r;
  }
  EXPECT_FLOAT_EQ(split.Of(2)[92], 192.0f);  // (92 + 192 + 292) / 3
}

TEST(GradientReduce, ADenseShareReducedAloneEqualsThePlannedShareUnderReduce) {
  DenseReplicas planned(40000, 2, true), alone(40000, 2, true);
  ReduceEachShareThroughThePlanAndAlone(planned, alone);
  // Reduce: a replica sums only its own block, into its own gradient.
  EXPECT_FLOAT_EQ(planned.Of(0)[0], 50.0f);         // (0 + 100) / 2
  EXPECT_FLOAT_EQ(planned.Of(1)[0], 100.0f);        // replica 1's own, untouched
  EXPECT_FLOAT_EQ(planned.Of(1)[60000], 60050.0f);  // row 20000, replica 1's block
  EXPECT_FLOAT_EQ(planned.Of(0)[60000], 60000.0f);  // not replica 0's block
  EXPECT_EQ(planned.Part(1).rows().front(), 20000);
}

TEST(GradientReduce, SplittingALargeDenseGradientBalancesAnUnbalancedPlan) {
  DenseReplicas large(40000, 2, false);
  Replicas small(1000, 2);
  small.slot.name = "b@GRAD";
  small.slot.owner = 1;
  std::vector<GradientSlot> grads{large.slot, small.slot};
  EXPECT_FALSE(PlanReduction(grads, {0, 1}, 2, 0.5f, true).owner_local);  // 120000 against 1000
  DenseReplicas split(40000, 2, true);
  grads[0] = split.slot;
  EXPECT_TRUE(PlanReduction(grads, {0, 1}, 2, 0.5f, true).owner_local);  // 60000 against 61000
}

TEST(GradientReduce, ReplicasDisagreeingOnAShapeAreNamed) {
  Replicas rs(4, 2);
  rs.vars[1]->GetMutable<LoDTensor>()->Resize({5});
  rs.vars[1]->GetMutable<LoDTensor>()->mutable_data<float>();
  std::vector<GradientSlot> grads{rs.slot};
  EXPECT_THROW(PlanReduction(grads, {0, 1}, 2, 1.0f, true), InvalidArgument);
}

TEST(GradientReduce, AGradientReducedAloneEqualsThePlannedReduction) {
  Replicas planned(100000, 2), alone(100000, 2);
  alone.slot.owner = planned.slot.owner = 1;
  std::vector<GradientSlot> grads{planned.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1}, 2, 0.5f, /*all_reduce=*/false);
  planned.RunAll(plan);
  ReduceGradient(alone.slot, {0, 1}, 2, 0.5f, /*all_reduce=*/false);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(std::memcmp(alone.Of(r), planned.Of(r), 100000 * sizeof(float)), 0) << r;
  }
  EXPECT_FLOAT_EQ(alone.Of(1)[5], 1.5f);  // the owner's: (1 + 2) / 2
  EXPECT_FLOAT_EQ(alone.Of(0)[5], 1.0f);  // Reduce: replica 0's is untouched
}

TEST(ComputeSegments, CutsAfterTheLastReadOrWriteOfEachGradient) {
  framework::PreparedProgram program = OpListProgram({
      {{"x"}, {"h"}},            // 0 forward
      {{"h"}, {"loss"}},         // 1
      {{"loss"}, {"b@GRAD"}},    // 2 b's gradient...
      {{"b@GRAD"}, {"h@GRAD"}},  // 3 ...read last here
      {{"h@GRAD"}, {"w@GRAD"}},  // 4 w's gradient written...
      {{"w@GRAD"}, {"w@GRAD"}},  // 5 ...and last here
      {{"h"}, {"metric"}},       // 6 touches neither
  });
  ComputeSegments cut = CutAfterLastAccess(program, {"w@GRAD", "b@GRAD", "unused@GRAD"});
  ASSERT_EQ(cut.segments.size(), 3u);
  EXPECT_EQ(cut.segments[0]->ops.size(), 4u);  // ops 0-3
  EXPECT_EQ(cut.segments[1]->ops.size(), 2u);  // ops 4-5
  EXPECT_EQ(cut.segments[1]->ops[0].spec.type, "op4");
  EXPECT_EQ(cut.segments[2]->ops.size(), 1u);                  // op 6
  EXPECT_EQ(cut.final_after, (std::vector<size_t>{1, 0, 2}));  // untouched: after the last
}

TEST(ComputeSegments, AProgramOfNoOpsIsOneEmptySegment) {
  ComputeSegments cut = CutAfterLastAccess(framework::PreparedProgram{}, {"w@GRAD"});
  ASSERT_EQ(cut.segments.size(), 1u);
  EXPECT_TRUE(cut.segments[0]->ops.empty());
  EXPECT_EQ(cut.final_after, (std::vector<size_t>{0}));
}

TEST(ReplicaPool, RunsEveryReplicaAndRethrowsTheFirstError) {
  ReplicaPool pool(3);
  std::atomic<int> sum{0};
  for (int i = 0; i < 50; ++i) pool.Run([&](int r) { sum += r + 1; });
  EXPECT_EQ(sum.load(), 50 * 6);
  EXPECT_THROW(pool.Run([](int r) {
    if (r == 2) throw InvalidArgument("replica 2 failed");
  }),
               InvalidArgument);
  sum = 0;
  pool.Run([&](int r) { sum += 1; });  // usable after an error
  EXPECT_EQ(sum.load(), 3);
}

// Runs back to back (the workers still polling for the next one) and Runs after a pause longer
// than the poll (the workers asleep) each run every replica exactly once, after the previous
// Run has returned.
TEST(ReplicaPool, RunsBackToBackAndAfterAPauseRunEveryReplicaOnce) {
  ReplicaPool pool(3);
  std::vector<int> runs(3, 0);  // each written only by its replica, read between Runs
  for (int i = 0; i < 2000; ++i) {
    pool.Run([&](int r) { ++runs[r]; });
    if (i % 500 == 499) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(runs, (std::vector<int>{i + 1, i + 1, i + 1})) << "after Run " << i;
  }
}

}  // namespace
}  // namespace fleet::trainer
