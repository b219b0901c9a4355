#pragma once
// Memory on a Place, for code that must not include CUDA headers (the core, kernels' glue, the
// bindings). CPU places use the aligned host allocator of core/tensor.h; CUDA places use the
// device's caching allocator and stream (core/cuda/device_context.h), and exist only when Fleet
// is compiled with CUDA: without it every CUDA request throws Unavailable.
//
// Ordering: every copy that touches a device is queued on that device's one compute stream, the
// stream every CUDA kernel of the executor runs on, so a copy is ordered after the kernels that
// wrote its source and before those that read its destination. Copies to host memory return
// when the bytes are there (they wait for the stream); copies from host memory return at once
// (the bytes go through pinned staging memory), so the host source may be reused immediately.

#include <cstddef>
#include <memory>

#include "core/lod_tensor.h"
#include "core/place.h"
#include "core/selected_rows.h"
#include "core/tensor.h"

namespace fleet {

// `bytes` of memory on `place`; freed (returned to the device's cache) with the last owner.
std::shared_ptr<Buffer> AllocateBuffer(size_t bytes, Place place);

// Copies `bytes` from `src` on `src_place` to `dst` on `dst_place` (see ordering above).
void CopyBytes(void* dst, Place dst_place, const void* src, Place src_place, size_t bytes);

// Sets `bytes` bytes at `dst` on `place` to zero (queued on the stream for a device).
void ZeroBytes(void* dst, Place place, size_t bytes);

// A copy of `src` (shape, dtype, elements) in fresh memory on `place`. `src` must hold data.
Tensor CopyToPlace(const Tensor& src, Place place);
// The same for LoDTensors (the lod travels with the values) and SelectedRows (rows and values).
LoDTensor CopyToPlace(const LoDTensor& src, Place place);
SelectedRows CopyToPlace(const SelectedRows& src, Place place);

// Waits until the work queued on `place`'s stream has finished and reports its errors; a no-op
// for the CPU.
void SynchronizePlace(Place place);

}  // namespace fleet
