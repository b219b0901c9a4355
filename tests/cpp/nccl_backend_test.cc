// The NCCL backend's collectives on device buffers: all-reduce (out of place and in place),
// broadcast, all-gather and barrier, and the call check. One GPU runs a group of one rank (NCCL
// refuses two ranks on one device); two GPUs run two ranks as threads of this process, each on
// its own device. Everything here skips without NCCL or a GPU: what runs on CPU machines (the id
// exchange, the errors before any device is touched) is tested in
// tests/python/gpu/test_nccl_backend.py.

#include "collective/nccl_backend.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "collective/memory_store.h"
#include "core/errors.h"
#include "fleet/build_config.h"
#ifdef FLEET_WITH_CUDA
#include "core/cuda_device.h"
#endif

namespace fleet::collective {
namespace {

#ifdef FLEET_WITH_CUDA

using std::chrono::seconds;

// Skips the test unless NCCL is built in and `devices` GPUs are visible.
#define REQUIRE_NCCL_DEVICES(devices)                                               \
  do {                                                                              \
    if (!nccl_compiled()) GTEST_SKIP() << "this build has no NCCL backend";         \
    if (cuda_device_count() < (devices)) {                                          \
      GTEST_SKIP() << "needs " << (devices) << " CUDA device(s), this machine has " \
                   << cuda_device_count();                                          \
    }                                                                               \
  } while (0)

CudaBuffer DeviceCopy(const std::vector<float>& host) {
  CudaBuffer buffer(sizeof(float) * host.size());
  buffer.CopyFromHost(host.data(), sizeof(float) * host.size());
  return buffer;
}

std::vector<float> HostCopy(const CudaBuffer& buffer, size_t count) {
  std::vector<float> host(count);
  buffer.CopyToHost(host.data(), sizeof(float) * count);
  return host;
}

// What one rank of a group computes; `rank` of `size`, on device `rank`.
struct RankResults {
  std::vector<float> sum, max, in_place, broadcast, gathered;
  std::string mismatch;
};

RankResults RunRank(Store* store, int rank, int size) {
  NcclOptions options;
  options.name = "test";
  options.device = rank;
  options.comm_num = 2;  // calls alternate between the two communicators
  options.timeout = seconds(60);
  auto group = NcclBackend::Connect(store, rank, size, options);
  CudaSetDevice(rank);
  RankResults results;
  const std::vector<float> mine{1.f + rank, 2.f * (rank + 1), -3.f * rank, 4.f};
  const size_t n = mine.size();
  CudaBuffer in = DeviceCopy(mine);
  CudaBuffer out(sizeof(float) * n);
  AllReduceOptions sum;
  sum.timeout = seconds(60);
  group->AllReduce(in.data(), out.data(), n, DType::kFloat32, sum);
  results.sum = HostCopy(out, n);
  AllReduceOptions max = sum;
  max.op = ReduceOp::kMax;
  group->AllReduce(in.data(), out.data(), n, DType::kFloat32, max);
  results.max = HostCopy(out, n);
  group->AllReduce(in.data(), in.data(), n, DType::kFloat32, sum);
  results.in_place = HostCopy(in, n);

  CudaBuffer data = DeviceCopy(mine);
  BroadcastOptions broadcast;
  broadcast.root = size - 1;
  broadcast.timeout = seconds(60);
  group->Broadcast(data.data(), sizeof(float) * n, broadcast);
  results.broadcast = HostCopy(data, n);

  CudaBuffer source = DeviceCopy(mine);
  CudaBuffer gathered(sizeof(float) * n * size);
  AllGatherOptions gather;
  gather.timeout = seconds(60);
  group->AllGather(source.data(), gathered.data(), sizeof(float) * n, gather);
  results.gathered = HostCopy(gathered, n * size);

  group->Barrier(BarrierOptions{seconds(60)});
  if (size > 1) {
    // The last rank reduces one element fewer: every rank raises, naming it.
    try {
      group->AllReduce(in.data(), out.data(), rank == size - 1 ? n - 1 : n, DType::kFloat32, sum);
    } catch (const InvalidArgument& e) {
      results.mismatch = e.what();
    }
  }
  return results;
}

std::vector<float> Expected(int size, float (*reduce)(float, float)) {
  std::vector<float> total;
  for (int r = 0; r < size; ++r) {
    const std::vector<float> v{1.f + r, 2.f * (r + 1), -3.f * r, 4.f};
    if (total.empty()) {
      total = v;
    } else {
      for (size_t i = 0; i < v.size(); ++i) total[i] = reduce(total[i], v[i]);
    }
  }
  return total;
}

void ExpectResults(const RankResults& got, int rank, int size) {
  const auto sum = Expected(size, [](float a, float b) { return a + b; });
  const auto max = Expected(size, [](float a, float b) { return a > b ? a : b; });
  EXPECT_EQ(got.sum, sum) << "rank " << rank;
  EXPECT_EQ(got.max, max) << "rank " << rank;
  EXPECT_EQ(got.in_place, sum) << "rank " << rank;
  const int root = size - 1;
  EXPECT_EQ(got.broadcast, (std::vector<float>{1.f + root, 2.f * (root + 1), -3.f * root, 4.f}))
      << "rank " << rank;
  std::vector<float> all;
  for (int r = 0; r < size; ++r) {
    for (float v : {1.f + r, 2.f * (r + 1), -3.f * r, 4.f}) all.push_back(v);
  }
  EXPECT_EQ(got.gathered, all) << "rank " << rank;
}

TEST(NcclBackendTest, AGroupOfOneRankRunsEveryCollectiveOnDeviceBuffers) {
  REQUIRE_NCCL_DEVICES(1);
  MemoryStore store;
  ExpectResults(RunRank(&store, 0, 1), 0, 1);
}

TEST(NcclBackendTest, TwoRanksOnTwoDevicesReduceBroadcastGatherAndNameAMismatch) {
  REQUIRE_NCCL_DEVICES(2);
  MemoryStore store;
  std::vector<RankResults> results(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        results[r] = RunRank(&store, r, 2);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ExpectResults(results[r], r, 2);
    EXPECT_NE(results[r].mismatch.find("rank 1 calls all-reduce(float32 12 bytes, sum)"),
              std::string::npos)
        << results[r].mismatch;
  }
}

TEST(NcclBackendTest, ACallThatAPeerNeverMakesTimesOutAndBreaksTheGroup) {
  REQUIRE_NCCL_DEVICES(2);
  MemoryStore store;
  std::string error;
  std::thread peer([&] {
    NcclOptions options;
    options.name = "lonely";
    options.device = 1;
    auto group = NcclBackend::Connect(&store, 1, 2, options);
    // Misses rank 0's barrier; its own, after rank 0 aborted, fails too, and then its
    // communicator is aborted rather than destroyed (a destroy could wait for the dead peer).
    std::this_thread::sleep_for(seconds(3));
    try {
      group->Barrier(BarrierOptions{seconds(1)});
    } catch (const Error&) {
    }
  });
  NcclOptions options;
  options.name = "lonely";
  options.device = 0;
  auto group = NcclBackend::Connect(&store, 0, 2, options);
  CudaSetDevice(0);
  try {
    group->Barrier(BarrierOptions{seconds(1)});
    ADD_FAILURE() << "the barrier returned without its peer";
  } catch (const Timeout& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("NCCL group 'lonely' (rank 0 of 2): barrier"), std::string::npos) << error;
  EXPECT_THROW(group->Barrier(BarrierOptions{seconds(1)}), Unavailable);  // broken
  peer.join();
}

#else

TEST(NcclBackendTest, NotCompiled) { GTEST_SKIP() << "Fleet was built without CUDA"; }

#endif

}  // namespace
}  // namespace fleet::collective
