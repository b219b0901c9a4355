// detail::RoundPool, the threads that apply a sync round: every task index runs exactly once,
// the work really is spread over the helpers, nested batches finish, and a task's exception
// reaches the caller.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ps/server/detail/round_pool.h"

namespace fleet::ps::detail {
namespace {

TEST(RoundPoolTest, RunsEveryIndexExactlyOnce) {
  for (const size_t threads : {1, 2, 4}) {
    RoundPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (const size_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> runs(n);
      pool.ParallelFor(n, [&](size_t i) { runs[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(runs[i].load(), 1)
            << "index " << i << " of " << n << ", " << threads << " threads";
      }
    }
  }
}

TEST(RoundPoolTest, HelpersTakeTasks) {
  RoundPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> seen;
  // Each task waits until three threads have joined, so the batch can only end once every
  // helper took part (a pool that ran everything on the caller would never get there).
  std::atomic<int> arrived{0};
  pool.ParallelFor(3, [&](size_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    while (arrived.load() < 3) std::this_thread::yield();
  });
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen.count(std::this_thread::get_id()), 1u);  // the caller works too
}

TEST(RoundPoolTest, NestedBatchesFinishWithEveryIndexOnce) {
  RoundPool pool(2);
  constexpr size_t kOuter = 3;
  constexpr size_t kInner = 50;
  std::vector<std::atomic<int>> runs(kOuter * kInner);
  for (int round = 0; round < 20; ++round) {
    for (auto& r : runs) r.store(0);
    pool.ParallelFor(kOuter, [&](size_t outer) {
      pool.ParallelFor(kInner, [&](size_t inner) { runs[outer * kInner + inner].fetch_add(1); });
    });
    for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << "index " << i;
  }
}

TEST(RoundPoolTest, ATaskThatThrowsLeavesTheOthersToRunAndIsRethrownToTheCaller) {
  for (const size_t threads : {1, 2, 3}) {
    RoundPool pool(threads);
    constexpr size_t kTasks = 40;
    std::vector<std::atomic<int>> runs(kTasks);
    EXPECT_THROW(pool.ParallelFor(kTasks,
                                  [&](size_t i) {
                                    runs[i].fetch_add(1);
                                    if (i % 7 == 3) throw std::runtime_error("task failed");
                                  }),
                 std::runtime_error)
        << threads << " threads";
    for (size_t i = 0; i < kTasks; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i;
    // The pool still works afterwards.
    std::atomic<size_t> sum{0};
    pool.ParallelFor(kTasks, [&](size_t i) { sum.fetch_add(i); });
    EXPECT_EQ(sum.load(), kTasks * (kTasks - 1) / 2);
  }
}

TEST(RoundPoolTest, ThreadsForTakesTheConfiguredCountOrTheCores) {
  EXPECT_EQ(RoundPool::ThreadsFor(3), 3u);
  const size_t automatic = RoundPool::ThreadsFor(0);
  EXPECT_GE(automatic, 1u);
  EXPECT_LE(automatic, RoundPool::kMaxAutoThreads);
  EXPECT_LE(automatic, std::max(std::thread::hardware_concurrency(), 1u));
}

}  // namespace
}  // namespace fleet::ps::detail
