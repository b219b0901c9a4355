// CUDA kernels of the optimizer updates: the host-array entry points of optimizer_cuda.h, and
// the launchers on device tensors of cuda/kernels.h that the CUDA executor's ops call. The
// per-element rules are those of the CPU ops (optimizer_math.h). On device tensors the learning
// rate and the beta powers are read from device memory, so an update never waits for the host.

#include <algorithm>
#include <string>

#include "core/cuda_device.h"
#include "operators/cuda/kernels.h"
#include "operators/optimizer_cuda.h"
#include "operators/optimizer_math.h"

namespace fleet::operators {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride loops cover any n

int Blocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

__global__ void SgdKernel(float lr, const float* __restrict__ g, float* __restrict__ p, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    SgdElement(lr, g[i], p + i);
  }
}

__global__ void AdamKernel(AdamStep step, const float* __restrict__ g, float* __restrict__ p,
                           float* __restrict__ m1, float* __restrict__ m2, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    AdamElement(step, g[i], p + i, m1 + i, m2 + i);
  }
}

// A device copy of n host floats.
CudaBuffer ToDevice(const float* host, int64_t n) {
  CudaBuffer buffer(sizeof(float) * n);
  buffer.CopyFromHost(host, sizeof(float) * n);
  return buffer;
}

void CheckLaunch(const char* kernel) {
  CheckCuda(static_cast<int>(cudaGetLastError()), std::string("launch of ") + kernel);
}

}  // namespace

void CudaSgdUpdate(int device, float lr, const float* grad, float* param, int64_t n) {
  CudaSetDevice(device);
  if (n <= 0) return;
  CudaBuffer p = ToDevice(param, n);
  CudaBuffer g = ToDevice(grad, n);
  SgdKernel<<<Blocks(n), kThreads>>>(lr, g.data_as<float>(), p.data_as<float>(), n);
  CheckLaunch("SgdKernel");
  p.CopyToHost(param, sizeof(float) * n);
}

void CudaAdamUpdate(int device, const AdamHyperParams& hyper, const float* grad, float* param,
                    float* moment1, float* moment2, float* beta1_pow, float* beta2_pow, int64_t n) {
  CudaSetDevice(device);
  const AdamStep step = MakeAdamStep(hyper.learning_rate, hyper.beta1, hyper.beta2, hyper.epsilon,
                                     *beta1_pow, *beta2_pow);
  if (n > 0) {
    CudaBuffer p = ToDevice(param, n);
    CudaBuffer g = ToDevice(grad, n);
    CudaBuffer m1 = ToDevice(moment1, n);
    CudaBuffer m2 = ToDevice(moment2, n);
    AdamKernel<<<Blocks(n), kThreads>>>(step, g.data_as<float>(), p.data_as<float>(),
                                        m1.data_as<float>(), m2.data_as<float>(), n);
    CheckLaunch("AdamKernel");
    p.CopyToHost(param, sizeof(float) * n);
    m1.CopyToHost(moment1, sizeof(float) * n);
    m2.CopyToHost(moment2, sizeof(float) * n);
  }
  *beta1_pow *= hyper.beta1;
  *beta2_pow *= hyper.beta2;
}

}  // namespace fleet::operators

namespace fleet::operators::cuda {
namespace {

__global__ void SgdDenseKernel(const float* __restrict__ lr, const float* __restrict__ g,
                               float* __restrict__ p, int64_t n) {
  const float rate = lr[0];
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    SgdElement(rate, g[i], p + i);
  }
}

__global__ void MomentumKernel(const float* __restrict__ lr, float mu, bool nesterov,
                               const float* __restrict__ g, float* __restrict__ p,
                               float* __restrict__ v, int64_t n) {
  const float rate = lr[0];
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    if (nesterov) {
      NesterovElement(rate, mu, g[i], p + i, v + i);
    } else {
      MomentumElement(rate, mu, g[i], p + i, v + i);
    }
  }
}

// The step's scalars, from device memory (MakeAdamStep's formula in float arithmetic).
__device__ __forceinline__ AdamStep DeviceAdamStep(const AdamConfig& c, const float* lr,
                                                   const float* b1p, const float* b2p) {
  const float bias2 = sqrtf(1.f - b2p[0]);
  AdamStep step;
  step.beta1 = c.beta1;
  step.beta2 = c.beta2;
  step.lr_t = lr[0] * bias2 / (1.f - b1p[0]);
  step.eps_hat = c.epsilon * bias2;
  return step;
}

