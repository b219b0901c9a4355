#pragma once
// Adds the CUDA kernels to the ops that RegisterAllOps registered (register_ops.h). Only built
// and called when Fleet is compiled with CUDA; ops without a CUDA kernel run their CPU kernel
// on a CUDA executor (framework/executor.h).

#include "framework/op_registry.h"

namespace fleet::operators {

void RegisterCudaKernels(framework::OpRegistry* registry);

}  // namespace fleet::operators
