// ps/table/detail/rule_kernels.h: the update rules' loops and the magnitude scans, in the clone
// this CPU picks (AVX-512 or AVX2 where present), give bit for bit what plain scalar loops give,
// at every length around the vector widths and at every position of a value the scans look for.
#include "ps/table/detail/rule_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace fleet::ps::detail {
namespace {

// Lengths below, at and above every lane count (4, 8, 16) and an unrolled loop's stride, and a
// dense table's block.
const size_t kLengths[] = {0, 1, 3, 4, 5, 15, 16, 17, 31, 33, 64, 255, 256, 257, 8191, 8192};

std::vector<float> Random(size_t n, float low, float high, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

// The arrays compared as bits (so that -0 and 0, or two NaNs, are told apart).
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                    size_t n) {
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
      << what << " differs at length " << n;
}

// Each element through the same operations in the same order, one at a time. `volatile`
// keeps the compiler from vectorising the reference itself.
void ReferenceAdam(size_t n, float beta1, float beta2, float lr_t, float eps_t, float* w, float* m,
                   float* v, const float* g) {
  for (volatile size_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps_t);
  }
}

TEST(RuleKernels, AdamMatchesTheScalarLoopBitForBit) {
  for (size_t n : kLengths) {
    auto w = Random(n, -1.0f, 1.0f, 1), m = Random(n, -0.1f, 0.1f, 2);
    auto v = Random(n, 0.0f, 0.01f, 3), g = Random(n, -0.5f, 0.5f, 4);
    auto w_ref = w, m_ref = m, v_ref = v;
    for (int step = 0; step < 3; ++step) {
      const float lr_t = 1e-3f * (step + 1), eps_t = 1e-8f;
      AdamKernel(n, 0.9f, 0.999f, lr_t, eps_t, w.data(), m.data(), v.data(), g.data());
      ReferenceAdam(n, 0.9f, 0.999f, lr_t, eps_t, w_ref.data(), m_ref.data(), v_ref.data(),
                    g.data());
    }
    ExpectSameBits(w, w_ref, "w", n);
    ExpectSameBits(m, m_ref, "m", n);
    ExpectSameBits(v, v_ref, "v", n);
  }
}

// The bound AdamKernelMeasured should return for the updated arrays: MagnitudeBits of w and m,
// the raw bits of v (a sign bit above every magnitude).
uint32_t ExpectedBound(const std::vector<float>& w, const std::vector<float>& m,
                       const std::vector<float>& v) {
  uint32_t largest = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    uint32_t v_bits;
    std::memcpy(&v_bits, &v[i], sizeof(v_bits));
    largest = std::max({largest, MagnitudeBits(w[i]), MagnitudeBits(m[i]), v_bits});
  }
  return largest;
}

TEST(RuleKernels, MeasuredAdamUpdatesAsAdamAndReturnsTheLargestMagnitudeOfTheRow) {
  for (size_t n : kLengths) {
    for (bool with_out : {false, true}) {
      auto w = Random(n, -1.0f, 1.0f, 1), m = Random(n, -0.1f, 0.1f, 2);
      auto v = Random(n, 0.0f, 0.01f, 3), g = Random(n, -0.5f, 0.5f, 4);
      if (n > 2) w[n / 2] = 37.5f;  // the largest magnitude somewhere inside, not at an end
      auto w_ref = w, m_ref = m, v_ref = v;
      std::vector<float> out(n, -1.0f);
      for (int step = 0; step < 3; ++step) {
        const float lr_t = 1e-3f * (step + 1), eps_t = 1e-8f;
        const uint32_t bound =
            AdamKernelMeasured(n, 0.9f, 0.999f, lr_t, eps_t, w.data(), m.data(), v.data(), g.data(),
                               with_out ? out.data() : nullptr);
        AdamKernel(n, 0.9f, 0.999f, lr_t, eps_t, w_ref.data(), m_ref.data(), v_ref.data(),
                   g.data());
        EXPECT_EQ(bound, ExpectedBound(w, m, v)) << "length " << n << ", step " << step;
      }
      ExpectSameBits(w, w_ref, "w", n);
      ExpectSameBits(m, m_ref, "m", n);
      ExpectSameBits(v, v_ref, "v", n);
      if (with_out) ExpectSameBits(out, w, "out", n);
    }
  }
}

TEST(RuleKernels, MeasuredAdamCountsASignedSecondMomentAboveEveryMagnitude) {
  for (size_t n : {size_t{1}, size_t{17}, size_t{8192}}) {
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      auto w = Random(n, -1.0f, 1.0f, 5), m = Random(n, -0.1f, 0.1f, 6);
      auto v = Random(n, 0.0f, 0.01f, 7), g = Random(n, -0.5f, 0.5f, 8);
      v[at] = -1.0f;  // beta2 * v + (1 - beta2) g^2 stays negative: |g| <= 0.5
      const uint32_t bound =
          AdamKernelMeasured(n, 0.9f, 0.999f, 1e-3f, 1e-8f, w.data(), m.data(), v.data(), g.data());
      // sqrt(v) makes that w a NaN, above every bound too; the sign bit of v itself puts the
      // bound at or above 2^31, where no magnitude (NaNs included) lies.
      EXPECT_GE(bound, 0x80000000u) << "length " << n << ", negative v at " << at;
    }
  }
}

