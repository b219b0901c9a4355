// Row-wise softmax and softmax_with_cross_entropy (hard labels) on CUDA, as the CPU kernels of
// softmax_loss_ops.cc: the maximum is subtracted before exp, and the loss is computed from the
// log-sum-exp (-log softmax[label] = log(sum exp(x - max)) - (x[label] - max)), so large logits
// neither overflow nor lose the loss to rounding.
//
// One warp per row: the rows of a classifier's logits are short (2 classes for CTR-DNN, tens to
// thousands elsewhere), and a warp reduces with shuffles and no shared memory.

#include "operators/cuda/kernels.h"
#include "operators/cuda/launch.cuh"

namespace fleet::operators::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kThreads / kWarp;

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Softmax of row `row`; returns log(sum exp(x - max)) and the max through the pointers.
__device__ __forceinline__ void RowSoftmax(const float* x, float* out, int64_t width, int lane,
                                           float* max_out, float* log_sum_out) {
  float m = -INFINITY;
  for (int64_t j = lane; j < width; j += kWarp) m = fmaxf(m, x[j]);
  m = WarpMax(m);
  float sum = 0.f;
  for (int64_t j = lane; j < width; j += kWarp) sum += __expf(x[j] - m);
  sum = WarpSum(sum);
  const float inv = 1.f / sum;
  if (out != nullptr) {
    for (int64_t j = lane; j < width; j += kWarp) out[j] = __expf(x[j] - m) * inv;
  }
  *max_out = m;
  *log_sum_out = logf(sum);
}

__global__ void SoftmaxKernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows,
                              int64_t width) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  if (row >= rows) return;
  float m, log_sum;
  RowSoftmax(x + row * width, out + row * width, width, threadIdx.x % kWarp, &m, &log_sum);
}

__global__ void SoftmaxGradKernel(const float* __restrict__ y, const float* __restrict__ dy,
                                  float* __restrict__ dx, int64_t rows, int64_t width) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  if (row >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const float* yr = y + row * width;
  const float* dyr = dy + row * width;
  float dot = 0.f;
  for (int64_t j = lane; j < width; j += kWarp) dot += yr[j] * dyr[j];
  dot = WarpSum(dot);
  for (int64_t j = lane; j < width; j += kWarp) dx[row * width + j] = yr[j] * (dyr[j] - dot);
}

__global__ void SoftmaxXentKernel(const float* __restrict__ logits,
                                  const int64_t* __restrict__ label, float* __restrict__ softmax,
                                  float* __restrict__ loss, int64_t rows, int64_t width,
                                  int64_t ignore) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarp;
  if (row >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const float* x = logits + row * width;
  float m, log_sum;
  RowSoftmax(x, softmax + row * width, width, lane, &m, &log_sum);
  if (lane == 0) {
    const int64_t l = label[row];
    // A label outside [0, width) other than ignore_index gives NaN, which the loss fetch shows
    // (the CPU kernel names it; a device kernel cannot stop the step).
    loss[row] = l == ignore ? 0.f : (l >= 0 && l < width ? log_sum - (x[l] - m) : NAN);
  }
}

__global__ void SoftmaxXentGradKernel(const float* __restrict__ softmax,
                                      const int64_t* __restrict__ label,
                                      const float* __restrict__ dloss, float* __restrict__ dlogits,
                                      int64_t rows, int64_t width, int64_t ignore) {
  FLEET_GRID_STRIDE(i, rows * width) {
    const int64_t row = i / width, j = i % width;
    const int64_t l = label[row];
    dlogits[i] = l == ignore ? 0.f : (softmax[i] - (j == l ? 1.f : 0.f)) * dloss[row];
  }
}

unsigned RowBlocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void Softmax(const float* x, float* out, int64_t rows, int64_t width, Stream stream) {
  if (rows == 0 || width == 0) return;
  SoftmaxKernel<<<RowBlocks(rows), kThreads, 0, AsStream(stream)>>>(x, out, rows, width);
  CheckLaunch("SoftmaxKernel");
}

void SoftmaxGrad(const float* out, const float* dout, float* dx, int64_t rows, int64_t width,
                 Stream stream) {
  if (rows == 0 || width == 0) return;
  SoftmaxGradKernel<<<RowBlocks(rows), kThreads, 0, AsStream(stream)>>>(out, dout, dx, rows, width);
  CheckLaunch("SoftmaxGradKernel");
}

void SoftmaxCrossEntropyHard(const float* logits, const int64_t* label, float* softmax, float* loss,
                             int64_t rows, int64_t width, int64_t ignore_index, Stream stream) {
  if (rows == 0 || width == 0) return;
  SoftmaxXentKernel<<<RowBlocks(rows), kThreads, 0, AsStream(stream)>>>(
      logits, label, softmax, loss, rows, width, ignore_index);
  CheckLaunch("SoftmaxXentKernel");
}

void SoftmaxCrossEntropyHardGrad(const float* softmax, const int64_t* label, const float* dloss,
                                 float* dlogits, int64_t rows, int64_t width, int64_t ignore_index,
                                 Stream stream) {
  const int64_t n = rows * width;
  if (n == 0) return;
  SoftmaxXentGradKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(
      softmax, label, dloss, dlogits, rows, width, ignore_index);
  CheckLaunch("SoftmaxXentGradKernel");
}

}  // namespace fleet::operators::cuda
