// Element-wise CUDA kernels: fills, scale, activations, broadcast add and its Y gradient, mean,
// casts and sigmoid cross entropy. Each follows the CPU kernel of the same op (activation_ops.cc,
// elementwise_ops.cc, reduce_ops.cc, shape_ops.cc, softmax_loss_ops.cc).

#include "operators/cuda/kernels.h"
#include "operators/cuda/launch.cuh"

namespace fleet::operators::cuda {
namespace {

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  FLEET_GRID_STRIDE(i, n) { out[i] = value; }
}

__global__ void ScaleKernel(const float* x, float* out, int64_t n, float scale, float bias,
                            bool after) {
  FLEET_GRID_STRIDE(i, n) { out[i] = after ? scale * x[i] + bias : scale * (x[i] + bias); }
}

template <Activation kAct>
__device__ __forceinline__ float Apply(float x) {
  if constexpr (kAct == Activation::kRelu) return x > 0.f ? x : 0.f;
  if constexpr (kAct == Activation::kSigmoid) return 1.f / (1.f + __expf(-x));
  return tanhf(x);
}

// dx from the forward output y.
template <Activation kAct>
__device__ __forceinline__ float Derive(float y, float dy) {
  if constexpr (kAct == Activation::kRelu) return y > 0.f ? dy : 0.f;
  if constexpr (kAct == Activation::kSigmoid) return dy * y * (1.f - y);
  return dy * (1.f - y * y);
}

template <Activation kAct>
__global__ void ActivationKernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  FLEET_GRID_STRIDE(i, n) { out[i] = Apply<kAct>(x[i]); }
}

template <Activation kAct>
__global__ void ActivationGradKernel(const float* __restrict__ out, const float* __restrict__ dout,
                                     float* __restrict__ dx, int64_t n) {
  FLEET_GRID_STRIDE(i, n) { dx[i] = Derive<kAct>(out[i], dout[i]); }
}

__global__ void AddBroadcastKernel(const float* __restrict__ x, const float* __restrict__ y,
                                   float* __restrict__ out, int64_t total, int64_t n,
                                   int64_t post) {
  FLEET_GRID_STRIDE(i, total) { out[i] = x[i] + y[(i / post) % n]; }
}

__global__ void AddInPlaceKernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  FLEET_GRID_STRIDE(i, n) { out[i] += x[i]; }
}

// One thread per output column j for post == 1 (the bias case: coalesced reads across the
// warp), each summing `rows_per_block` rows, with one atomicAdd per block into dy (zeroed).
__global__ void SumColumnsKernel(const float* __restrict__ dout, float* __restrict__ dy,
                                 int64_t rows, int64_t n, int64_t rows_per_block) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= n) return;
  const int64_t begin = blockIdx.y * rows_per_block;
  const int64_t end = min(rows, begin + rows_per_block);
  float sum = 0.f;
  for (int64_t r = begin; r < end; ++r) sum += dout[r * n + j];
  atomicAdd(dy + j, sum);
}

// General [pre, n, post] -> [n]: one block per j, threads over (p, q).
__global__ void SumToBroadcastKernel(const float* __restrict__ dout, float* __restrict__ dy,
                                     int64_t pre, int64_t n, int64_t post) {
  __shared__ float partial[kThreads];
  const int64_t j = blockIdx.x;
  float sum = 0.f;
  for (int64_t k = threadIdx.x; k < pre * post; k += blockDim.x) {
    const int64_t p = k / post, q = k % post;
    sum += dout[(p * n + j) * post + q];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) dy[j] = partial[0];
}

// One block sums everything (the means of a training step are small: a loss per sample).
__global__ void MeanKernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  __shared__ double partial[1024];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += x[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = static_cast<float>(partial[0] / static_cast<double>(n));
}

__global__ void MeanGradKernel(const float* __restrict__ dout, float* __restrict__ dx, int64_t n) {
  const float g = dout[0] / static_cast<float>(n);
  FLEET_GRID_STRIDE(i, n) { dx[i] = g; }
}

template <typename From, typename To>
__global__ void CastKernel(const From* __restrict__ x, To* __restrict__ out, int64_t n) {
  FLEET_GRID_STRIDE(i, n) { out[i] = static_cast<To>(x[i]); }
}

