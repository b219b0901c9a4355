#pragma once
// One Register<Family>Ops per file of this folder; RegisterAllOps calls them all. Adding a family
// means adding its declaration here and its call in register_ops.cc.

#include "framework/op_registry.h"

namespace fleet::operators {

using framework::OpRegistry;

void RegisterIoOps(OpRegistry* registry);          // feed, fetch
void RegisterActivationOps(OpRegistry* registry);  // relu, sigmoid, tanh, scale
// elementwise_add/_sub/_mul/_div; mul, matmul; mean, reduce_sum, reduce_mean, sum; concat,
// split, reshape, cast, fill_zeros_like; fill_constant, uniform_random, gaussian_random.
void RegisterElementwiseOps(OpRegistry* registry);
void RegisterMatmulOps(OpRegistry* registry);
void RegisterReduceOps(OpRegistry* registry);
void RegisterShapeOps(OpRegistry* registry);
void RegisterFillOps(OpRegistry* registry);

void RegisterAllOps(OpRegistry* registry);

}  // namespace fleet::operators
