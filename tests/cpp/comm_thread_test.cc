// CommThread::RunIfIdle: a synchronous collective runs on its caller's thread only when nothing
// is queued or running, so the group's collectives still reach the backend in program order.

#include "collective/comm_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"

namespace fleet::collective {
namespace {

using std::chrono::seconds;

TEST(CommThreadTest, AnIdleThreadLetsTheCallerRunTheTask) {
  CommThread comm("group 'test'");
  std::thread::id ran_on;
  ASSERT_TRUE(comm.RunIfIdle([&] { ran_on = std::this_thread::get_id(); }));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(CommThreadTest, ABusyThreadRunsNothingHereAndKeepsOrder) {
  CommThread comm("group 'test'");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  std::vector<int> order;
  auto first = comm.Submit([&] {
    started.set_value();
    released.wait();
    order.push_back(1);
  });
  started.get_future().wait();
  bool ran_here = false;
  EXPECT_FALSE(comm.RunIfIdle([&] { ran_here = true; }));  // a task is running
  auto second = comm.Submit([&] { order.push_back(2); });
  release.set_value();
  second->Wait(seconds(10), "second");
  EXPECT_FALSE(ran_here);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  // Queue drained: the caller runs the next one.
  EXPECT_TRUE(comm.RunIfIdle([&] { order.push_back(3); }));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(CommThreadTest, ATaskQueuedWhileTheCallerRunsOneWaitsForIt) {
  CommThread comm("group 'test'");
  std::atomic<bool> inline_done{false};
  std::atomic<bool> queued_saw_inline_done{false};
  std::promise<void> inline_started;
  std::thread caller([&] {
    comm.RunIfIdle([&] {
      inline_started.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      inline_done = true;
    });
  });
  inline_started.get_future().wait();
  auto queued = comm.Submit([&] { queued_saw_inline_done = inline_done.load(); });
  queued->Wait(seconds(10), "queued");
  caller.join();
  EXPECT_TRUE(queued_saw_inline_done);
}

TEST(CommThreadTest, AnErrorOfATaskRunHereBreaksTheThreadForLaterTasks) {
  CommThread comm("group 'test'");
  EXPECT_THROW(comm.RunIfIdle([] { throw Unavailable("rank 1 is gone"); }), Unavailable);
  bool ran = false;
  try {
    comm.RunIfIdle([&] { ran = true; });
    ADD_FAILURE() << "a broken thread ran a task";
  } catch (const Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 is gone"), std::string::npos) << e.what();
  }
  auto later = comm.Submit([&] { ran = true; });
  try {
    later->Wait(seconds(10), "later");
    ADD_FAILURE() << "a queued task on a broken thread succeeded";
  } catch (const Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 is gone"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(ran);
}

TEST(CommThreadTest, AForeignExceptionOfATaskRunHereBecomesInternalNamingTheThread) {
  CommThread comm("group 'test'");
  try {
    comm.RunIfIdle([] { throw std::runtime_error("bad alloc in gloo"); });
    ADD_FAILURE() << "no error";
  } catch (const Internal& e) {
    EXPECT_EQ(std::string(e.what()), "group 'test': bad alloc in gloo");
  }
}

}  // namespace
}  // namespace fleet::collective
