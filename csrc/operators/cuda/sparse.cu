// CUDA kernels of the sparse side of CTR models: embedding lookup and its gradients, sequence
// pooling over LoD offsets, and the sparse sgd update, as the CPU kernels of embedding_ops.cc,
// sequence_ops.cc and optimizer_ops.cc. Embedding rows are short (10 to 64 floats), so one
// thread handles one element and consecutive threads walk a row: reads stay coalesced.

#include "operators/cuda/kernels.h"
#include "operators/cuda/launch.cuh"

namespace fleet::operators::cuda {
namespace {

__global__ void LookupKernel(const float* __restrict__ w, const int64_t* __restrict__ ids,
                             float* __restrict__ out, int64_t num_ids, int64_t width,
                             int64_t padding) {
  FLEET_GRID_STRIDE(i, num_ids * width) {
    const int64_t id = ids[i / width];
    out[i] = id == padding ? 0.f : w[id * width + i % width];
  }
}

__global__ void GradRowsKernel(const int64_t* __restrict__ ids, int64_t* __restrict__ rows,
                               int64_t n, int64_t padding) {
  FLEET_GRID_STRIDE(i, n) { rows[i] = ids[i] == padding ? -1 : ids[i]; }
}

__global__ void DenseGradKernel(const int64_t* __restrict__ ids, const float* __restrict__ dout,
                                float* __restrict__ dw, int64_t num_ids, int64_t width,
                                int64_t padding) {
  FLEET_GRID_STRIDE(i, num_ids * width) {
    const int64_t id = ids[i / width];
    if (id != padding) atomicAdd(dw + id * width + i % width, dout[i]);
  }
}

__device__ __forceinline__ float PoolScale(Pool pool, int64_t len) {
  if (pool == Pool::kSum || len == 0) return 1.f;
  return pool == Pool::kAverage ? 1.f / static_cast<float>(len) : rsqrtf(static_cast<float>(len));
}

// Thread per (sequence, column).
__global__ void PoolKernel(Pool pool, const float* __restrict__ x,
                           const int64_t* __restrict__ offsets, float* __restrict__ out,
                           int64_t num_seq, int64_t width) {
  FLEET_GRID_STRIDE(i, num_seq * width) {
    const int64_t s = i / width, j = i % width;
    const int64_t begin = offsets[s], end = offsets[s + 1];
    float sum = 0.f;
    for (int64_t r = begin; r < end; ++r) sum += x[r * width + j];
    out[i] = sum * PoolScale(pool, end - begin);
  }
}

__global__ void PoolGradKernel(Pool pool, const float* __restrict__ dout,
                               const int64_t* __restrict__ offsets, float* __restrict__ dx,
                               int64_t num_seq, int64_t width) {
  FLEET_GRID_STRIDE(i, num_seq * width) {
    const int64_t s = i / width, j = i % width;
    const int64_t begin = offsets[s], end = offsets[s + 1];
    const float g = dout[i] * PoolScale(pool, end - begin);
    for (int64_t r = begin; r < end; ++r) dx[r * width + j] = g;
  }
}

__global__ void SparseSgdKernel(const float* __restrict__ lr, const int64_t* __restrict__ rows,
                                const float* __restrict__ value, float* __restrict__ param,
                                int64_t num_rows, int64_t width) {
  const float rate = lr[0];
  FLEET_GRID_STRIDE(i, num_rows * width) {
    const int64_t row = rows[i / width];
    if (row >= 0) atomicAdd(param + row * width + i % width, -rate * value[i]);
  }
}

}  // namespace

void EmbeddingLookup(const float* w, const int64_t* ids, float* out, int64_t num_ids, int64_t width,
                     int64_t padding_idx, Stream stream) {
  const int64_t n = num_ids * width;
  if (n == 0) return;
  LookupKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(w, ids, out, num_ids, width,
                                                             padding_idx);
  CheckLaunch("LookupKernel");
}

void SparseGradRows(const int64_t* ids, int64_t* rows, int64_t n, int64_t padding_idx,
                    Stream stream) {
  if (n == 0) return;
  GradRowsKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(ids, rows, n, padding_idx);
  CheckLaunch("GradRowsKernel");
}

void EmbeddingDenseGrad(const int64_t* ids, const float* dout, float* dw, int64_t num_ids,
                        int64_t width, int64_t padding_idx, Stream stream) {
  const int64_t n = num_ids * width;
  if (n == 0) return;
  DenseGradKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(ids, dout, dw, num_ids, width,
                                                                padding_idx);
  CheckLaunch("DenseGradKernel");
}

void SequencePool(Pool pool, const float* x, const int64_t* offsets, float* out, int64_t num_seq,
                  int64_t width, Stream stream) {
  const int64_t n = num_seq * width;
  if (n == 0) return;
  PoolKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(pool, x, offsets, out, num_seq, width);
  CheckLaunch("PoolKernel");
}

void SequencePoolGrad(Pool pool, const float* dout, const int64_t* offsets, float* dx,
                      int64_t num_seq, int64_t width, Stream stream) {
  const int64_t n = num_seq * width;
  if (n == 0) return;
  PoolGradKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(pool, dout, offsets, dx, num_seq,
                                                               width);
  CheckLaunch("PoolGradKernel");
}

void SparseSgd(const float* lr, const int64_t* rows, const float* value, float* param,
               int64_t num_rows, int64_t width, Stream stream) {
  const int64_t n = num_rows * width;
  if (n == 0) return;
  SparseSgdKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(lr, rows, value, param, num_rows,
                                                                width);
  CheckLaunch("SparseSgdKernel");
}

}  // namespace fleet::operators::cuda
