#include "operators/register_ops.h"

namespace fleet::operators {

void RegisterAllOps(OpRegistry* registry) {
  RegisterIoOps(registry);
  RegisterActivationOps(registry);
  RegisterOptimizerOps(registry);
  RegisterSoftmaxLossOps(registry);
  RegisterEmbeddingOps(registry);
  RegisterSequenceOps(registry);
  RegisterDropoutOps(registry);
  RegisterMetricOps(registry);
}

}  // namespace fleet::operators
