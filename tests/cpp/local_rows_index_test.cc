// GEO's per-shard id index (distributed/detail/local_rows_index.h) against absl::flat_hash_map,
// the structure it replaced: random inserts (new ids, repeats, negative and extreme ids, ids
// that collide in their low bits) and lookups of present and absent ids must give the same rows,
// through the index's growth from empty.
#include "distributed/detail/local_rows_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace fleet::distributed::detail {
namespace {

// Ids drawn from a few families: small dense ids, ids spread over the whole int64 range, ids
// equal in their low 32 bits, and the extremes.
int64_t DrawId(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return static_cast<int64_t>(rng() % 5000);
    case 1:
      return static_cast<int64_t>(rng());
    case 2:
      return static_cast<int64_t>((rng() % 64) << 32);
    default: {
      const int64_t extremes[] = {0, -1, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max()};
      return extremes[rng() % 4];
    }
  }
}

TEST(LocalRowsIndex, AgreesWithAbslFlatHashMapThroughRandomInsertsAndLookups) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    LocalRowsIndex index;
    absl::flat_hash_map<int64_t, uint32_t> reference;
    std::vector<int64_t> inserted;
    for (int op = 0; op < 60000; ++op) {
      // Insert a new or a repeated id half the time; else look one up (present or not).
      const bool insert = rng() % 2 == 0;
      const bool repeat = !inserted.empty() && rng() % 4 == 0;
      const int64_t id = repeat ? inserted[rng() % inserted.size()] : DrawId(rng);
      const uint64_t hash = LocalRowsIndex::Hash(id);
      if (insert) {
        const uint32_t row = static_cast<uint32_t>(reference.size());
        const auto [it, added] = reference.try_emplace(id, row);
        const auto [got_row, got_added] = index.Insert(id, hash, row);
        ASSERT_EQ(got_added, added) << "seed " << seed << " op " << op << " id " << id;
        ASSERT_EQ(got_row, it->second) << "seed " << seed << " op " << op << " id " << id;
        if (added) inserted.push_back(id);
      } else {
        auto it = reference.find(id);
        const uint32_t expected = it == reference.end() ? LocalRowsIndex::kAbsent : it->second;
        ASSERT_EQ(index.Find(id, hash), expected) << "seed " << seed << " op " << op;
      }
      ASSERT_EQ(index.size(), reference.size());
    }
    // Every id inserted is found at its row after all the growth.
    for (const int64_t id : inserted) {
      ASSERT_EQ(index.Find(id, LocalRowsIndex::Hash(id)), reference.at(id)) << "id " << id;
    }
    EXPECT_GT(inserted.size(), 8000u);  // the growth from 16 entries went through 10 doublings
  }
}

TEST(LocalRowsIndex, AnEmptyIndexHoldsNothing) {
  LocalRowsIndex index;
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.Find(7, LocalRowsIndex::Hash(7)), LocalRowsIndex::kAbsent);
  index.Prefetch(LocalRowsIndex::Hash(7));  // no entries to touch: must not fault
  const auto [row, added] = index.Insert(7, LocalRowsIndex::Hash(7), 0);
  EXPECT_TRUE(added);
  EXPECT_EQ(row, 0u);
  EXPECT_EQ(index.Find(7, LocalRowsIndex::Hash(7)), 0u);
  EXPECT_EQ(index.Find(8, LocalRowsIndex::Hash(8)), LocalRowsIndex::kAbsent);
}

TEST(LocalRowsIndex, ConsecutiveIdsSpreadEvenlyOverTheShards) {
  // LocalRows takes the shard from the hash's top bits (and the index its bucket from the bits
  // below): consecutive ids, the common case, must fill every shard about evenly.
  std::vector<size_t> per_shard(size_t{1} << LocalRowsIndex::kShardBits, 0);
  const int ids = 160000;
  for (int64_t id = 0; id < ids; ++id) {
    ++per_shard[LocalRowsIndex::ShardOf(LocalRowsIndex::Hash(id))];
  }
  for (size_t count : per_shard) {
    EXPECT_GT(count, ids / per_shard.size() * 9 / 10);
    EXPECT_LT(count, ids / per_shard.size() * 11 / 10);
  }
}

}  // namespace
}  // namespace fleet::distributed::detail
