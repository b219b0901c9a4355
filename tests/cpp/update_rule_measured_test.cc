// UpdateRule::UpdateMeasured and the UpdateStaysWithin that takes its bound (ps/table/
// update_rule.h): the update is Update's bit for bit, the bound is the row's largest magnitude
// (Adam) or unknown (SGD, Adagrad), and a row's proof from the bound answers as the scanning
// proof does, while reading only the gradient when the bound proves the row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ps/table/detail/magnitude.h"
#include "ps/table/update_rule.h"

namespace fleet::ps {
namespace {

constexpr size_t kDim = 300;  // above the wide scans' threshold, not a multiple of a lane count

std::unique_ptr<UpdateRule> Rule(const std::string& name, float l2 = 0.0f, float l1 = 0.0f) {
  proto::OptimizerConfig c;
  c.set_learning_rate(1e-2f);
  c.set_l2_decay(l2);
  c.set_l1_decay(l1);
  if (name == "adam") c.mutable_adam()->set_epsilon(0.5f);  // bounded steps: a finite proof
  if (name == "adagrad") c.mutable_adagrad()->set_epsilon(0.5f);
  if (name == "sgd") c.mutable_sgd();
  return std::move(MakeUpdateRule(c)).value();
}

// A row [values | state] after InitState, with random values.
std::vector<float> NewRow(const UpdateRule& rule, uint32_t seed) {
  std::vector<float> row(kDim + rule.StateDim(kDim));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  for (size_t i = 0; i < kDim; ++i) row[i] = dist(gen);
  rule.InitState(kDim, row.data() + kDim);
  return row;
}

std::vector<float> Gradient(float scale, uint32_t seed) {
  std::vector<float> g(kDim);
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : g) x = scale * normal(gen);
  return g;
}

uint32_t LargestMagnitude(const std::vector<float>& row, size_t floats) {
  return detail::MaxMagnitudeBits(row.data(), floats);
}

TEST(UpdateMeasured, AdamUpdatesAsUpdateAndBoundsValuesAndState) {
  for (auto [l2, l1] : {std::pair{0.0f, 0.0f}, std::pair{1e-2f, 1e-3f}}) {
    auto rule = Rule("adam", l2, l1);
    std::vector<float> row = NewRow(*rule, 1), twin = row;
    std::vector<float> out(kDim), twin_out(kDim);
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> g = Gradient(0.1f * (step + 1), 10 + step);
      const uint32_t bound =
          rule->UpdateMeasured(kDim, row.data(), row.data() + kDim, g.data(), out.data());
      rule->Update(kDim, twin.data(), twin.data() + kDim, g.data(), twin_out.data());
      ASSERT_EQ(std::memcmp(row.data(), twin.data(), row.size() * sizeof(float)), 0)
          << "step " << step << ", l2 " << l2;
      ASSERT_EQ(std::memcmp(out.data(), twin_out.data(), kDim * sizeof(float)), 0);
      // Values, m and v (every per-value float; the two beta powers are the row's own).
      EXPECT_EQ(bound, LargestMagnitude(row, 3 * kDim)) << "step " << step;
    }
  }
}

TEST(UpdateMeasured, SgdAndAdagradUpdateAsUpdateAndKnowNoBound) {
  for (const char* name : {"sgd", "adagrad"}) {
    auto rule = Rule(name);
    std::vector<float> row = NewRow(*rule, 2), twin = row;
    const std::vector<float> g = Gradient(0.3f, 3);
    EXPECT_EQ(rule->UpdateMeasured(kDim, row.data(), row.data() + kDim, g.data()),
              UpdateRule::kUnknownBound)
        << name;
    rule->Update(kDim, twin.data(), twin.data() + kDim, g.data());
    EXPECT_EQ(std::memcmp(row.data(), twin.data(), row.size() * sizeof(float)), 0) << name;
  }
}