__device__ __forceinline__ bool Kept(float label, float ignore) { return label != ignore; }

// Count of kept labels for `normalize` (one block).
__global__ void CountKeptKernel(const float* __restrict__ label, int64_t n, float ignore,
                                float* __restrict__ count) {
  __shared__ float partial[kThreads];
  float c = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) c += Kept(label[i], ignore) ? 1.f : 0.f;
  partial[threadIdx.x] = c;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) count[0] = fmaxf(partial[0], 1e-5f);  // as the CPU kernel
}

__global__ void SigmoidXentKernel(const float* __restrict__ x, const float* __restrict__ label,
                                  float* __restrict__ loss, int64_t n, float ignore,
                                  const float* count) {
  FLEET_GRID_STRIDE(i, n) {
    const float v = x[i], l = label[i];
    float out = 0.f;
    if (Kept(l, ignore)) out = fmaxf(v, 0.f) - v * l + log1pf(__expf(-fabsf(v)));
    loss[i] = count == nullptr ? out : out / count[0];
  }
}

__global__ void SigmoidXentGradKernel(const float* __restrict__ x, const float* __restrict__ label,
                                      const float* __restrict__ dloss, float* __restrict__ dx,
                                      int64_t n, float ignore, const float* count) {
  FLEET_GRID_STRIDE(i, n) {
    const float l = label[i];
    float g = 0.f;
    if (Kept(l, ignore)) g = (1.f / (1.f + __expf(-x[i])) - l) * dloss[i];
    dx[i] = count == nullptr ? g : g / count[0];
  }
}

template <Activation kAct>
void LaunchActivation(const float* x, float* out, int64_t n, Stream stream) {
  ActivationKernel<kAct><<<Blocks(n), kThreads, 0, AsStream(stream)>>>(x, out, n);
}

template <Activation kAct>
void LaunchActivationGrad(const float* out, const float* dout, float* dx, int64_t n,
                          Stream stream) {
  ActivationGradKernel<kAct><<<Blocks(n), kThreads, 0, AsStream(stream)>>>(out, dout, dx, n);
}

template <typename From>
void CastFrom(const From* x, int to, void* out, int64_t n, cudaStream_t s) {
  switch (to) {
    case 0:
      CastKernel<<<Blocks(n), kThreads, 0, s>>>(x, static_cast<float*>(out), n);
      break;
    case 1:
      CastKernel<<<Blocks(n), kThreads, 0, s>>>(x, static_cast<double*>(out), n);
      break;
    case 2:
      CastKernel<<<Blocks(n), kThreads, 0, s>>>(x, static_cast<int32_t*>(out), n);
      break;
    case 3:
      CastKernel<<<Blocks(n), kThreads, 0, s>>>(x, static_cast<int64_t*>(out), n);
      break;
    default:
      throw ::fleet::InvalidArgument("cast on CUDA: unsupported output dtype code " +
                                     std::to_string(to));
  }
}

}  // namespace

void Fill32(void* out, int64_t n, uint32_t value, Stream stream) {
  if (n == 0) return;
  FillKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(static_cast<uint32_t*>(out), n, value);
  CheckLaunch("FillKernel");
}

void Fill64(void* out, int64_t n, uint64_t value, Stream stream) {
  if (n == 0) return;
  FillKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(static_cast<uint64_t*>(out), n, value);
  CheckLaunch("FillKernel");
}

void Scale(const float* x, float* out, int64_t n, float scale, float bias, bool bias_after_scale,
           Stream stream) {
  if (n == 0) return;
  ScaleKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(x, out, n, scale, bias,
                                                            bias_after_scale);
  CheckLaunch("ScaleKernel");
}

void ActivationForward(Activation act, const float* x, float* out, int64_t n, Stream stream) {
  if (n == 0) return;
  switch (act) {
    case Activation::kRelu:
      LaunchActivation<Activation::kRelu>(x, out, n, stream);
      break;
    case Activation::kSigmoid:
      LaunchActivation<Activation::kSigmoid>(x, out, n, stream);
      break;
    case Activation::kTanh:
      LaunchActivation<Activation::kTanh>(x, out, n, stream);
      break;
  }
  CheckLaunch("ActivationKernel");
}

