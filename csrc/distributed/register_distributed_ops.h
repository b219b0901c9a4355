#pragma once
// Registers the distributed ops (parameter-server and collective) with a registry; called once
// where the process's registry is built, after operators::RegisterAllOps.

#include "framework/op_registry.h"

namespace fleet::distributed {

void RegisterPsOps(framework::OpRegistry* registry);          // ps_ops.cc
// (the collective ops register next to these, from collective_ops.cc, when they land)

inline void RegisterDistributedOps(framework::OpRegistry* registry) {
  RegisterPsOps(registry);
}

}  // namespace fleet::distributed
