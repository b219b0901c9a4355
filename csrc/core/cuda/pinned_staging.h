#pragma once
// Pinned (page-locked) host buffers through which host data reaches a device: a copy from
// pageable memory cannot be asynchronous, a copy from pinned memory can. The caller copies its
// bytes into a staging buffer, queues the device copy, and hands the buffer back with the
// stream; an event recorded there marks when the buffer may be reused. So feeding a step never
// waits for the device, unless every staging buffer is still being read.
//
// Buffers are kept for reuse (cudaHostAlloc is slow) and freed with the object. Past
// kMaxPinnedBytes a copy waits for a busy buffer instead of pinning more (a host that queues
// steps far ahead of the device would otherwise pin a batch per queued step).
// Thread safety: all methods may be called from any thread.

#include <cstddef>
#include <mutex>
#include <vector>

namespace fleet::cuda {

class PinnedStaging {
 public:
  explicit PinnedStaging(int device) : device_(device) {}
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Copies `bytes` bytes of `src` into a free staging buffer and queues their copy to `dst` (device
  // memory) on `stream`; returns without waiting for the device.
  void CopyToDevice(void* dst, const void* src, size_t bytes, void* stream);

  size_t pinned_bytes() const;

  static constexpr size_t kMaxPinnedBytes = size_t{256} << 20;

 private:
  size_t TotalBytesLocked() const;

  struct Slot {
    void* host = nullptr;
    size_t size = 0;
    void* ready = nullptr;  // cudaEvent_t recorded after the last copy out of it
  };

  const int device_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
};

}  // namespace fleet::cuda
