// ps/detail/run_both.h: two pieces of work at once, and both done even when no thread can be had.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "ps/detail/run_both.h"

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

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

// In a child with 1 MB of address space to spare, less than a thread's stack: exit 0 when both
// pieces ran here, 3 when a thread was created after all, 2 when the limit could not be set.
int RunBothWithoutRoomForAThread() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  const bool read = f != nullptr && std::fscanf(f, "%lu", &pages) == 1;
  if (f != nullptr) std::fclose(f);
  const rlim_t limit = pages * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (rlim_t{1} << 20);
  const rlimit as{limit, limit};
  if (!read || ::setrlimit(RLIMIT_AS, &as) != 0) return 2;
  std::thread::id here_on, beside_on;
  RunBoth([&] { here_on = std::this_thread::get_id(); },
          [&] { beside_on = std::this_thread::get_id(); });
  return here_on == std::this_thread::get_id() && beside_on == here_on ? 0 : 3;
}

TEST(RunBothTest, WithNoThreadToBeHadBothPiecesRunHere) {
  if (kUnderAddressSanitizer) {
    GTEST_SKIP() << "AddressSanitizer maps terabytes of shadow memory and aborts on a failed "
                    "allocation";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // _exit: the child ends without exit handlers, one of which (OpenBLAS's) joins a worker thread
  // that keeps retrying an allocation under the lowered limit.
  EXPECT_EXIT(::_exit(RunBothWithoutRoomForAThread()), testing::ExitedWithCode(0), "")
      << "exit codes: 2 no limit set, 3 a thread was created after all";
}

}  // namespace
}  // namespace fleet::ps::detail
