#include "operators/register_ops.h"

namespace fleet::operators {

void RegisterAllOps(OpRegistry* registry) {
  RegisterIoOps(registry);
  RegisterActivationOps(registry);
  RegisterOptimizerOps(registry);
}

}  // namespace fleet::operators
