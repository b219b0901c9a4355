// ps/detail/magnitude.h: the integer reading of float magnitudes that the tables' finiteness and
// overflow checks rely on.
#include "ps/table/detail/magnitude.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

namespace fleet::ps::detail {
namespace {

TEST(MagnitudeTest, BitsAreOrderedAsMagnitudesWhateverTheSign) {
  const std::vector<float> ascending = {0.0f, FLT_TRUE_MIN, FLT_MIN, 1e-3f, 1.0f, 3.5f, FLT_MAX};
  for (size_t i = 1; i < ascending.size(); ++i) {
    EXPECT_LT(MagnitudeBits(ascending[i - 1]), MagnitudeBits(ascending[i])) << ascending[i];
    EXPECT_EQ(MagnitudeBits(-ascending[i]), MagnitudeBits(ascending[i]));
  }
  EXPECT_EQ(MagnitudeBits(-0.0f), 0u);
}

TEST(MagnitudeTest, InfinityAndNanLieAboveEveryFiniteValue) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(MagnitudeBits(inf), kInfinityBits);
  EXPECT_EQ(MagnitudeBits(-inf), kInfinityBits);
  EXPECT_GT(MagnitudeBits(std::nanf("")), kInfinityBits);
  EXPECT_GT(MagnitudeBits(-std::nanf("")), kInfinityBits);
  EXPECT_LT(MagnitudeBits(FLT_MAX), kInfinityBits);
}

TEST(MagnitudeTest, MaxFindsTheLargestAnywhereInTheArray) {
  // Long enough for the vectorised loop and its scalar tail.
  for (size_t n : {size_t{1}, size_t{7}, size_t{64}, size_t{1001}}) {
    for (size_t where = 0; where < n; where += std::max<size_t>(1, n / 5)) {
      std::vector<float> values(n, 0.25f);
      values[where] = -7.0f;
      EXPECT_EQ(MaxMagnitudeBits(values.data(), n), MagnitudeBits(7.0f)) << n << " " << where;
      values[where] = std::nanf("");
      EXPECT_GT(MaxMagnitudeBits(values.data(), n), kInfinityBits) << n << " " << where;
    }
  }
  EXPECT_EQ(MaxMagnitudeBits(nullptr, 0), 0u);
}

TEST(MagnitudeTest, AnyAboveFindsAValuePastTheBoundAnywhereInTheArray) {
  const uint32_t bound = MagnitudeBits(4.0f);
  for (size_t n : {size_t{1}, size_t{7}, size_t{64}, size_t{1001}}) {
    for (size_t where = 0; where < n; where += std::max<size_t>(1, n / 5)) {
      std::vector<float> values(n, -0.25f);
      EXPECT_FALSE(AnyMagnitudeAbove(values.data(), n, bound)) << n << " " << where;
      values[where] = -4.0f;  // at the bound: not above it
      EXPECT_FALSE(AnyMagnitudeAbove(values.data(), n, bound)) << n << " " << where;
      values[where] = std::nextafter(-4.0f, -5.0f);
      EXPECT_TRUE(AnyMagnitudeAbove(values.data(), n, bound)) << n << " " << where;
      values[where] = std::nanf("");
      EXPECT_TRUE(AnyMagnitudeAbove(values.data(), n, bound)) << n << " " << where;
      // The finiteness test of pushed gradients: infinity is past the largest finite float.
      values[where] = -INFINITY;
      EXPECT_TRUE(AnyMagnitudeAbove(values.data(), n, kInfinityBits - 1)) << n << " " << where;
      values[where] = FLT_MAX;
      EXPECT_FALSE(AnyMagnitudeAbove(values.data(), n, kInfinityBits - 1)) << n << " " << where;
    }
  }
  EXPECT_FALSE(AnyMagnitudeAbove(nullptr, 0, 0));
}

}  // namespace
}  // namespace fleet::ps::detail
