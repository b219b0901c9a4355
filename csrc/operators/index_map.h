#pragma once
// The element walk of ops that read their input at computed positions: transpose, expand and
// slice. Each output element at multi-index i reads the input at
//   base + sum_d (period[d] ? i[d] % period[d] : i[d]) * stride[d],
// which covers a permutation (strides permuted), a tiling (period = the input's dimension) and
// a window (base = the window's first element). The walk keeps a running offset, so the inner
// step is an add, not a multiply per dimension.

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/tensor.h"

namespace fleet::operators {

// Row-major strides, in elements, of a tensor of `shape`.
inline std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

struct IndexMap {
  Shape out_shape;
  std::vector<int64_t> stride;  // input elements per step along output dimension d
  std::vector<int64_t> period;  // 0: the input index grows with the output's; else wraps
  int64_t base = 0;

  // Calls fn(out_index, in_offset) for every output element in row-major order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    const int64_t n = NumElements(out_shape);
    if (n == 0) return;
    const size_t rank = out_shape.size();
    if (rank == 0) {
      fn(int64_t{0}, base);
      return;
    }
    std::vector<int64_t> idx(rank, 0), contrib(rank, 0);
    int64_t offset = base;
    for (int64_t o = 0; o < n; ++o) {
      fn(o, offset);
      for (size_t d = rank; d-- > 0;) {
        offset -= contrib[d];
        if (++idx[d] < out_shape[d]) {
          contrib[d] = (period[d] > 0 ? idx[d] % period[d] : idx[d]) * stride[d];
          offset += contrib[d];
          break;
        }
        idx[d] = 0;
        contrib[d] = 0;
      }
    }
  }

  // out[o] = in[offset(o)] for elements of `elem_size` bytes (any dtype).
  void Gather(const void* in, void* out, size_t elem_size) const {
    const char* src = static_cast<const char*>(in);
    char* dst = static_cast<char*>(out);
    ForEach([&](int64_t o, int64_t off) {
      std::memcpy(dst + o * elem_size, src + off * elem_size, elem_size);
    });
  }
};

}  // namespace fleet::operators
