// Device memory (core/cuda/caching_allocator.h, core/device_memory.h) and tensors on a device:
// size classes, reuse of freed blocks in stream order, the out-of-memory message, copies between
// places and pinned staging. Runs in CUDA builds; what needs a device skips without one.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/errors.h"
#include "core/lod_tensor.h"
#include "fleet/build_config.h"
#ifdef FLEET_WITH_CUDA
#include "core/cuda/caching_allocator.h"
#include "core/cuda/device_context.h"
#include "core/cuda_device.h"
#endif

namespace fleet {
namespace {

#ifdef FLEET_WITH_CUDA

using cuda::CachingAllocator;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

#define SKIP_WITHOUT_DEVICE() \
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible"

TEST(CudaAllocatorTest, SizeClasses) {
  EXPECT_EQ(CachingAllocator::RoundSize(0), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize((1 << 20) - 1), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::RoundSize((1 << 20) + 1), size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::RoundSize((size_t{5} << 20) + 1), size_t{6} << 20);
}

TEST(CudaAllocatorTest, FreedBlocksAreReusedOnTheirStreamOnly) {
  SKIP_WITHOUT_DEVICE();
  CachingAllocator allocator(0);
  int stream_a = 0, stream_b = 0;  // any distinct pointers name distinct streams
  void* first = allocator.Allocate(1000, &stream_a);
  allocator.Free(first);
  EXPECT_EQ(allocator.stats().cached_blocks, 1u);
  void* again = allocator.Allocate(900, &stream_a);  // same class, same stream: reused
  EXPECT_EQ(again, first);
  allocator.Free(again);
  void* other = allocator.Allocate(900, &stream_b);  // another stream waits for nothing: fresh
  EXPECT_NE(other, first);
  EXPECT_EQ(allocator.stats().device_mallocs, 2u);
  void* small = allocator.Allocate(100, &stream_a);  // a 512-byte request fits no 1 KiB block...
  EXPECT_EQ(small, first) << "...but a block at most twice the class is taken";
  allocator.Free(small);
  allocator.Free(other);
  const cuda::AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_EQ(stats.cached_blocks, 2u);
  allocator.EmptyCache();
  EXPECT_EQ(allocator.stats().cached_bytes, 0u);
}

TEST(CudaAllocatorTest, OutOfMemoryNamesTheRequestAndWhatIsHeld) {
  SKIP_WITHOUT_DEVICE();
  CachingAllocator allocator(0);
  int stream = 0;
  void* held = allocator.Allocate(4 << 20, &stream);
  const size_t huge = size_t{1} << 50;  // 1 PiB
  try {
    allocator.Allocate(huge, &stream);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_TRUE(Contains(what, "out of memory")) << what;
    EXPECT_TRUE(Contains(what, "a request of " + std::to_string(huge) + " bytes")) << what;
    EXPECT_TRUE(Contains(what, "holds " + std::to_string(4 << 20) + " bytes in 1 live blocks"))
        << what;
    EXPECT_TRUE(Contains(what, "the device reports")) << what;
  }
  allocator.Free(held);
}

TEST(CudaTensorTest, TensorsLearnTheirPlaceAndCopyBetweenPlaces) {
  SKIP_WITHOUT_DEVICE();
  LoDTensor host;
  host.Resize({3, 4});
  float* h = host.mutable_data<float>();
  for (int i = 0; i < 12; ++i) h[i] = 0.5f * i;
  host.set_lod({{0, 1, 3}});
  EXPECT_EQ(host.place(), CPUPlace());

  LoDTensor device = CopyToPlace(host, CUDAPlace(0));
  EXPECT_EQ(device.place(), CUDAPlace(0));
  EXPECT_EQ(device.lod(), host.lod());
  h[0] = 100.f;  // the copy went through pinned staging: the source may change at once

  Tensor twin;
  twin.CopyFrom(device);  // a deep copy stays on the device
  EXPECT_EQ(twin.place(), CUDAPlace(0));
  EXPECT_NE(twin.raw_data(), device.raw_data());

  const Tensor back = CopyToPlace(twin, CPUPlace());
  EXPECT_EQ(back.place(), CPUPlace());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(back.data<float>()[i], 0.5f * i) << i;

  twin.SetZero();  // on the device, where its memory is
  EXPECT_EQ(twin.place(), CUDAPlace(0));
  const Tensor zeros = CopyToPlace(twin, CPUPlace());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(zeros.data<float>()[i], 0.f);

  // A CPU kernel asking for CPU memory of a device tensor gets fresh host memory.
  void* cpu = twin.mutable_data(DType::kFloat32);
  EXPECT_EQ(twin.place(), CPUPlace());
  EXPECT_NE(cpu, nullptr);
}

TEST(CudaTensorTest, SelectedRowsKeepTheirRowsOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  SelectedRows rows;
  rows.set_height(10);
  *rows.mutable_rows() = {4, -1, 7};  // -1: a row device kernels mark as skipped (padding)
  rows.mutable_value()->Resize({3, 2});
  float* v = rows.mutable_value()->mutable_data<float>();
  for (int i = 0; i < 6; ++i) v[i] = static_cast<float>(i);
  SelectedRows device = CopyToPlace(rows, CUDAPlace(0));
  EXPECT_EQ(device.value().place(), CUDAPlace(0));
  EXPECT_EQ(device.device_rows().place(), CUDAPlace(0));
  device.mutable_rows()->clear();  // as a device kernel leaves them
  EXPECT_EQ(device.num_rows(), 3);
  SelectedRows host = CopyToPlace(device, CPUPlace());
  EXPECT_EQ(host.rows(), (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(host.value().shape(), (Shape{2, 2}));
  EXPECT_EQ(host.value().data<float>()[2], 4.f);
}

TEST(CudaTensorTest, DeviceContextReusesMemoryAcrossSteps) {
  SKIP_WITHOUT_DEVICE();
  cuda::DeviceContext& context = cuda::DeviceContext::Get(0);
  const size_t mallocs_before = context.allocator().stats().device_mallocs;
  for (int step = 0; step < 5; ++step) {
    Tensor t(DType::kFloat32, {1 << 18});
    t.mutable_data<float>(CUDAPlace(0));  // freed at the end of each iteration
  }
  EXPECT_LE(context.allocator().stats().device_mallocs, mallocs_before + 1);
  context.Synchronize();
}

#else

TEST(CudaMemoryTest, WithoutCudaDevicePlacesAreUnavailable) {
  Tensor t(DType::kFloat32, {4});
  EXPECT_THROW(t.mutable_data<float>(CUDAPlace(0)), Unavailable);
}

#endif

TEST(DeviceMemoryTest, CpuCopiesNeedNoDevice) {
  Tensor src(DType::kInt64, {3});
  int64_t* s = src.mutable_data<int64_t>();
  s[0] = 1, s[1] = -2, s[2] = 3;
  const Tensor copy = CopyToPlace(src, CPUPlace());
  EXPECT_NE(copy.raw_data(), src.raw_data());
  EXPECT_EQ(copy.data<int64_t>()[1], -2);
  SynchronizePlace(CPUPlace());
}

}  // namespace
}  // namespace fleet
