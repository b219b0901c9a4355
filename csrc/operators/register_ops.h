#pragma once
// One Register<Family>Ops per file of this folder; RegisterAllOps calls them all. Adding a family
// means adding its declaration here and its call in register_ops.cc.

#include "framework/op_registry.h"

namespace fleet::operators {

using framework::OpRegistry;

void RegisterIoOps(OpRegistry* registry);          // feed, fetch
void RegisterActivationOps(OpRegistry* registry);  // relu, sigmoid, tanh, scale
void RegisterElementwiseOps(OpRegistry* registry);  // elementwise_add/_sub/_mul/_div
void RegisterMatmulOps(OpRegistry* registry);       // mul, matmul
void RegisterReduceOps(OpRegistry* registry);       // mean, reduce_sum, reduce_mean, sum
void RegisterShapeOps(OpRegistry* registry);  // concat, split, reshape, cast, fill_zeros_like
void RegisterFillOps(OpRegistry* registry);   // fill_constant, uniform_random, gaussian_random

void RegisterAllOps(OpRegistry* registry);

}  // namespace fleet::operators
