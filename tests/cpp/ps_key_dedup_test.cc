// The client's key deduplication (ps/client/detail/key_dedup.h): for every position of a request,
// the position where its key first occurs, as PullSparse and PushSparse use it to send each key
// once and to copy or merge the repeats. Checked against a plain hash map on requests whose keys
// stress the table: many repeats, keys that differ only in their high bits, extreme values, and
// one table reused across requests of growing and shrinking size.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "ps/client/detail/key_dedup.h"

namespace fleet::ps::detail {
namespace {

// The first position of each position's key, from a reference hash map.
std::vector<uint32_t> ExpectedFirst(const std::vector<int64_t>& keys) {
  std::unordered_map<int64_t, uint32_t> first;
  std::vector<uint32_t> out(keys.size());
  for (uint32_t i = 0; i < keys.size(); ++i) out[i] = first.try_emplace(keys[i], i).first->second;
  return out;
}

// What the table answers, visiting the positions in order with the callers' prefetch hints
// (`ahead` positions ahead; 0: none).
std::vector<uint32_t> Dedup(KeyDedup* dedup, const std::vector<int64_t>& keys, uint32_t ahead) {
  dedup->Reset(keys);
  std::vector<uint32_t> out(keys.size());
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (ahead > 0 && i + ahead < keys.size()) dedup->Prefetch(i + ahead);
    out[i] = dedup->FirstOccurrence(i);
  }
  return out;
}

// `n` keys drawn from `distinct` values spread by `stride`, so that about n / distinct repeat.
std::vector<int64_t> RandomKeys(size_t n, int64_t distinct, int64_t stride, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, distinct - 1);
  std::vector<int64_t> keys(n);
  for (auto& k : keys) k = pick(rng) * stride;
  return keys;
}

TEST(KeyDedupTest, FirstOccurrencesMatchAHashMap) {
  KeyDedup dedup;
  // CTR-DNN's shape (26 slots x 512 samples over a large id space), then heavy repetition.
  for (const auto& keys : {RandomKeys(13312, 1000000, 1, 1), RandomKeys(13312, 300, 1, 2),
                           RandomKeys(5000, 4000, 7, 3)}) {
    EXPECT_EQ(Dedup(&dedup, keys, 64), ExpectedFirst(keys));
    EXPECT_EQ(Dedup(&dedup, keys, 0), ExpectedFirst(keys));
  }
}

TEST(KeyDedupTest, KeysThatDifferOnlyInHighBits) {
  KeyDedup dedup;
  // Slot ids packed above a feature id (as hashed feature signs often are), and powers of two:
  // keys whose low bits are all equal must still be told apart and spread.
  for (int shift : {16, 32, 48, 56}) {
    std::vector<int64_t> keys;
    for (int64_t high = 0; high < 200; ++high) {
      for (int64_t low = 0; low < 3; ++low) keys.push_back((high << shift) | low);
    }
    // Every key twice, the second time in reverse order.
    const std::vector<int64_t> once = keys;
    keys.insert(keys.end(), once.rbegin(), once.rend());
    EXPECT_EQ(Dedup(&dedup, keys, 64), ExpectedFirst(keys)) << "shift " << shift;
  }
}

TEST(KeyDedupTest, ExtremeAndNegativeKeys) {
  KeyDedup dedup;
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const int64_t hi = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> keys = {0, -1, lo, hi, 1, -1, 0, hi, lo, lo + 1, hi - 1, 1, -2, 0};
  EXPECT_EQ(Dedup(&dedup, keys, 64), ExpectedFirst(keys));
  const std::vector<int64_t> same(1000, -7);
  EXPECT_EQ(Dedup(&dedup, same, 64), std::vector<uint32_t>(1000, 0));
  const std::vector<int64_t> none;
  EXPECT_TRUE(Dedup(&dedup, none, 64).empty());
}

TEST(KeyDedupTest, AReusedTableForgetsThePreviousRequest) {
  KeyDedup dedup;
  // Large (fewer tag bits: 2^17 positions), small, large again: each request's answers are its
  // own, whatever the table held before and whatever size it was.
  for (const auto& keys :
       {RandomKeys(70000, 50000, 1, 4), RandomKeys(40, 30, 1, 5), RandomKeys(40, 30, 1, 5),
        RandomKeys(3000, 2000, 1, 6), RandomKeys(70000, 60000, 3, 7)}) {
    EXPECT_EQ(Dedup(&dedup, keys, 64), ExpectedFirst(keys)) << keys.size() << " keys";
  }
}

TEST(KeyDedupTest, OnlyATableLargerThanL2IsPrefetched) {
  KeyDedup dedup;
  // A CTR-DNN step (13,312 keys: a 128 KB table) and the largest request of a table that fits
  // 512 KB probe without prefetching; one more key doubles the table and turns it on.
  for (const size_t n : {size_t{13312}, size_t{65536}, size_t{65537}}) {
    const std::vector<int64_t> keys = RandomKeys(n, 1000000, 1, 11);
    dedup.Reset(keys);
    EXPECT_EQ(dedup.WorthPrefetching(), n > 65536) << n << " keys";
    EXPECT_EQ(Dedup(&dedup, keys, dedup.WorthPrefetching() ? 64 : 0), ExpectedFirst(keys));
  }
}

TEST(KeyDedupTest, PoolHandsBackReleasedTables) {
  KeyDedupPool pool;
  std::unique_ptr<KeyDedup> a = pool.Acquire();
  KeyDedup* raw = a.get();
  pool.Release(std::move(a));
  std::unique_ptr<KeyDedup> b = pool.Acquire();
  EXPECT_EQ(b.get(), raw);
  const std::vector<int64_t> keys = RandomKeys(1000, 100, 1, 8);
  EXPECT_EQ(Dedup(b.get(), keys, 64), ExpectedFirst(keys));
}

}  // namespace
}  // namespace fleet::ps::detail
