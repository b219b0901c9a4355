#pragma once
// Shared by the .cu files of this folder: launch shapes and the launch check.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_device.h"
#include "core/errors.h"

namespace fleet::operators::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill an H100/H200 (132 SMs) several
// times over, never more than the elements need.
inline int Blocks(int64_t n) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 132 * 16)));
}

inline cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Throws the fleet error of a failed launch (bad configuration, or a sticky earlier fault).
inline void CheckLaunch(const char* kernel) {
  ::fleet::CheckCuda(static_cast<int>(cudaGetLastError()), kernel);
}

#define FLEET_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace fleet::operators::cuda
