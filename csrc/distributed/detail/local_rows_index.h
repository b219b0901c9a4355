#pragma once
// The id -> row index of one LocalRows shard (local_rows.h): open addressing with linear probing
// over one array of 16-byte entries (id, row), a power-of-two capacity and the load kept at most
// 3/4. A lookup of an id present reads one cache line in most cases; absl::flat_hash_map, which
// LocalRows used before, reads its control bytes and then its slot array, two lines apart, and
// spent about 78 instructions an id in the lookups of a CTR-DNN step against 37 here (callgrind).
//
// The caller hashes each id once with Hash and passes that hash to every call: LocalRows picks
// the shard from the hash's top kShardBits bits, and the index takes its bucket from the bits
// just below them, so the ids of one shard still spread over all of its buckets.
//
// Not thread-safe: the owning shard's lock guards it.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "ps/sharding.h"

namespace fleet::distributed::detail {

class LocalRowsIndex {
 public:
  // The row of an id the index does not hold.
  static constexpr uint32_t kAbsent = UINT32_MAX;
  // Bits at the top of Hash that choose the shard, and that the bucket therefore skips.
  static constexpr int kShardBits = 4;

  // The hash every caller passes for `id`: salted so that it is independent of the servers'
  // key sharding (ps::HashKeyShard hashes the bare id with the same mixer).
  static uint64_t Hash(int64_t id) {
    return ps::Mix64(static_cast<uint64_t>(id) ^ 0x2545F4914F6CDD1DULL);
  }
  // The shard of `hash` among 2^kShardBits.
  static size_t ShardOf(uint64_t hash) { return static_cast<size_t>(hash >> (64 - kShardBits)); }

  // The row of `id` (whose hash is `hash`), or kAbsent.
  uint32_t Find(int64_t id, uint64_t hash) const {
    if (entries_.empty()) return kAbsent;
    for (size_t i = Bucket(hash);; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.row == kAbsent) return kAbsent;
      if (e.id == id) return e.row;
    }
  }
  // Brings the first entry a Find of `hash` reads into the cache.
  void Prefetch(uint64_t hash) const {
    if (!entries_.empty()) __builtin_prefetch(&entries_[Bucket(hash)]);
  }
  // The row of `id` if the index holds it (and false); else adds id -> `row` (and true).
  // `row` must not be kAbsent.
  std::pair<uint32_t, bool> Insert(int64_t id, uint64_t hash, uint32_t row) {
    if ((size_ + 1) * 4 > entries_.size() * 3) Grow();
    size_t i = Bucket(hash);
    for (; entries_[i].row != kAbsent; i = (i + 1) & mask_) {
      if (entries_[i].id == id) return {entries_[i].row, false};
    }
    entries_[i] = Entry{id, row};
    ++size_;
    return {row, true};
  }
  size_t size() const { return size_; }

 private:
  struct Entry {
    int64_t id = 0;
    uint32_t row = kAbsent;
  };
  static constexpr size_t kMinCapacity = 16;

  size_t Bucket(uint64_t hash) const { return static_cast<size_t>((hash << kShardBits) >> shift_); }
  // Doubles the capacity and places every entry again (rows keep their numbers).
  void Grow() {
    std::vector<Entry> old;
    old.swap(entries_);
    const size_t capacity = old.empty() ? kMinCapacity : 2 * old.size();
    entries_.assign(capacity, Entry{});
    mask_ = capacity - 1;
    shift_ = 64 - __builtin_ctzll(capacity);
    for (const Entry& e : old) {
      if (e.row == kAbsent) continue;
      size_t i = Bucket(Hash(e.id));
      while (entries_[i].row != kAbsent) i = (i + 1) & mask_;
      entries_[i] = e;
    }
  }

  std::vector<Entry> entries_;
  size_t size_ = 0;
  size_t mask_ = 0;
  int shift_ = 64;
};

}  // namespace fleet::distributed::detail
