#pragma once
// Small pieces shared by kernels of several families.

#include <string>

#include "framework/execution_context.h"
#include "framework/op_registry.h"

namespace fleet::operators {

using framework::ExecutionContext;
using framework::InferShapeContext;
using framework::OpInfo;
using framework::OpSpec;
using framework::VarInfo;

// Infer-shape function: output `out` has the shape, dtype and lod level of input `in`.
framework::InferShapeFn SameAs(std::string in, std::string out);

// Resizes `out` like `in` (shape and lod) and returns its float32 memory.
float* ResizeLike(const LoDTensor& in, LoDTensor* out);

// The float32 data of the slot's tensor, with a clear error when it is another dtype.
const float* FloatData(const ExecutionContext& ctx, const std::string& slot, size_t i = 0);

// The rows looked up for `ids` of width `width`: ids of shape [..., 1] give [..., width], any
// other shape (e.g. [N]) gives [ids..., width] (lookup_table_v2's rule). Shared by lookup_table
// and the parameter-server pull_sparse.
inline Shape EmbeddingOutputShape(const Shape& ids, int64_t width) {
  Shape out = ids;
  if (out.size() >= 2 && out.back() == 1) out.pop_back();
  out.push_back(width);
  return out;
}

inline void SetCpuKernel(OpInfo* info, framework::KernelFn fn) {
  info->kernels[DeviceType::kCPU] = std::move(fn);
}

}  // namespace fleet::operators
