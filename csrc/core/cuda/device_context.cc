#include "core/cuda/device_context.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/cuda_device.h"
#include "core/errors.h"

namespace fleet::cuda {

DeviceContext& DeviceContext::Get(int device) {
  // Up to 64 devices per process; contexts live until exit (see the header).
  constexpr int kMaxDevices = 64;
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<DeviceContext*, kMaxDevices> contexts{};
  FLEET_ENFORCE(device >= 0 && device < kMaxDevices, InvalidArgument, "CUDA device ", device,
                " is out of range");
  CudaSetDevice(device);  // validates the id (Unavailable without a device)
  std::call_once(once[device], [device] { contexts[device] = new DeviceContext(device); });
  return *contexts[device];
}

DeviceContext::DeviceContext(int device) : device_(device), allocator_(device), staging_(device) {
  cudaStream_t stream;
  CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            absl::StrCat("cudaStreamCreate on device ", device));
  stream_ = stream;
}

DeviceContext::~DeviceContext() = default;  // never runs: contexts live until exit

void* DeviceContext::blas() {
  std::call_once(blas_once_, [this] {
    CudaSetDevice(device_);
    cublasHandle_t handle;
    cublasStatus_t status = cublasCreate(&handle);
    FLEET_ENFORCE(status == CUBLAS_STATUS_SUCCESS, Unavailable, "cublasCreate on device ", device_,
                  " failed: ", cublasGetStatusString(status));
    cublasSetStream(handle, static_cast<cudaStream_t>(stream_));
    blas_ = handle;
  });
  return blas_;
}

void DeviceContext::Synchronize() const {
  CheckCuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)),
            absl::StrCat("a kernel on device ", device_, " (reported at cudaStreamSynchronize)"));
}

}  // namespace fleet::cuda
