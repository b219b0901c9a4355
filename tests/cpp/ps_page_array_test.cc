// ps/detail/row_store.h: PageArray, the zeroed arrays that hold a sparse shard's rows and index,
// and RowStore's one-probe FindOrInsert, a load's path.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "core/huge_pages.h"
#include "ps/table/detail/row_store.h"

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

TEST(PageArrayTest, APopulatedArrayIsResidentAtOnceAndStillZeroed) {
  // An index about to be filled: every page is in memory before the first write.
  const size_t n = (size_t{8} << 20) / sizeof(uint32_t);
  const long page = ::sysconf(_SC_PAGESIZE);
  void* probe = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  const bool supported = ::madvise(probe, page, 23 /* MADV_POPULATE_WRITE */) == 0;
  ::munmap(probe, page);
  if (!supported) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux 5.14)";
  PageArray<uint32_t> array(n, /*populate=*/true);
  const size_t bytes = n * sizeof(uint32_t);
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  ASSERT_EQ(::mincore(array.data(), bytes, resident.data()), 0);
  size_t in_memory = 0;
  for (unsigned char r : resident) in_memory += r & 1;
  EXPECT_EQ(in_memory, resident.size());
  ExpectZeroedAndWritable(array);
}

TEST(RowStoreTest, FindOrInsertFindsWhatItInsertedAcrossGrowth) {
  // 200k keys: the index grows many times from empty. Each key is new once, found after, and
  // keeps its row (rows never move) and its stamp.
  RowStore store(4);
  std::vector<float*> rows;
  for (int64_t i = 0; i < 200000; ++i) {
    const int64_t key = i * 0x9E3779B97F4A7C15LL;
    bool inserted = false;
    float* row = store.FindOrInsert(key, RowStore::Hash(key), 7, &inserted);
    ASSERT_NE(row, nullptr);
    ASSERT_TRUE(inserted) << i;
    row[0] = static_cast<float>(i);
    rows.push_back(row);
  }
  EXPECT_EQ(store.size(), 200000u);
  for (int64_t i = 0; i < 200000; i += 7) {
    const int64_t key = i * 0x9E3779B97F4A7C15LL;
    bool inserted = true;
    float* row = store.FindOrInsert(key, RowStore::Hash(key), 9, &inserted);
    ASSERT_FALSE(inserted) << i;
    ASSERT_EQ(row, rows[i]);
    EXPECT_EQ(row[0], static_cast<float>(i));
    EXPECT_EQ(RowStore::GetStamp(row), 7u);  // a find does not restamp
    EXPECT_EQ(store.Find(key, RowStore::Hash(key)), row);
  }
  EXPECT_EQ(store.size(), 200000u);
}

}  // namespace
}  // namespace fleet::ps::detail
