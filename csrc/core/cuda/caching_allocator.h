#pragma once
// A caching allocator of device memory, in the manner of PyTorch's CUDA caching allocator: freed
// blocks stay in a pool and satisfy later requests of a similar size, so a training step that
// allocates the same tensors every step calls cudaMalloc only during its first steps.
//
// Size classes: a request is rounded up to a multiple of 512 bytes below 1 MiB and of 2 MiB
// above; a cached block is reused for a request of at least half its size (small) or at most
// 8 MiB smaller (large), the best fit first.
//
// Stream-ordered reuse: a block freed by its owner goes back to the pool of the stream it was
// allocated for at once, even though kernels queued on that stream may still read it. That is
// safe because the block is only handed out again for work queued on the same stream, which
// runs after those kernels. Blocks go back to the driver (cudaFree) only when cudaMalloc fails:
// then the allocator waits for the device, frees every cached block and tries once more.
//
// Out of memory: OutOfMemory (core/errors.h) naming the request, the rounded size, what the
// allocator holds in use and in cache, and what the device reports free. Managed memory is
// never used.
//
// Thread safety: all methods may be called from any thread (one mutex).

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace fleet::cuda {

struct AllocatorStats {
  size_t in_use_bytes = 0;
  size_t in_use_blocks = 0;
  size_t cached_bytes = 0;
  size_t cached_blocks = 0;
  size_t peak_in_use_bytes = 0;
  size_t device_mallocs = 0;  // cudaMalloc calls that succeeded
};

class CachingAllocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // At least `bytes` bytes (256-byte aligned) for work on `stream` (a cudaStream_t). Zero bytes
  // give a valid one-class block. Throws OutOfMemory when the device is out of memory.
  void* Allocate(size_t bytes, void* stream);
  // Returns a block from Allocate to the pool of its stream (see stream-ordered reuse above).
  void Free(void* ptr);
  // Waits for the device and returns every cached block to the driver.
  void EmptyCache();
  AllocatorStats stats() const;

  // The size class of a request (exposed for tests).
  static size_t RoundSize(size_t bytes);

 private:
  struct Block {
    size_t size = 0;
    void* stream = nullptr;
  };
  void* AllocateFromDevice(size_t rounded, size_t requested);
  void ReleaseCacheLocked();

  const int device_;
  mutable std::mutex mu_;
  // Free blocks per stream, ordered by size for best fit.
  std::map<void*, std::multimap<size_t, void*>> free_;
  std::unordered_map<void*, Block> live_;
  AllocatorStats stats_;
};

}  // namespace fleet::cuda
