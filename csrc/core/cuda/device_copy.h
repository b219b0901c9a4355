#pragma once
// The CUDA half of core/device_memory.h (defined only in CUDA builds; no CUDA headers here).

#include <cstddef>
#include <memory>

#include "core/place.h"
#include "core/tensor.h"

namespace fleet::cuda {

// A Buffer on CUDA device `device` from its caching allocator, for work on its stream.
std::shared_ptr<Buffer> AllocateDeviceBuffer(size_t bytes, int device);
// A copy between places of which at least one is a CUDA device (device_memory.h's contract).
void CopyBytes(void* dst, Place dst_place, const void* src, Place src_place, size_t bytes);
void ZeroBytes(void* dst, int device, size_t bytes);
void Synchronize(int device);

}  // namespace fleet::cuda
