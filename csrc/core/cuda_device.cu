#include <cuda_runtime.h>

#include <utility>

#include "core/cuda_device.h"
#include "core/errors.h"

namespace fleet {
namespace {

// Errors that mean "no usable device here" rather than a fault of Fleet.
bool IsNoDevice(cudaError_t status) {
  switch (status) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorInitializationError:
      return true;
    default:
      return false;
  }
}

std::string Describe(cudaError_t status, const std::string& what) {
  return what + " failed: CUDA error " + cudaGetErrorName(status) + " (" +
         cudaGetErrorString(status) + ")";
}

void CheckDeviceId(int device, const char* what) {
  const int count = CudaDeviceCount();
  if (count == 0) {
    throw Unavailable(std::string(what) + "(" + std::to_string(device) +
                      "): no CUDA device is visible (no GPU, or no usable driver)");
  }
  if (device < 0 || device >= count) {
    throw InvalidArgument(std::string(what) + "(" + std::to_string(device) +
                          "): no such CUDA device (" + std::to_string(count) + " visible)");
  }
}

}  // namespace

void CheckCuda(int status_code, const std::string& what) {
  const auto status = static_cast<cudaError_t>(status_code);
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so it does not resurface in a later call
  if (IsNoDevice(status) || status == cudaErrorMemoryAllocation) {
    throw Unavailable(Describe(status, what));
  }
  throw Internal(Describe(status, what));
}

int CudaDeviceCount() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (IsNoDevice(status)) {
    cudaGetLastError();
    return 0;
  }
  CheckCuda(status, "cudaGetDeviceCount");
  return count;
}

std::string CudaDeviceName(int device) {
  CheckDeviceId(device, "CudaDeviceName");
  cudaDeviceProp prop;
  CheckCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return prop.name;
}

void CudaSetDevice(int device) {
  CheckDeviceId(device, "CudaSetDevice");
  CheckCuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

CudaBuffer::CudaBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  CheckCuda(cudaMalloc(&data_, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
}

CudaBuffer::~CudaBuffer() { Release(); }

CudaBuffer::CudaBuffer(CudaBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

CudaBuffer& CudaBuffer::operator=(CudaBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void CudaBuffer::Release() noexcept {
  // A destructor must not throw; a failing cudaFree means the context is already broken and the
  // next checked call reports it.
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  size_ = 0;
}

void CudaBuffer::CopyFromHost(const void* src, size_t bytes) {
  if (bytes > size_) {
    throw InvalidArgument("CudaBuffer::CopyFromHost: " + std::to_string(bytes) +
                          " bytes do not fit a buffer of " + std::to_string(size_));
  }
  if (bytes == 0) return;
  CheckCuda(cudaMemcpy(data_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

void CudaBuffer::CopyToHost(void* dst, size_t bytes) const {
  if (bytes > size_) {
    throw InvalidArgument("CudaBuffer::CopyToHost: " + std::to_string(bytes) +
                          " bytes exceed a buffer of " + std::to_string(size_));
  }
  if (bytes == 0) return;
  CheckCuda(cudaMemcpy(dst, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

}  // namespace fleet
