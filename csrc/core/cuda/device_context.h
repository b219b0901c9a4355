#pragma once
// What Fleet keeps per CUDA device: one compute stream, the cuBLAS handle bound to it, the
// caching allocator of the device's memory and the pinned staging buffers for host-to-device
// copies. Every CUDA kernel of every executor on the device runs on that one stream, so a step
// needs no host synchronisation between its ops, and memory freed by one op is reused by the
// next in stream order (caching_allocator.h).
//
// One context per device for the life of the process, created on first use: like the device
// and the CUDA runtime's primary context it stands for, it is process-wide by nature; memory
// freed by one executor is reused by another without cross-stream hazards because there is
// only one stream. Thread-safe. The header includes no CUDA headers (handles are void*), so
// host code compiled without CUDA (the executor, kernels' glue) can name it.

#include <memory>
#include <mutex>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/pinned_staging.h"

namespace fleet::cuda {

class DeviceContext {
 public:
  // The context of device `device`; Unavailable without such a device.
  static DeviceContext& Get(int device);

  int device() const { return device_; }
  void* stream() const { return stream_; }  // cudaStream_t
  // cublasHandle_t on stream(), created on first use.
  void* blas();
  CachingAllocator& allocator() { return allocator_; }
  PinnedStaging& staging() { return staging_; }

  // Waits for everything queued on stream() and throws the fleet error of a failed kernel.
  void Synchronize() const;

  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

 private:
  explicit DeviceContext(int device);

  const int device_;
  void* stream_ = nullptr;
  std::once_flag blas_once_;
  void* blas_ = nullptr;
  CachingAllocator allocator_;
  PinnedStaging staging_;
};

}  // namespace fleet::cuda