__global__ void AdamDenseKernel(AdamConfig c, const float* __restrict__ lr,
                                const float* __restrict__ b1p, const float* __restrict__ b2p,
                                const float* __restrict__ g, float* __restrict__ p,
                                float* __restrict__ m1, float* __restrict__ m2, int64_t n) {
  const AdamStep step = DeviceAdamStep(c, lr, b1p, b2p);
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    AdamElement(step, g[i], p + i, m1 + i, m2 + i);
  }
}

// Runs after the update kernel (stream order), so the update read the old powers.
__global__ void AdvancePowsKernel(AdamConfig c, const float* b1p, const float* b2p, float* b1p_out,
                                  float* b2p_out) {
  const float b1 = b1p[0] * c.beta1, b2 = b2p[0] * c.beta2;
  if (b1p_out != nullptr) b1p_out[0] = b1;
  if (b2p_out != nullptr) b2p_out[0] = b2;
}

// Lazy sparse adam, pass 1: sum each row's gradient entries into scratch and mark the row.
__global__ void GatherRowGradsKernel(const int64_t* __restrict__ rows,
                                     const float* __restrict__ value, int64_t num_rows,
                                     int64_t width, float* __restrict__ scratch,
                                     int* __restrict__ claimed) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < num_rows * width; i += stride) {
    const int64_t row = rows[i / width];
    if (row < 0) continue;
    atomicAdd(scratch + row * width + i % width, value[i]);
    if (i % width == 0) claimed[row] = 1;
  }
}

// Pass 2: the first entry to claim a row updates it once with the summed gradient.
__global__ void AdamRowsKernel(AdamConfig c, const float* __restrict__ lr,
                               const float* __restrict__ b1p, const float* __restrict__ b2p,
                               const int64_t* __restrict__ rows, int64_t num_rows, int64_t width,
                               const float* __restrict__ scratch, int* __restrict__ claimed,
                               float* __restrict__ p, float* __restrict__ m1,
                               float* __restrict__ m2) {
  const AdamStep step = DeviceAdamStep(c, lr, b1p, b2p);
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < num_rows;
       e += stride) {
    const int64_t row = rows[e];
    if (row < 0 || atomicExch(claimed + row, 0) != 1) continue;
    for (int64_t j = row * width; j < (row + 1) * width; ++j) {
      AdamElement(step, scratch[j], p + j, m1 + j, m2 + j);
    }
  }
}

void Check(const char* kernel) {
  CheckCuda(static_cast<int>(cudaGetLastError()), std::string("launch of ") + kernel);
}

}  // namespace

void SgdDense(const float* lr, const float* grad, float* param, int64_t n, Stream stream) {
  if (n == 0) return;
  SgdDenseKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(lr, grad, param, n);
  Check("SgdDenseKernel");
}

void MomentumDense(const float* lr, float mu, bool nesterov, const float* grad, float* param,
                   float* velocity, int64_t n, Stream stream) {
  if (n == 0) return;
  MomentumKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      lr, mu, nesterov, grad, param, velocity, n);
  Check("MomentumKernel");
}

void AdamDense(const AdamConfig& config, const float* lr, const float* beta1_pow,
               const float* beta2_pow, const float* grad, float* param, float* moment1,
               float* moment2, float* beta1_pow_out, float* beta2_pow_out, int64_t n,
               Stream stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (n > 0) {
    AdamDenseKernel<<<Blocks(n), kThreads, 0, s>>>(config, lr, beta1_pow, beta2_pow, grad, param,
                                                   moment1, moment2, n);
    Check("AdamDenseKernel");
  }
  AdvancePowsKernel<<<1, 1, 0, s>>>(config, beta1_pow, beta2_pow, beta1_pow_out, beta2_pow_out);
  Check("AdvancePowsKernel");
}

void AdamLazyRows(const AdamConfig& config, const float* lr, const float* beta1_pow,
                  const float* beta2_pow, const int64_t* rows, const float* value, int64_t num_rows,
                  int64_t width, float* param, float* moment1, float* moment2, float* scratch,
                  int* claimed, float* beta1_pow_out, float* beta2_pow_out, Stream stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (num_rows > 0 && width > 0) {
    GatherRowGradsKernel<<<Blocks(num_rows * width), kThreads, 0, s>>>(rows, value, num_rows, width,
                                                                       scratch, claimed);
    Check("GatherRowGradsKernel");
    AdamRowsKernel<<<Blocks(num_rows), kThreads, 0, s>>>(config, lr, beta1_pow, beta2_pow, rows,
                                                         num_rows, width, scratch, claimed, param,
                                                         moment1, moment2);
    Check("AdamRowsKernel");
  }
  AdvancePowsKernel<<<1, 1, 0, s>>>(config, beta1_pow, beta2_pow, beta1_pow_out, beta2_pow_out);
  Check("AdvancePowsKernel");
}

}  // namespace fleet::operators::cuda
