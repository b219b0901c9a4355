#pragma once
// Iteration over a row-major "full" tensor paired with a "partial" one that has the same rank and,
// along each dimension, either the full size or 1 (broadcast). Element-wise ops with broadcasting
// (full = X, partial = Y padded), their Y gradients, and reductions (full = X, partial = the
// output with the reduced dimensions kept as 1) all walk their data this way.
//
// Adjacent dimensions that broadcast alike are merged first, so the common cases cost one loop:
// equal shapes become a single contiguous run, [N, D] + [D] becomes N runs of D contiguous
// elements, and a reduction over the last dimension becomes one run per output element.

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace fleet::operators {

class BroadcastPlan {
 public:
  // `full` and `partial` have equal rank and partial[i] is full[i] or 1; the caller checks this
  // (with an error naming its op) before building a plan.
  BroadcastPlan(const Shape& full, const Shape& partial);

  // Calls fn(full_offset, partial_offset, length, partial_contiguous) for each innermost run of
  // `length` full elements, in increasing full_offset order. When partial_contiguous is true
  // the run pairs full[full_offset + i] with partial[partial_offset + i]; otherwise every full
  // element of the run pairs with the single partial[partial_offset].
  template <typename Fn>
  void ForEachRun(Fn&& fn) const {
    if (full_numel_ == 0) return;
    const size_t outer = outer_dims_.size();
    std::vector<int64_t> index(outer, 0);
    int64_t partial_offset = 0;
    for (int64_t run = 0; run < num_runs_; ++run) {
      fn(run * inner_, partial_offset, inner_, !inner_broadcast_);
      for (size_t d = outer; d-- > 0;) {
        partial_offset += outer_strides_[d];
        if (++index[d] < outer_dims_[d]) break;
        partial_offset -= outer_strides_[d] * outer_dims_[d];
        index[d] = 0;
      }
    }
  }

  int64_t full_numel() const { return full_numel_; }
  int64_t partial_numel() const { return partial_numel_; }

 private:
  std::vector<int64_t> outer_dims_;     // merged dimensions above the innermost one
  std::vector<int64_t> outer_strides_;  // partial's stride along each (0 where broadcast)
  int64_t inner_ = 1;                   // length of the innermost merged dimension
  bool inner_broadcast_ = false;
  int64_t num_runs_ = 0;
  int64_t full_numel_ = 0;
  int64_t partial_numel_ = 0;
};

// Sum of value(0) .. value(n - 1) in Acc. Eight independent accumulators let the compiler keep
// several adds in flight (and use SIMD lanes) without reassociating one long chain.
template <typename Acc, typename Fn>
Acc SumOf(int64_t n, Fn&& value) {
  Acc lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += static_cast<Acc>(value(i + k));
  }
  Acc tail = 0;
  for (; i < n; ++i) tail += static_cast<Acc>(value(i));
  return tail + ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace fleet::operators
