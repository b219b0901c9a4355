// A weight gradient the replicas compute by rows (gradient_reduce.h, "a product"): each replica
// computes its block of rows of scale * sum_r X_r^T dOut_r from every replica's X and dOut, with
// no gradient of its own from the backward pass. Checked against the product computed here in
// double, under AllReduce (every replica's gradient gets every block) and Reduce (a replica's
// gradient gets only its own block), through the plan and alone (the overlapped path).

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "trainer/gradient_reduce.h"

namespace fleet::trainer {
namespace {

constexpr int64_t kRows = 7;     // the weight's rows: X's columns
constexpr int64_t kColumns = 3;  // the weight's columns: dOut's columns
constexpr float kSentinel = -7.0f;

// Replicas with shares of `batch[r]` samples of a mul's X [batch, kRows] and dOut
// [batch, kColumns], a gradient variable each (sized and filled with kSentinel, as a previous
// step would leave it) and a variable for each replica's share of the rows.
struct ProductReplicas {
  explicit ProductReplicas(const std::vector<int64_t>& batch) {
    slot.name = "w@GRAD";
    for (size_t r = 0; r < batch.size(); ++r) {
      x.push_back(Filled(batch[r], kRows, 0.25f * static_cast<float>(r + 1)));
      dout.push_back(Filled(batch[r], kColumns, -0.5f + static_cast<float>(r)));
      grads.push_back(Filled(kRows, kColumns, 0.0f, kSentinel));
      parts.push_back(std::make_unique<Variable>());
      slot.product_x.push_back(x.back().get());
      slot.product_dout.push_back(dout.back().get());
      slot.replica.push_back(grads.back().get());
      slot.row_part.push_back(parts.back().get());
    }
  }

  // A [rows, columns] tensor: `fill` everywhere when given, else small distinct values.
  static std::unique_ptr<Variable> Filled(int64_t rows, int64_t columns, float offset,
                                          float fill = 0.0f) {
    auto v = std::make_unique<Variable>();
    auto* t = v->GetMutable<LoDTensor>();
    t->Resize({rows, columns});
    float* p = t->mutable_data<float>();
    for (int64_t i = 0; i < rows * columns; ++i) {
      p[i] = fill != 0.0f ? fill : offset + static_cast<float>((i * 7) % 11) / 8.0f;
    }
    return v;
  }

  // scale * sum_r X_r^T dOut_r, element [row, column], in double.
  double Expected(int64_t row, int64_t column, double scale) const {
    double sum = 0;
    for (size_t r = 0; r < x.size(); ++r) {
      const LoDTensor& xt = x[r]->Get<LoDTensor>();
      const LoDTensor& dt = dout[r]->Get<LoDTensor>();
      for (int64_t s = 0; s < xt.dim(0); ++s) {
        sum += static_cast<double>(xt.data<float>()[s * kRows + row]) *
               static_cast<double>(dt.data<float>()[s * kColumns + column]);
      }
    }
    return sum * scale;
  }

  const float* Of(int r) const { return grads[r]->Get<LoDTensor>().data<float>(); }

  std::vector<std::unique_ptr<Variable>> x, dout, grads, parts;
  GradientSlot slot;
};

// Replica r's block of rows, as DenseRowShare cuts kRows.
bool InBlock(int64_t row, int r, int replicas) {
  const auto [first, last] = DenseRowShare(kRows, r, replicas);
  return row >= first && row < last;
}

TEST(WeightProduct, AllReduceGivesEveryReplicaTheWholeBatchsProduct) {
  // Uneven shares, as Paddle splits 13 samples over 3 replicas.
  ProductReplicas rs({5, 4, 4});
  const float scale = 1.0f / 3;
  std::vector<GradientSlot> grads{rs.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1, 2}, 3, scale, /*all_reduce=*/true);
  ASSERT_EQ(plan.tasks.size(), 3u);  // one block a replica
  for (int r = 0; r < 3; ++r) RunReduceTasks(plan, r);
  for (int r = 0; r < 3; ++r) {
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t j = 0; j < kColumns; ++j) {
        EXPECT_NEAR(rs.Of(r)[i * kColumns + j], rs.Expected(i, j, scale), 1e-5)
            << "replica " << r << " [" << i << ", " << j << "]";
      }
    }
    // The share is the replica's block of its own gradient, in place.
    const SelectedRows& part = rs.parts[r]->Get<SelectedRows>();
    const auto [first, last] = DenseRowShare(kRows, r, 3);
    ASSERT_EQ(part.rows().size(), static_cast<size_t>(last - first)) << r;
    EXPECT_EQ(part.rows().front(), first) << r;
    EXPECT_EQ(part.height(), kRows);
    EXPECT_EQ(part.value().raw_data(), rs.Of(r) + first * kColumns) << r;
    // Every replica holds the same bits: the owner's block, copied.
    for (int64_t e = 0; e < kRows * kColumns; ++e) EXPECT_EQ(rs.Of(r)[e], rs.Of(0)[e]) << e;
  }
}

TEST(WeightProduct, ReduceWritesOnlyEachReplicasOwnBlockAndAloneEqualsThePlan) {
  ProductReplicas planned({3, 3}), alone({3, 3});
  std::vector<GradientSlot> grads{planned.slot};
  ReducePlan plan = PlanReduction(grads, {0, 1}, 2, 0.5f, /*all_reduce=*/false);
  for (int r = 0; r < 2; ++r) {
    RunReduceTasks(plan, r);
    ReduceGradient(alone.slot, {0, 1}, 2, 0.5f, /*all_reduce=*/false, r);
  }
  for (int r = 0; r < 2; ++r) {
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t j = 0; j < kColumns; ++j) {
        const float got = planned.Of(r)[i * kColumns + j];
        if (InBlock(i, r, 2)) {
          EXPECT_NEAR(got, planned.Expected(i, j, 0.5), 1e-5) << r << " [" << i << "]";
        } else {
          EXPECT_EQ(got, kSentinel) << "replica " << r << " wrote row " << i;
        }
        EXPECT_EQ(got, alone.Of(r)[i * kColumns + j]) << r << " [" << i << ", " << j << "]";
      }
    }
  }
}

TEST(WeightProduct, OperandsThatDoNotMakeOneProductAreNamed) {
  ProductReplicas rs({2, 2});
  rs.x[1] = ProductReplicas::Filled(2, kRows + 1, 0.0f);  // replica 1's X is one column wider
  rs.slot.product_x[1] = rs.x[1].get();
  std::vector<GradientSlot> grads{rs.slot};
  try {
    PlanReduction(grads, {0, 1}, 2, 0.5f, true);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'w@GRAD' of replica 1"), std::string::npos) << what;
    EXPECT_NE(what.find("[2, 8]"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace fleet::trainer