// After each measured update, the proof from the bound and the scanning proof give the same
// answer for the next gradient, at scales from far inside to far outside the proof's range.
TEST(UpdateMeasured, TheProofFromTheBoundAnswersAsTheScanningProof) {
  const float kBound = 50.0f;
  int proven = 0, not_proven = 0;
  for (auto [l2, l1] : {std::pair{0.0f, 0.0f}, std::pair{1e-2f, 1e-3f}}) {
    auto rule = Rule("adam", l2, l1);
    std::vector<float> row = NewRow(*rule, 4);
    uint32_t known = UpdateRule::kUnknownBound;
    for (int step = 0; step < 40; ++step) {
      // 1e-3 to about 30: the proof's h here is about 4.9 (sqrt(bound / 2.02)).
      const std::vector<float> g = Gradient(1e-3f * std::pow(1.3f, step), 20 + step);
      const bool scanned =
          rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, g.data(), kBound);
      const bool from_bound =
          rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, g.data(), kBound, {known});
      const UpdateRule::Known both{known, detail::MaxMagnitudeBits(g.data(), kDim)};
      const bool from_both =
          rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, g.data(), kBound, both);
      ASSERT_EQ(from_bound, scanned) << "step " << step << ", l2 " << l2;
      ASSERT_EQ(from_both, scanned) << "step " << step << ", l2 " << l2;
      (scanned ? proven : not_proven)++;
      // A small step keeps the row near the proof's range for the next gradient.
      const std::vector<float> small = Gradient(1e-2f, 60 + step);
      known = rule->UpdateMeasured(kDim, row.data(), row.data() + kDim, small.data());
    }
  }
  EXPECT_GT(proven, 0);
  EXPECT_GT(not_proven, 0);
}

TEST(UpdateMeasured, ABoundThatProvesTheRowIsTrustedWithoutReadingTheRow) {
  auto rule = Rule("adam");
  std::vector<float> row = NewRow(*rule, 5);
  const std::vector<float> g = Gradient(1e-2f, 6);
  const uint32_t small = detail::MagnitudeBits(1.0f);
  ASSERT_TRUE(
      rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, g.data(), 50.0f, {small}));
  // A value far outside the range that the bound does not know of: the scanning proof refuses
  // the row, the one from the bound does not look at it (the table keeps the bound true).
  row[kDim / 2] = 1e6f;
  EXPECT_FALSE(rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, g.data(), 50.0f));
  EXPECT_TRUE(
      rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, g.data(), 50.0f, {small}));
  // A gradient outside the range is refused with any bound.
  std::vector<float> large = g;
  large[7] = 1e6f;
  EXPECT_FALSE(
      rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, large.data(), 50.0f, {small}));
  // A known largest gradient is trusted in place of the gradient: the same gradient, said to be
  // small, passes; the small one, said to be large, is refused.
  const uint32_t large_bits = detail::MaxMagnitudeBits(large.data(), kDim);
  EXPECT_TRUE(rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, large.data(), 50.0f,
                                      {small, small}));
  EXPECT_FALSE(rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, g.data(), 50.0f,
                                       {small, large_bits}));
}

TEST(UpdateMeasured, ABoundAboveTheRangeFallsBackToScanningTheRow) {
  auto rule = Rule("adam");
  const std::vector<float> row = NewRow(*rule, 7);
  const std::vector<float> g = Gradient(1e-2f, 8);
  // A bound past the range (a sign bit of v, or a large value since changed) proves nothing;
  // the row itself is well inside the range, and the scan finds so.
  for (uint32_t known : {detail::MagnitudeBits(1e30f), 0x80000000u, UpdateRule::kUnknownBound}) {
    EXPECT_TRUE(
        rule->UpdateStaysWithin(kDim, row.data(), row.data() + kDim, g.data(), 50.0f, {known}))
        << known;
  }
  // A negative v, which the proof must see, is found by the scan that such a bound falls back on.
  std::vector<float> negative_v = row;
  negative_v[2 * kDim + 3] = -1e-3f;
  EXPECT_FALSE(rule->UpdateStaysWithin(kDim, negative_v.data(), negative_v.data() + kDim, g.data(),
                                       50.0f, {0x80000000u}));
}

}  // namespace
}  // namespace fleet::ps
