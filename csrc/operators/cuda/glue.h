#pragma once
// Helpers of the CUDA op glue (the *_ops.cc files of this folder): host code that checks shapes
// as the CPU kernels do, sizes outputs on the executor's device and calls the launchers of
// kernels.h on the device's stream. Compiled only in CUDA builds.

#include <string>
#include <utility>

#include "core/cuda/device_context.h"
#include "core/cuda_device.h"
#include "core/device_memory.h"
#include "operators/cuda/kernels.h"
#include "operators/op_helpers.h"

namespace fleet::operators::cuda {

using framework::OpRegistry;

inline Stream StreamOf(const ExecutionContext& ctx) { return ctx.cuda().stream(); }

// Resizes `out` to `shape` and returns its memory of type T on the kernel's device.
template <typename T>
T* DeviceOutput(const ExecutionContext& ctx, LoDTensor* out, Shape shape) {
  out->Resize(std::move(shape));
  return out->mutable_data<T>(ctx.place());
}

// Resizes `out` like `in` (shape and lod) on the device; float32.
inline float* DeviceOutputLike(const ExecutionContext& ctx, const LoDTensor& in, LoDTensor* out) {
  LoD lod = in.lod();
  float* data = DeviceOutput<float>(ctx, out, in.shape());
  out->set_lod(std::move(lod));
  return data;
}

// A device tensor of `n` elements of T for the op's own use during the step (memory from the
// caching allocator; freed when the returned tensor goes, reused in stream order).
template <typename T>
Tensor DeviceScratch(const ExecutionContext& ctx, int64_t n) {
  Tensor t(DTypeOf<T>::value, {n});
  t.mutable_data<T>(ctx.place());
  return t;
}

// The offsets of lod level `level` of `t` as int64 on the device (copied through pinned memory,
// asynchronously).
inline Tensor DeviceOffsets(const ExecutionContext& ctx, const LoDTensor& t, int level) {
  const auto& offsets = t.lod().at(level);
  std::vector<int64_t> host(offsets.begin(), offsets.end());
  Tensor out(DType::kInt64, {static_cast<int64_t>(host.size())});
  CopyBytes(out.mutable_data<int64_t>(ctx.place()), ctx.place(), host.data(), CPUPlace(),
            host.size() * sizeof(int64_t));
  return out;
}

// Registration adds CUDA kernels to ops the CPU families registered, while the registry is still
// being built (op_registry.h: built once, then only read), hence the const_cast.

// The registered CPU kernel of `type` also serves CUDA: ops that only reshape or share memory.
inline void ShareCpuKernel(OpRegistry* registry, const std::string& type) {
  OpInfo& info = const_cast<OpInfo&>(registry->Get(type));
  info.kernels[DeviceType::kCUDA] = info.kernels.at(DeviceType::kCPU);
}

inline void SetCudaKernel(OpRegistry* registry, const std::string& type, framework::KernelFn fn) {
  const_cast<OpInfo&>(registry->Get(type)).kernels[DeviceType::kCUDA] = std::move(fn);
}

// One per glue file; RegisterCudaKernels (register_cuda_kernels.cc) calls them all.
void RegisterCudaDenseKernels(OpRegistry* registry);
void RegisterCudaMatmulKernels(OpRegistry* registry);
void RegisterCudaSparseKernels(OpRegistry* registry);
void RegisterCudaOptimizerKernels(OpRegistry* registry);

}  // namespace fleet::operators::cuda
