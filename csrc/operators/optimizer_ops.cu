// CUDA kernels of the dense sgd and adam updates and their host entry points (see
// optimizer_cuda.h). The per-element rules are those of the CPU ops (optimizer_math.h).

#include <algorithm>
#include <string>

#include "core/cuda_device.h"
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
