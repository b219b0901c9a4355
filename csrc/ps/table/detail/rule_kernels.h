#pragma once
// The update rules' element loops and the tables' magnitude scans over long arrays, compiled for
// AVX-512, AVX2 and baseline x86-64 and picked at load time by the CPU the process runs on
// (GCC target_clones). A dense Adam push of CTR-DNN's 426k floats spent about a third of the
// server's CPU in these loops at SSE2's four lanes.
//
// Every clone computes each element with the same IEEE operations in the same order (no
// fused multiply-add, no reassociation: rule_kernels.cc is built with -ffp-contract=off), so the
// results are bit for bit those of the baseline build whichever clone runs. The arrays of one
// call must not overlap.
//
// `out`, when not null, receives a copy of each updated w[i] (dim floats) from the same loop: a
// dense push-pull writes its reply there, which saves reading the values again after the update.

#include <cstddef>
#include <cstdint>

#include "ps/table/detail/magnitude.h"

namespace fleet::ps::detail {

// w[i] -= lr * g[i].
void SgdKernel(size_t dim, float lr, float* w, const float* g, float* out = nullptr);

// The fluid `adagrad` op: acc[i] += g[i]^2; w[i] -= lr * g[i] / (sqrt(acc[i]) + eps).
void AdagradKernel(size_t dim, float lr, float eps, float* w, float* acc, const float* g,
                   float* out = nullptr);

// The fluid `adam` op's element step with the bias correction folded into lr_t and eps_t:
// m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; w -= lr_t m / (sqrt(v) + eps_t).
void AdamKernel(size_t dim, float beta1, float beta2, float lr_t, float eps_t, float* w, float* m,
                float* v, const float* g, float* out = nullptr);

// AdamKernel for `n` distinct rows of a sparse table, each with its own bias correction: row r's
// dim values at rows[r], its state (m[dim], v[dim], beta1^t, beta2^t) at rows[r] + state_offset
// and its gradient at grads + r * dim. Per row the operations of AdamRule's update of one row, in
// its order (lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t), eps_t = eps * sqrt(1 - beta2^t),
// AdamKernel, then each power times its beta), so bit for bit the same rows; one call for
// several rows instead of a rule's virtual call, its scalars and an indirect call per row.
void AdamRowsKernel(size_t dim, size_t n, float beta1, float beta2, float lr, float eps,
                    float* const* rows, size_t state_offset, const float* grads);

// AdamKernel that also returns a bound on the row it leaves, found in the same loop: the largest
// MagnitudeBits of the updated w and m and the largest raw bit pattern of the updated v, so that
// a v with its sign bit set (negative, -0 or a NaN) counts above every magnitude bound. A dense
// table keeps it for the block's next push, whose proof of range (UpdateRule::UpdateStaysWithin)
// then reads only the gradient instead of scanning w, m and v again.
uint32_t AdamKernelMeasured(size_t dim, float beta1, float beta2, float lr_t, float eps_t, float* w,
                            float* m, float* v, const float* g, float* out = nullptr);

// w[i] += g[i] (a GEO delta) and the largest MagnitudeBits of the sums, found in the same loop:
// a dense table keeps it for the block's next delta push, whose proof of range then reads only
// the deltas instead of scanning the values again (with the add, the scan was two of a dense
// delta push's three passes over the values).
uint32_t AddDeltaMeasured(size_t dim, float* w, const float* g, float* out = nullptr);

// magnitude.h's AnyMagnitudeAbove and AnySignBit, the same answers, for long arrays (the clone
// is reached through an indirect call, which short rows are better off without).
bool AnyMagnitudeAboveWide(const float* values, size_t n, uint32_t bits);
bool AnySignBitWide(const float* values, size_t n);

// magnitude.h's MaxMagnitudeBits, the same answer, for long arrays: a dense push finds each
// block's largest gradient once, for both its check of finiteness and its proof of range.
uint32_t MaxMagnitudeBitsWide(const float* values, size_t n);

// Arrays at least this long go to the wide scans; shorter ones (sparse rows) stay inline.
inline constexpr size_t kWideScanMin = 256;

// AnyMagnitudeAbove and AnySignBit of any length, each length where it runs fastest.
inline bool ScanMagnitudeAbove(const float* values, size_t n, uint32_t bits) {
  return n < kWideScanMin ? AnyMagnitudeAbove(values, n, bits)
                          : AnyMagnitudeAboveWide(values, n, bits);
}
inline bool ScanSignBit(const float* values, size_t n) {
  return n < kWideScanMin ? AnySignBit(values, n) : AnySignBitWide(values, n);
}
inline uint32_t ScanMaxMagnitude(const float* values, size_t n) {
  return n < kWideScanMin ? MaxMagnitudeBits(values, n) : MaxMagnitudeBitsWide(values, n);
}

}  // namespace fleet::ps::detail