TEST(RuleKernels, AdagradAndSgdMatchTheScalarLoopsBitForBit) {
  for (size_t n : kLengths) {
    auto w = Random(n, -1.0f, 1.0f, 5), acc = Random(n, 0.0f, 0.1f, 6);
    auto g = Random(n, -0.5f, 0.5f, 7);
    auto w_ref = w, acc_ref = acc;
    AdagradKernel(n, 0.05f, 1e-6f, w.data(), acc.data(), g.data());
    for (volatile size_t i = 0; i < n; ++i) {
      acc_ref[i] += g[i] * g[i];
      w_ref[i] -= 0.05f * g[i] / (std::sqrt(acc_ref[i]) + 1e-6f);
    }
    ExpectSameBits(w, w_ref, "adagrad w", n);
    ExpectSameBits(acc, acc_ref, "adagrad accumulator", n);

    SgdKernel(n, 0.1f, w.data(), g.data());
    for (volatile size_t i = 0; i < n; ++i) w_ref[i] -= 0.1f * g[i];
    ExpectSameBits(w, w_ref, "sgd w", n);
  }
}

// With an output, each kernel updates as without one and copies every updated w[i] to it.
TEST(RuleKernels, AnOutputGetsTheUpdatedValuesAndChangesNothingElse) {
  for (size_t n : kLengths) {
    auto w = Random(n, -1.0f, 1.0f, 8), m = Random(n, -0.1f, 0.1f, 9);
    auto v = Random(n, 0.0f, 0.01f, 10), g = Random(n, -0.5f, 0.5f, 11);
    auto w_ref = w, m_ref = m, v_ref = v;
    std::vector<float> out(n, -9.0f);
    AdamKernel(n, 0.9f, 0.999f, 1e-3f, 1e-8f, w.data(), m.data(), v.data(), g.data(), out.data());
    AdamKernel(n, 0.9f, 0.999f, 1e-3f, 1e-8f, w_ref.data(), m_ref.data(), v_ref.data(), g.data());
    ExpectSameBits(w, w_ref, "adam w", n);
    ExpectSameBits(m, m_ref, "adam m", n);
    ExpectSameBits(v, v_ref, "adam v", n);
    ExpectSameBits(out, w, "adam out", n);

    std::fill(out.begin(), out.end(), -9.0f);
    AdagradKernel(n, 0.05f, 1e-6f, w.data(), v.data(), g.data(), out.data());
    AdagradKernel(n, 0.05f, 1e-6f, w_ref.data(), v_ref.data(), g.data());
    ExpectSameBits(w, w_ref, "adagrad w", n);
    ExpectSameBits(v, v_ref, "adagrad accumulator", n);
    ExpectSameBits(out, w, "adagrad out", n);

    std::fill(out.begin(), out.end(), -9.0f);
    SgdKernel(n, 0.1f, w.data(), g.data(), out.data());
    SgdKernel(n, 0.1f, w_ref.data(), g.data());
    ExpectSameBits(w, w_ref, "sgd w", n);
    ExpectSameBits(out, w, "sgd out", n);
  }
}

TEST(RuleKernels, MeasuredDeltaAddsAsTheScalarLoopAndReturnsTheLargestMagnitudeOfTheSums) {
  for (size_t n : kLengths) {
    for (bool with_out : {false, true}) {
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        if (n == 0 && at != 0) continue;
        auto w = Random(n, -1.0f, 1.0f, 12), g = Random(n, -1e-3f, 1e-3f, 13);
        if (n > 0) w[at] = -37.5f;  // the largest sum at an end or inside, negative
        auto w_ref = w;
        for (volatile size_t i = 0; i < n; ++i) w_ref[i] += g[i];
        std::vector<float> out(n, -9.0f);
        const uint32_t largest =
            AddDeltaMeasured(n, w.data(), g.data(), with_out ? out.data() : nullptr);
        ExpectSameBits(w, w_ref, "w", n);
        if (with_out) ExpectSameBits(out, w, "out", n);
        EXPECT_EQ(largest, MaxMagnitudeBits(w_ref.data(), n)) << "length " << n << " at " << at;
        if (n > 0) {
          EXPECT_EQ(largest, MagnitudeBits(w_ref[at])) << "length " << n;
        }
      }
    }
  }
}

TEST(RuleKernels, WideScansFindAValueAtEveryPositionAsTheInlineOnesDo) {
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  const uint32_t bound = MagnitudeBits(2.0f);
  for (size_t n : {size_t{256}, size_t{257}, size_t{300}, size_t{8192}}) {
    for (size_t at : {size_t{0}, size_t{1}, size_t{15}, n / 2, n - 17, n - 1}) {
      for (float odd : {3.0f, -3.0f, kInf, -kInf, kNan, -kNan, -0.0f, -1.0f}) {
        std::vector<float> values = Random(n, 0.0f, 1.5f, static_cast<uint32_t>(at + n));
        EXPECT_FALSE(AnyMagnitudeAboveWide(values.data(), n, bound));
        EXPECT_FALSE(AnySignBitWide(values.data(), n));
        values[at] = odd;
        EXPECT_EQ(AnyMagnitudeAboveWide(values.data(), n, bound),
                  AnyMagnitudeAbove(values.data(), n, bound))
            << "value " << odd << " at " << at << " of " << n;
        EXPECT_EQ(AnySignBitWide(values.data(), n), AnySignBit(values.data(), n))
            << "value " << odd << " at " << at << " of " << n;
        EXPECT_EQ(ScanMagnitudeAbove(values.data(), n, bound),
                  !(std::fabs(odd) <= 2.0f));  // NaN compares false
        EXPECT_EQ(MaxMagnitudeBitsWide(values.data(), n), MaxMagnitudeBits(values.data(), n))
            << "value " << odd << " at " << at << " of " << n;
        EXPECT_GE(ScanMaxMagnitude(values.data(), n), MagnitudeBits(odd));
      }
    }
  }
}

}  // namespace
}  // namespace fleet::ps::detail
