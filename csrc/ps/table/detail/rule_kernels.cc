#include "ps/table/detail/rule_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// GCC resolves a target_clones function once, at load time, through an ifunc; other compilers
// and other architectures get the one plain loop, which their optimiser vectorises as it can.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define FLEET_WIDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FLEET_WIDE_CLONES
#endif

namespace fleet::ps::detail {

// Each kernel has its loop twice, with and without `out`, so that neither tests it per element.

FLEET_WIDE_CLONES
void SgdKernel(size_t dim, float lr, float* __restrict w, const float* __restrict g,
               float* __restrict out) {
  if (out == nullptr) {
    for (size_t i = 0; i < dim; ++i) w[i] -= lr * g[i];
    return;
  }
  for (size_t i = 0; i < dim; ++i) out[i] = w[i] -= lr * g[i];
}

FLEET_WIDE_CLONES
void AdagradKernel(size_t dim, float lr, float eps, float* __restrict w, float* __restrict acc,
                   const float* __restrict g, float* __restrict out) {
  if (out == nullptr) {
    for (size_t i = 0; i < dim; ++i) {
      acc[i] += g[i] * g[i];
      w[i] -= lr * g[i] / (std::sqrt(acc[i]) + eps);
    }
    return;
  }
  for (size_t i = 0; i < dim; ++i) {
    acc[i] += g[i] * g[i];
    out[i] = w[i] -= lr * g[i] / (std::sqrt(acc[i]) + eps);
  }
}

namespace {

// AdamKernel's loop without `out`, inlined into AdamKernel and AdamRowsKernel (and so compiled
// once per clone of each), so that both run the same operations.
__attribute__((always_inline)) inline void AdamLoop(size_t dim, float beta1, float beta2,
                                                    float lr_t, float eps_t, float* __restrict w,
                                                    float* __restrict m, float* __restrict v,
                                                    const float* __restrict g) {
  for (size_t i = 0; i < dim; ++i) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps_t);
  }
}

}  // namespace

FLEET_WIDE_CLONES
void AdamKernel(size_t dim, float beta1, float beta2, float lr_t, float eps_t, float* __restrict w,
                float* __restrict m, float* __restrict v, const float* __restrict g,
                float* __restrict out) {
  if (out == nullptr) {
    AdamLoop(dim, beta1, beta2, lr_t, eps_t, w, m, v, g);
    return;
  }
  for (size_t i = 0; i < dim; ++i) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    out[i] = w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps_t);
  }
}

FLEET_WIDE_CLONES
void AdamRowsKernel(size_t dim, size_t n, float beta1, float beta2, float lr, float eps,
                    float* const* rows, size_t state_offset, const float* grads) {
  for (size_t r = 0; r < n; ++r) {
    float* w = rows[r];
    float* m = w + state_offset;
    float* v = m + dim;
    float& beta1_pow = v[dim];
    float& beta2_pow = v[dim + 1];
    // As AdamRule computes them for one row.
    const float correction = std::sqrt(1.0f - beta2_pow);
    const float lr_t = lr * correction / (1.0f - beta1_pow);
    const float eps_t = eps * correction;
    AdamLoop(dim, beta1, beta2, lr_t, eps_t, w, m, v, grads + r * dim);
    beta1_pow *= beta1;
    beta2_pow *= beta2;
  }
}

namespace {

// AdamKernelMeasured's loop, with or without `out` (a constant in each instantiation).
template <bool kOut>
inline uint32_t AdamMeasuredLoop(size_t dim, float beta1, float beta2, float lr_t, float eps_t,
                                 float* __restrict w, float* __restrict m, float* __restrict v,
                                 const float* __restrict g, float* __restrict out) {
  uint32_t largest = 0;
  for (size_t i = 0; i < dim; ++i) {
    const float m_i = beta1 * m[i] + (1.0f - beta1) * g[i];
    const float v_i = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    const float w_i = w[i] - lr_t * m_i / (std::sqrt(v_i) + eps_t);
    m[i] = m_i;
    v[i] = v_i;
    w[i] = w_i;
    if constexpr (kOut) out[i] = w_i;
    uint32_t v_bits;
    std::memcpy(&v_bits, &v_i, sizeof(v_bits));
    largest = std::max({largest, MagnitudeBits(w_i), MagnitudeBits(m_i), v_bits});
  }
  return largest;
}

}  // namespace

FLEET_WIDE_CLONES
uint32_t AdamKernelMeasured(size_t dim, float beta1, float beta2, float lr_t, float eps_t,
                            float* __restrict w, float* __restrict m, float* __restrict v,
                            const float* __restrict g, float* __restrict out) {
  if (out == nullptr) {
    return AdamMeasuredLoop<false>(dim, beta1, beta2, lr_t, eps_t, w, m, v, g, nullptr);
  }
  return AdamMeasuredLoop<true>(dim, beta1, beta2, lr_t, eps_t, w, m, v, g, out);
}

namespace {

// AddDeltaMeasured's loop, with or without `out` (a constant in each instantiation).
template <bool kOut>
inline uint32_t AddDeltaLoop(size_t dim, float* __restrict w, const float* __restrict g,
                             float* __restrict out) {
  uint32_t largest = 0;
  for (size_t i = 0; i < dim; ++i) {
    const float w_i = w[i] + g[i];
    w[i] = w_i;
    if constexpr (kOut) out[i] = w_i;
    largest = std::max(largest, MagnitudeBits(w_i));
  }
  return largest;
}

}  // namespace

FLEET_WIDE_CLONES
uint32_t AddDeltaMeasured(size_t dim, float* __restrict w, const float* __restrict g,
                          float* __restrict out) {
  if (out == nullptr) return AddDeltaLoop<false>(dim, w, g, nullptr);
  return AddDeltaLoop<true>(dim, w, g, out);
}

FLEET_WIDE_CLONES
bool AnyMagnitudeAboveWide(const float* values, size_t n, uint32_t bits) {
  return AnyMagnitudeAbove(values, n, bits);
}

FLEET_WIDE_CLONES
uint32_t MaxMagnitudeBitsWide(const float* values, size_t n) { return MaxMagnitudeBits(values, n); }

FLEET_WIDE_CLONES
bool AnySignBitWide(const float* values, size_t n) { return AnySignBit(values, n); }

}  // namespace fleet::ps::detail
