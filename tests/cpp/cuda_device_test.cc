// The CUDA device layer (core/cuda_device.h): errors become fleet errors, never aborts. Runs in
// CUDA builds; the device round trips skip on machines without a GPU.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.h"
#include "fleet/build_config.h"
#ifdef FLEET_WITH_CUDA
#include "core/cuda_device.h"
#endif

namespace fleet {
namespace {

#ifdef FLEET_WITH_CUDA

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CudaDeviceTest, StatusCodesMapToFleetErrors) {
  EXPECT_NO_THROW(CheckCuda(0, "cudaNothing"));
  try {
    CheckCuda(2, "cudaMalloc of 1 bytes");  // cudaErrorMemoryAllocation
    FAIL() << "expected Unavailable";
  } catch (const Unavailable& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "cudaMalloc of 1 bytes failed: CUDA error "
                         "cudaErrorMemoryAllocation"))
        << e.what();
  }
  EXPECT_THROW(CheckCuda(100, "x"), Unavailable);  // cudaErrorNoDevice
  try {
    CheckCuda(1, "cudaMemcpy");  // cudaErrorInvalidValue: a Fleet bug, not the machine
    FAIL() << "expected Internal";
  } catch (const Internal& e) {
    EXPECT_TRUE(Contains(e.what(), "cudaErrorInvalidValue")) << e.what();
  }
}

TEST(CudaDeviceTest, WithoutADeviceEverythingIsUnavailable) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_EQ(CudaDeviceCount(), 0);
  EXPECT_THROW(CudaSetDevice(0), Unavailable);
  EXPECT_THROW(CudaDeviceName(0), Unavailable);
  EXPECT_THROW(CudaBuffer(64), Unavailable);
  CudaBuffer empty(0);  // nothing to allocate, so no device needed
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(CudaDeviceTest, BufferRoundTripAndMoves) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";
  EXPECT_FALSE(CudaDeviceName(0).empty());
  EXPECT_THROW(CudaSetDevice(CudaDeviceCount()), InvalidArgument);
  CudaSetDevice(0);
  std::vector<float> host{1, 2, 3, 4, 5};
  CudaBuffer buffer(sizeof(float) * host.size());
  buffer.CopyFromHost(host.data(), sizeof(float) * host.size());
  CudaBuffer moved = std::move(buffer);
  EXPECT_EQ(buffer.data(), nullptr);
  std::vector<float> back(host.size());
  moved.CopyToHost(back.data(), sizeof(float) * back.size());
  EXPECT_EQ(back, host);
  EXPECT_THROW(moved.CopyFromHost(host.data(), moved.size() + 1), InvalidArgument);
}

#else

TEST(CudaDeviceTest, NotCompiled) { GTEST_SKIP() << "Fleet was built without CUDA"; }

#endif

}  // namespace
}  // namespace fleet
