#include "core/cuda/device_copy.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "core/cuda/device_context.h"
#include "core/cuda_device.h"
#include "core/errors.h"

namespace fleet::cuda {

std::shared_ptr<Buffer> AllocateDeviceBuffer(size_t bytes, int device) {
  DeviceContext& context = DeviceContext::Get(device);
  void* ptr = context.allocator().Allocate(bytes, context.stream());
  CachingAllocator* allocator = &context.allocator();  // lives until exit
  return std::make_shared<Buffer>(
      ptr, bytes, [allocator, ptr] { allocator->Free(ptr); }, CUDAPlace(device));
}

void CopyBytes(void* dst, Place dst_place, const void* src, Place src_place, size_t bytes) {
  if (bytes == 0) return;
  const bool to_device = dst_place.device == DeviceType::kCUDA;
  const bool from_device = src_place.device == DeviceType::kCUDA;
  if (to_device && !from_device) {
    DeviceContext& context = DeviceContext::Get(dst_place.device_id);
    context.staging().CopyToDevice(dst, src, bytes, context.stream());
    return;
  }
  if (from_device && !to_device) {
    DeviceContext& context = DeviceContext::Get(src_place.device_id);
    auto stream = static_cast<cudaStream_t>(context.stream());
    CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream),
              absl::StrCat("cudaMemcpyAsync of ", bytes, " bytes from ", src_place.ToString()));
    context.Synchronize();
    return;
  }
  FLEET_ENFORCE(dst_place == src_place, InvalidArgument, "copy from ", src_place.ToString(), " to ",
                dst_place.ToString(), ": copies between two devices are not supported");
  DeviceContext& context = DeviceContext::Get(dst_place.device_id);
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                            static_cast<cudaStream_t>(context.stream())),
            absl::StrCat("cudaMemcpyAsync of ", bytes, " bytes on ", dst_place.ToString()));
}

void ZeroBytes(void* dst, int device, size_t bytes) {
  if (bytes == 0) return;
  DeviceContext& context = DeviceContext::Get(device);
  CheckCuda(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(context.stream())),
            "cudaMemsetAsync");
}

void Synchronize(int device) { DeviceContext::Get(device).Synchronize(); }

}  // namespace fleet::cuda
