#pragma once
// One Register<Family>Ops per file of this folder; RegisterAllOps calls them all. Adding a family
// means adding its declaration here and its call in register_ops.cc.

#include "framework/op_registry.h"

namespace fleet::operators {

using framework::OpRegistry;

void RegisterIoOps(OpRegistry* registry);          // feed, fetch
void RegisterActivationOps(OpRegistry* registry);  // relu, sigmoid, tanh, scale
void RegisterOptimizerOps(OpRegistry* registry);   // sgd, momentum, adagrad, adam

void RegisterAllOps(OpRegistry* registry);

}  // namespace fleet::operators
