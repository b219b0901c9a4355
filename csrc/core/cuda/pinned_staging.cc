#include "core/cuda/pinned_staging.h"

#include <cuda_runtime.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/cuda_device.h"

namespace fleet::cuda {

PinnedStaging::~PinnedStaging() {
  for (Slot& slot : slots_) {
    cudaEventSynchronize(static_cast<cudaEvent_t>(slot.ready));
    cudaEventDestroy(static_cast<cudaEvent_t>(slot.ready));
    cudaFreeHost(slot.host);
  }
}

void PinnedStaging::CopyToDevice(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Slot* slot = nullptr;
  for (Slot& candidate : slots_) {
    // cudaEventQuery is cudaSuccess once the copies recorded before the event are done.
    if (candidate.size >= bytes &&
        cudaEventQuery(static_cast<cudaEvent_t>(candidate.ready)) == cudaSuccess) {
      slot = &candidate;
      break;
    }
  }
  cudaGetLastError();  // cudaErrorNotReady from the queries above is not an error
  if (slot == nullptr && TotalBytesLocked() + bytes > kMaxPinnedBytes) {
    // The host is far ahead of the device: wait for the oldest large-enough buffer rather than
    // pinning more memory.
    for (Slot& candidate : slots_) {
      if (candidate.size < bytes) continue;
      CheckCuda(cudaEventSynchronize(static_cast<cudaEvent_t>(candidate.ready)),
                "cudaEventSynchronize of a staging buffer");
      slot = &candidate;
      break;
    }
  }
  if (slot == nullptr) {
    Slot fresh;
    // Power-of-two sizes so that a slot serves the next, slightly larger batch too.
    fresh.size = 4096;
    while (fresh.size < bytes) fresh.size *= 2;
    CudaSetDevice(device_);
    CheckCuda(cudaHostAlloc(&fresh.host, fresh.size, cudaHostAllocDefault),
              absl::StrCat("cudaHostAlloc of ", fresh.size, " pinned bytes"));
    cudaEvent_t event;
    CheckCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    fresh.ready = event;
    slots_.push_back(fresh);
    slot = &slots_.back();
  }
  std::memcpy(slot->host, src, bytes);
  auto s = static_cast<cudaStream_t>(stream);
  CheckCuda(cudaMemcpyAsync(dst, slot->host, bytes, cudaMemcpyHostToDevice, s),
            absl::StrCat("cudaMemcpyAsync of ", bytes, " bytes to device ", device_));
  CheckCuda(cudaEventRecord(static_cast<cudaEvent_t>(slot->ready), s), "cudaEventRecord");
}

size_t PinnedStaging::TotalBytesLocked() const {
  size_t total = 0;
  for (const Slot& slot : slots_) total += slot.size;
  return total;
}

size_t PinnedStaging::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return TotalBytesLocked();
}

}  // namespace fleet::cuda
