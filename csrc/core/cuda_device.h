#pragma once
// CUDA devices and device memory. The header includes no CUDA headers, so host-compiled code
// (bindings, op kernels) can use it; the definitions are in cuda_device.cu, which is only
// built and linked when Fleet is compiled with CUDA (FLEET_WITH_CUDA, from
// fleet/build_config.h, is then defined).
//
// Every CUDA failure becomes a fleet error carrying the call and the CUDA error name and string:
// Unavailable when no device is usable or device memory runs out (the caller may fall back to
// the CPU), Internal for anything else. Nothing here aborts the process.
//
// Thread safety: the functions may be called from any thread; the current device is per thread,
// as in the CUDA runtime. A CudaBuffer has one owner at a time.

#include <cstddef>
#include <string>

namespace fleet {

// Number of visible CUDA devices: 0 when the machine has no device or no usable driver (that
// is not an error). Throws Internal for other runtime failures.
int CudaDeviceCount();

// The device's name, e.g. "NVIDIA H100 80GB HBM3". Throws Unavailable without a device and
// InvalidArgument when `device` is outside [0, CudaDeviceCount()).
std::string CudaDeviceName(int device);

// Makes `device` current for the calling thread; same errors as CudaDeviceName.
void CudaSetDevice(int device);

// Throws the fleet error for `status` (a cudaError_t, passed as int so that this header needs
// no CUDA includes) unless it is cudaSuccess; `what` names the failed call in the message.
void CheckCuda(int status, const std::string& what);

// Memory on the current device, owned by one object: cudaMalloc in the constructor, cudaFree in
// the destructor. Copies are synchronous, so host memory may be reused once they return, and a
// copy to the host also reports the errors of kernels that ran before it.
class CudaBuffer {
 public:
  CudaBuffer() = default;
  // Throws Unavailable when there is no device or not enough free device memory.
  explicit CudaBuffer(size_t bytes);
  ~CudaBuffer();
  CudaBuffer(CudaBuffer&& other) noexcept;
  CudaBuffer& operator=(CudaBuffer&& other) noexcept;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

  // Copy `bytes` between host memory and the start of the buffer; InvalidArgument when `bytes`
  // exceeds size().
  void CopyFromHost(const void* src, size_t bytes);
  void CopyToHost(void* dst, size_t bytes) const;

 private:
  void Release() noexcept;

  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace fleet
