#include "distributed/detail/local_rows_buffer.h"

#include <cstdint>
#include <new>
#include <vector>

#include "gtest/gtest.h"

namespace fleet::distributed::detail {
namespace {

// Rows of 48 floats appended one by one past several doublings (16 pages, then 32, 64, ...):
// every earlier row keeps its bytes across each remap, each appended row reads 0 before it is
// written, and the storage stays on a cache line.
TEST(LocalRowsBuffer, AppendedRowsAreZeroAndEarlierRowsSurviveEveryGrowth) {
  constexpr size_t kStride = 48;
  constexpr size_t kRows = 20000;  // 3.7 MiB: from 64 KiB through six doublings
  LocalRowsBuffer buffer;
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(buffer.data(), nullptr);
  const float* last_data = nullptr;
  int moves_or_growths = 0;
  for (size_t r = 0; r < kRows; ++r) {
    buffer.Append(kStride);
    ASSERT_EQ(buffer.size(), (r + 1) * kStride);
    if (buffer.data() != last_data) ++moves_or_growths;
    last_data = buffer.data();
    ASSERT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 64, 0u) << "row " << r;
    float* row = buffer.data() + r * kStride;
    for (size_t i = 0; i < kStride; ++i) ASSERT_EQ(row[i], 0.0f) << "row " << r << " float " << i;
    for (size_t i = 0; i < kStride; ++i) row[i] = static_cast<float>(r * kStride + i);
  }
  EXPECT_GE(moves_or_growths, 1);
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t i = 0; i < kStride; ++i) {
      ASSERT_EQ(buffer.data()[r * kStride + i], static_cast<float>(r * kStride + i))
          << "row " << r << " float " << i;
    }
  }
}

// An append larger than twice the mapping maps at least what it needs at once.
TEST(LocalRowsBuffer, OneLargeAppendMapsAllItNeeds) {
  LocalRowsBuffer buffer;
  buffer.Append(3);
  buffer.data()[2] = 7.0f;
  const size_t big = 1 << 20;  // 4 MiB of floats, past any doubling of the first mapping
  buffer.Append(big);
  ASSERT_EQ(buffer.size(), big + 3);
  EXPECT_EQ(buffer.data()[2], 7.0f);
  EXPECT_EQ(buffer.data()[big + 2], 0.0f);
  buffer.data()[big + 2] = 1.0f;  // the last float is mapped and writable
  EXPECT_EQ(buffer.data()[big + 2], 1.0f);
}

// A growth the kernel refuses (2^62 bytes: past any address space) throws std::bad_alloc, and
// the rows already there stay as they were, in the same place.
TEST(LocalRowsBuffer, AGrowthTheKernelRefusesThrowsAndKeepsTheRows) {
  LocalRowsBuffer buffer;
  buffer.Append(4);
  buffer.data()[3] = 5.0f;
  const float* before = buffer.data();
  EXPECT_THROW(buffer.Append(size_t{1} << 60), std::bad_alloc);
  EXPECT_EQ(buffer.size(), 4u);
  EXPECT_EQ(buffer.data(), before);
  EXPECT_EQ(buffer.data()[3], 5.0f);
}

}  // namespace
}  // namespace fleet::distributed::detail
