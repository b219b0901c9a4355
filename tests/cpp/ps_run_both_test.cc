// ps/detail/run_both.h: two pieces of work at once, and both done even when no thread can be had.
#include <gtest/gtest.h>
#include <unistd.h>  // _exit

#include <cstddef>
#include <stdexcept>
#include <thread>

#include "memory_limit.h"
#include "ps/table/detail/run_both.h"

namespace fleet::ps::detail {
namespace {

TEST(RunBothTest, RunsBothPiecesOnTwoThreads) {
  std::thread::id here_on, beside_on;
  RunBoth([&] { here_on = std::this_thread::get_id(); },
          [&] { beside_on = std::this_thread::get_id(); });
  EXPECT_EQ(here_on, std::this_thread::get_id());
  EXPECT_NE(beside_on, std::thread::id());
  EXPECT_NE(beside_on, here_on);
}

TEST(RunBothTest, AnErrorHereComesAfterTheOtherPieceIsDone) {
  bool beside_done = false;
  EXPECT_THROW(
      RunBoth([] { throw std::runtime_error("here failed"); }, [&] { beside_done = true; }),
      std::runtime_error);
  EXPECT_TRUE(beside_done);
}

// In a child with 1 MB of address space to spare, less than a thread's stack: exit 0 when both
// pieces ran here, 3 when a thread was created after all, 2 when the limit could not be set.
int RunBothWithoutRoomForAThread() {
  if (!testing_memory::LimitMemoryTo(size_t{1} << 20)) return 2;
  std::thread::id here_on, beside_on;
  RunBoth([&] { here_on = std::this_thread::get_id(); },
          [&] { beside_on = std::this_thread::get_id(); });
  return here_on == std::this_thread::get_id() && beside_on == here_on ? 0 : 3;
}

TEST(RunBothTest, WithNoThreadToBeHadBothPiecesRunHere) {
  if (testing_memory::kUnderAddressSanitizer) {
    GTEST_SKIP() << testing_memory::kSkipUnderAddressSanitizer;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // _exit: the child ends without exit handlers, one of which (OpenBLAS's) joins a worker thread
  // that keeps retrying an allocation under the lowered limit.
  EXPECT_EXIT(::_exit(RunBothWithoutRoomForAThread()), testing::ExitedWithCode(0), "")
      << "exit codes: 2 no limit set, 3 a thread was created after all";
}

}  // namespace
}  // namespace fleet::ps::detail
