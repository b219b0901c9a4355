#pragma once
// CUDA versions of the dense sgd and adam updates, on host arrays: the entry points copy the
// parameter, gradient and state to the device, run the kernel (the rules of optimizer_math.h,
// as the CPU ops), and copy the results back. This is the seed of the GPU path; once tensors
// can live on a device the kernels will run on them without the copies.
//
// Defined in optimizer_ops.cu, so only available when Fleet is compiled with CUDA
// (FLEET_WITH_CUDA). Blocking: they return when the results are back in host memory. Errors
// are fleet::Unavailable without a device, as in core/cuda_device.h.

#include <cstdint>

namespace fleet::operators {

// param[i] -= lr * grad[i] for i in [0, n), on CUDA device `device`.
void CudaSgdUpdate(int device, float lr, const float* grad, float* param, int64_t n);

struct AdamHyperParams {
  float learning_rate = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

// One Adam step of the adam op over n elements; then *beta1_pow *= beta1 and
// *beta2_pow *= beta2, as the op's Beta1PowOut / Beta2PowOut.
void CudaAdamUpdate(int device, const AdamHyperParams& hyper, const float* grad, float* param,
                    float* moment1, float* moment2, float* beta1_pow, float* beta2_pow, int64_t n);

}  // namespace fleet::operators