void ActivationBackward(Activation act, const float* out, const float* dout, float* dx, int64_t n,
                        Stream stream) {
  if (n == 0) return;
  switch (act) {
    case Activation::kRelu:
      LaunchActivationGrad<Activation::kRelu>(out, dout, dx, n, stream);
      break;
    case Activation::kSigmoid:
      LaunchActivationGrad<Activation::kSigmoid>(out, dout, dx, n, stream);
      break;
    case Activation::kTanh:
      LaunchActivationGrad<Activation::kTanh>(out, dout, dx, n, stream);
      break;
  }
  CheckLaunch("ActivationGradKernel");
}

void AddBroadcast(const float* x, const float* y, float* out, int64_t pre, int64_t n, int64_t post,
                  Stream stream) {
  const int64_t total = pre * n * post;
  if (total == 0) return;
  AddBroadcastKernel<<<Blocks(total), kThreads, 0, AsStream(stream)>>>(x, y, out, total, n, post);
  CheckLaunch("AddBroadcastKernel");
}

void AddInPlace(const float* x, float* out, int64_t n, Stream stream) {
  if (n == 0) return;
  AddInPlaceKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(x, out, n);
  CheckLaunch("AddInPlaceKernel");
}

void SumToBroadcast(const float* dout, float* dy, int64_t pre, int64_t n, int64_t post,
                    Stream stream) {
  if (n == 0) return;
  cudaStream_t s = AsStream(stream);
  if (post == 1) {
    CheckCuda(cudaMemsetAsync(dy, 0, sizeof(float) * n, s), "cudaMemsetAsync");
    const int64_t rows_per_block = 64;
    dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads),
              static_cast<unsigned>((pre + rows_per_block - 1) / rows_per_block));
    if (pre > 0) SumColumnsKernel<<<grid, kThreads, 0, s>>>(dout, dy, pre, n, rows_per_block);
  } else {
    SumToBroadcastKernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(dout, dy, pre, n, post);
  }
  CheckLaunch("SumToBroadcastKernel");
}

void Mean(const float* x, float* out, int64_t n, Stream stream) {
  MeanKernel<<<1, 1024, 0, AsStream(stream)>>>(x, out, n);
  CheckLaunch("MeanKernel");
}

void MeanGrad(const float* dout, float* dx, int64_t n, Stream stream) {
  if (n == 0) return;
  MeanGradKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(dout, dx, n);
  CheckLaunch("MeanGradKernel");
}

void Cast(const void* x, int from, void* out, int to, int64_t n, Stream stream) {
  if (n == 0) return;
  cudaStream_t s = AsStream(stream);
  switch (from) {
    case 0:
      CastFrom(static_cast<const float*>(x), to, out, n, s);
      break;
    case 1:
      CastFrom(static_cast<const double*>(x), to, out, n, s);
      break;
    case 2:
      CastFrom(static_cast<const int32_t*>(x), to, out, n, s);
      break;
    case 3:
      CastFrom(static_cast<const int64_t*>(x), to, out, n, s);
      break;
    default:
      throw ::fleet::InvalidArgument("cast on CUDA: unsupported input dtype code " +
                                     std::to_string(from));
  }
  CheckLaunch("CastKernel");
}

void SigmoidCrossEntropy(const float* x, const float* label, float* loss, int64_t n,
                         float ignore_index, float* count, Stream stream) {
  if (n == 0) return;
  cudaStream_t s = AsStream(stream);
  if (count != nullptr) CountKeptKernel<<<1, kThreads, 0, s>>>(label, n, ignore_index, count);
  SigmoidXentKernel<<<Blocks(n), kThreads, 0, s>>>(x, label, loss, n, ignore_index, count);
  CheckLaunch("SigmoidXentKernel");
}

void SigmoidCrossEntropyGrad(const float* x, const float* label, const float* dloss, float* dx,
                             int64_t n, float ignore_index, float* count, Stream stream) {
  if (n == 0) return;
  cudaStream_t s = AsStream(stream);
  if (count != nullptr) CountKeptKernel<<<1, kThreads, 0, s>>>(label, n, ignore_index, count);
  SigmoidXentGradKernel<<<Blocks(n), kThreads, 0, s>>>(x, label, dloss, dx, n, ignore_index, count);
  CheckLaunch("SigmoidXentGradKernel");
}

}  // namespace fleet::operators::cuda
