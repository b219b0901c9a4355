#include "core/cuda/caching_allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/cuda_device.h"
#include "core/errors.h"

namespace fleet::cuda {
namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;  // 1 MiB
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t{2} << 20;  // 2 MiB
constexpr size_t kLargeSlack = size_t{8} << 20;  // a large block may exceed the request by this

bool Fits(size_t block, size_t rounded) {
  return rounded < kSmallLimit ? block <= 2 * rounded : block <= rounded + kLargeSlack;
}

}  // namespace

size_t CachingAllocator::RoundSize(size_t bytes) {
  if (bytes < kSmallLimit)
    return std::max(kSmallRound, (bytes + kSmallRound - 1) / kSmallRound * kSmallRound);
  return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

CachingAllocator::~CachingAllocator() {
  // Process exit: the driver may already be shutting down, so errors are ignored.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [stream, pool] : free_) {
    for (auto& [size, ptr] : pool) cudaFree(ptr);
  }
}

void* CachingAllocator::Allocate(size_t bytes, void* stream) {
  const size_t rounded = RoundSize(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto& pool = free_[stream];
  auto it = pool.lower_bound(rounded);
  void* ptr = nullptr;
  size_t size = rounded;
  if (it != pool.end() && Fits(it->first, rounded)) {
    ptr = it->second;
    size = it->first;
    pool.erase(it);
    stats_.cached_bytes -= size;
    --stats_.cached_blocks;
  } else {
    ptr = AllocateFromDevice(rounded, bytes);
  }
  live_[ptr] = Block{size, stream};
  stats_.in_use_bytes += size;
  ++stats_.in_use_blocks;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return ptr;
}

void* CachingAllocator::AllocateFromDevice(size_t rounded, size_t requested) {
  CudaSetDevice(device_);
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, rounded);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    ReleaseCacheLocked();
    status = cudaMalloc(&ptr, rounded);
  }
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw OutOfMemory(absl::StrCat(
        "CUDA device ", device_, " is out of memory: a request of ", requested,
        " bytes (size class ", rounded, ") failed; Fleet's allocator holds ", stats_.in_use_bytes,
        " bytes in ", stats_.in_use_blocks, " live blocks (peak ", stats_.peak_in_use_bytes,
        ") and had cached ", stats_.cached_bytes, " bytes, now returned; the device reports ",
        free_bytes, " of ", total_bytes, " bytes free"));
  }
  CheckCuda(status, absl::StrCat("cudaMalloc of ", rounded, " bytes on device ", device_));
  ++stats_.device_mallocs;
  return ptr;
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  FLEET_ENFORCE(it != live_.end(), Internal,
                "CachingAllocator::Free of a pointer it did not "
                "allocate (device ",
                device_, ")");
  const Block block = it->second;
  live_.erase(it);
  stats_.in_use_bytes -= block.size;
  --stats_.in_use_blocks;
  free_[block.stream].emplace(block.size, ptr);
  stats_.cached_bytes += block.size;
  ++stats_.cached_blocks;
}

void CachingAllocator::ReleaseCacheLocked() {
  // Cached blocks may still be read by queued kernels: wait for them before giving memory back.
  CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before returning cached memory");
  for (auto& [stream, pool] : free_) {
    for (auto& [size, ptr] : pool) cudaFree(ptr);
    pool.clear();
  }
  stats_.cached_bytes = 0;
  stats_.cached_blocks = 0;
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  CudaSetDevice(device_);
  ReleaseCacheLocked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace fleet::cuda
