// ps/detail/write_behind.h: buffers written in order on a thread of their own, the first error
// kept, and every buffer still written when no thread can be had.
#include <gtest/gtest.h>
#include <unistd.h>  // _exit

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "memory_limit.h"
#include "ps/table/detail/write_behind.h"

namespace fleet::ps::detail {
namespace {

constexpr size_t kBytes = 64;

// Fills `*buffer` with `text` and submits it.
absl::Status SubmitText(WriteBehind& writer, std::unique_ptr<char[]>* buffer,
                        const std::string& text) {
  std::memcpy(buffer->get(), text.data(), text.size());
  return writer.Submit(buffer, text.size());
}

TEST(WriteBehindTest, WritesEveryBufferInOrderOnItsOwnThread) {
  std::string out;
  std::vector<std::thread::id> written_on;
  WriteBehind writer(kBytes, [&](const char* data, size_t bytes) {
    out.append(data, bytes);
    written_on.push_back(std::this_thread::get_id());
    return absl::OkStatus();
  });
  auto buffer = std::make_unique<char[]>(kBytes);
  const char* first = buffer.get();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(SubmitText(writer, &buffer, std::to_string(i) + ",").ok());
    ASSERT_NE(buffer, nullptr);  // a free buffer back every time
    // The caller refills the other buffer while one is written.
    if (i == 0) EXPECT_NE(buffer.get(), first);
  }
  ASSERT_TRUE(writer.Drain().ok());
  std::string expected;
  for (int i = 0; i < 100; ++i) expected += std::to_string(i) + ",";
  EXPECT_EQ(out, expected);
  for (const auto& id : written_on) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(WriteBehindTest, TheFirstErrorStopsTheWritesAndComesBackFromEveryLaterCall) {
  int writes = 0;
  WriteBehind writer(kBytes, [&](const char*, size_t) {
    ++writes;
    return writes == 2 ? absl::InternalError("cannot write /tmp/x: No space left on device")
                       : absl::OkStatus();
  });
  auto buffer = std::make_unique<char[]>(kBytes);
  absl::Status status;
  for (int i = 0; i < 10 && status.ok(); ++i) status = SubmitText(writer, &buffer, "row");
  EXPECT_EQ(writer.Drain().message(), "cannot write /tmp/x: No space left on device");
  EXPECT_FALSE(SubmitText(writer, &buffer, "more").ok());
  EXPECT_EQ(writes, 2);  // nothing after the failed write
}

TEST(WriteBehindTest, DestroyingItWaitsForTheBufferInFlight) {
  bool written = false;
  {
    WriteBehind writer(kBytes, [&](const char*, size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      written = true;
      return absl::OkStatus();
    });
    auto buffer = std::make_unique<char[]>(kBytes);
    ASSERT_TRUE(SubmitText(writer, &buffer, "last").ok());
  }
  EXPECT_TRUE(written);
}

// In a child with 1 MB of address space to spare, less than a thread's stack: exit 0 when every
// buffer was written in order on this thread, 3 otherwise, 2 when the limit could not be set.
int WriteWithoutRoomForAThread() {
  if (!testing_memory::LimitMemoryTo(size_t{1} << 20)) return 2;
  std::string out;
  bool elsewhere = false;
  const auto here = std::this_thread::get_id();
  WriteBehind writer(kBytes, [&](const char* data, size_t bytes) {
    out.append(data, bytes);
    elsewhere |= std::this_thread::get_id() != here;
    return absl::OkStatus();
  });
  auto buffer = std::make_unique<char[]>(kBytes);
  for (const char* text : {"a", "b", "c"}) {
    if (!SubmitText(writer, &buffer, text).ok()) return 3;
  }
  return writer.Drain().ok() && out == "abc" && !elsewhere ? 0 : 3;
}

TEST(WriteBehindTest, WithNoThreadToBeHadBuffersAreWrittenHere) {
  if (testing_memory::kUnderAddressSanitizer) {
    GTEST_SKIP() << testing_memory::kSkipUnderAddressSanitizer;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // _exit: the child ends without exit handlers (see ps_run_both_test.cc).
  EXPECT_EXIT(::_exit(WriteWithoutRoomForAThread()), testing::ExitedWithCode(0), "")
      << "exit codes: 2 no limit set, 3 not written here in order";
}

}  // namespace
}  // namespace fleet::ps::detail
