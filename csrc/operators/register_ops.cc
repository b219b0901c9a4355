#include "operators/register_ops.h"

#include "fleet/build_config.h"
#ifdef FLEET_WITH_CUDA
#include "operators/cuda/register_cuda_kernels.h"
#endif

namespace fleet::operators {

void RegisterAllOps(OpRegistry* registry) {
  RegisterIoOps(registry);
  RegisterActivationOps(registry);
  RegisterOptimizerOps(registry);
  RegisterSoftmaxLossOps(registry);
  RegisterEmbeddingOps(registry);
  RegisterKeyedLookupOps(registry);
  RegisterSequenceOps(registry);
  RegisterDropoutOps(registry);
  RegisterMetricOps(registry);
  RegisterElementwiseOps(registry);
  RegisterMatmulOps(registry);
  RegisterReduceOps(registry);
  RegisterShapeOps(registry);
  RegisterFillOps(registry);
  RegisterTransformOps(registry);
  RegisterIndexOps(registry);
  RegisterClipNormOps(registry);
  RegisterLrScheduleOps(registry);
  RegisterNceOps(registry);
  RegisterSparseDecayOps(registry);
#ifdef FLEET_WITH_CUDA
  RegisterCudaKernels(registry);  // last: it adds CUDA kernels to the ops registered above
#endif
}

}  // namespace fleet::operators
