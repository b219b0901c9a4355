#include "operators/register_ops.h"

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
}

}  // namespace fleet::operators
