#include "operators/cuda/register_cuda_kernels.h"

#include "operators/cuda/glue.h"

namespace fleet::operators {

void RegisterCudaKernels(framework::OpRegistry* registry) {
  cuda::RegisterCudaDenseKernels(registry);
  cuda::RegisterCudaMatmulKernels(registry);
  cuda::RegisterCudaSparseKernels(registry);
  cuda::RegisterCudaOptimizerKernels(registry);
}

}  // namespace fleet::operators
