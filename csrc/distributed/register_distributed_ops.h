#pragma once
// Registers the distributed ops (parameter-server and collective) with a registry; called once
// where the process's registry is built, after operators::RegisterAllOps.

#include "framework/op_registry.h"

namespace fleet::distributed {

void RegisterPsOps(framework::OpRegistry* registry);          // ps_ops.cc
void RegisterCollectiveOps(framework::OpRegistry* registry);  // collective_ops.cc

inline void RegisterDistributedOps(framework::OpRegistry* registry) {
  RegisterPsOps(registry);
  RegisterCollectiveOps(registry);
}

}  // namespace fleet::distributed
