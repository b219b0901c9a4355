// ps/detail/row_store.h: PageArray, the zeroed arrays that hold a sparse shard's rows and index.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/huge_pages.h"
#include "ps/detail/row_store.h"

namespace fleet::ps::detail {
namespace {

// Every element reads as zero and takes a write, first to last.
template <class T>
void ExpectZeroedAndWritable(PageArray<T>& array) {
  for (size_t i = 0; i < array.size(); i += 997) EXPECT_EQ(array[i], T{0}) << i;
  EXPECT_EQ(array[array.size() - 1], T{0});
  for (size_t i = 0; i < array.size(); ++i) array[i] = static_cast<T>(i % 251);
  EXPECT_EQ(array[array.size() - 1], static_cast<T>((array.size() - 1) % 251));
}

TEST(PageArrayTest, LargeArraysStartOnA2MBBoundarySoAllOfThemCanBeHugePages) {
  // A chunk group of 16 x 4096 rows of 19 words, and sizes around the threshold.
  for (size_t bytes : {kHugePageMinBytes, size_t{4980736}, size_t{5} << 20, size_t{33} << 20}) {
    PageArray<float> array(bytes / sizeof(float));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(array.data()) % kHugePageBytes, 0u) << bytes;
    ExpectZeroedAndWritable(array);
  }
}

TEST(PageArrayTest, SmallAndMidSizedArraysAreZeroedAndMoveWhole) {
  for (size_t n : {size_t{1}, size_t{1000}, size_t{100000}}) {
    PageArray<uint32_t> array(n);
    ExpectZeroedAndWritable(array);
    PageArray<uint32_t> moved(std::move(array));
    EXPECT_EQ(moved.size(), n);
    EXPECT_TRUE(array.empty());
    EXPECT_EQ(moved[n - 1], static_cast<uint32_t>((n - 1) % 251));
  }
}

}  // namespace
}  // namespace fleet::ps::detail
