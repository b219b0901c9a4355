// SpinWait (the replicas' poll before sleeping) and ReplicaPool at the poll budgets the
// FLEET_DP_SPIN_US switch gives: none, the default, and long.
#include "trainer/spin_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "trainer/replica_pool.h"

namespace fleet::trainer {
namespace {

using std::chrono::microseconds;

TEST(SpinWait, AZeroBudgetChecksOnceAndDoesNotPoll) {
  int checks = 0;
  EXPECT_FALSE(SpinWait(
      [&] {
        ++checks;
        return false;
      },
      microseconds{0}));
  EXPECT_EQ(checks, 1);
  EXPECT_TRUE(SpinWait([] { return true; }, microseconds{0}));
}

TEST(SpinWait, ReturnsTrueOnceAnotherThreadMakesTheConditionTrue) {
  std::atomic<bool> flag{false};
  std::thread setter([&] { flag.store(true); });
  // A budget far longer than any test run: only the flag (or a preemption) ends the poll.
  bool done = false;
  while (!done) done = SpinWait([&] { return flag.load(); }, microseconds{60'000'000});
  setter.join();
  EXPECT_TRUE(flag.load());
}

TEST(SpinWait, GivesUpWhenTheConditionStaysFalse) {
  int checks = 0;
  EXPECT_FALSE(SpinWait(
      [&] {
        ++checks;
        return false;
      },
      microseconds{200}));
  EXPECT_GE(checks, 2);  // the first check, then at least one poll round
}

// A poller that lost its core (here: a check that blocks for a millisecond, longer than
// kSpinPreemptedGap) stops at the next clock read instead of polling out its budget.
TEST(SpinWait, APreemptedPollerGivesUpAtOnceWhateverItsBudget) {
  int checks = 0;
  EXPECT_FALSE(SpinWait(
      [&] {
        if (++checks == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return false;
      },
      microseconds{60'000'000}));
  EXPECT_EQ(checks, 2);
}

// Every budget runs each replica exactly once a Run, back to back and after pauses (workers
// asleep), and counts the waits that gave up polling.
TEST(SpinWait, AReplicaPoolRunsEveryReplicaOnceARunAtEveryBudget) {
  for (const int spin : {0, 50, 5000}) {
    ReplicaPool pool(3, microseconds{spin});
    std::vector<int> runs(3, 0);  // each written only by its replica, read between Runs
    for (int i = 0; i < 300; ++i) {
      pool.Run([&](int r) { ++runs[r]; });
      if (i % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ASSERT_EQ(runs, (std::vector<int>{i + 1, i + 1, i + 1})) << "spin " << spin << " run " << i;
    }
    // A pause of 10 ms outlasts every budget here: the workers' waits across the pauses give up
    // polling (6 of them, unless a worker was descheduled for the whole pause).
    EXPECT_GE(pool.polls_given_up_for_work(), 1) << "spin " << spin;
  }
}

}  // namespace
}  // namespace fleet::trainer
