#pragma once
// Finding the first occurrence of every key of a request, without allocating per request: a
// linear-probing table of 4-byte slots, each holding a position in the request's keys (+1; 0 is
// empty) under a few bits of the key's hash as a tag, so that most foreign slots are skipped
// without reading their key. Small slots keep the table in L2 (1 MiB for 100k keys) where
// 16-byte (key, position, generation) slots spilled to L3 and were a third of the client's
// time; clearing it per request costs a memset of that size. A client keeps a few in a pool.
//
// The probe is inline and the hash is one 64x64->128-bit multiply whose halves are xored (the
// folded multiply of wyhash and of absl's hash): every bit of the fold depends on every bit of
// the key, at a third of the instructions of splitmix64, which the probe used before (about 50
// instructions a key, then the largest cost of building a pull request on the trainer thread).
// The sharding hash stays Mix64 (ps/sharding.h): the two are independent.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "core/prefetch.h"

namespace fleet::ps::detail {

// Not thread-safe: one request at a time.
class KeyDedup {
 public:
  // Prepares for the request `keys` (which must outlive its use), forgetting the previous one.
  void Reset(absl::Span<const int64_t> keys);
  // The position of the first occurrence of keys[position] in the request; records `position`
  // (and returns it) when the key is new. Positions must be visited in increasing order.
  uint32_t FirstOccurrence(uint32_t position) {
    const int64_t key = keys_[position];
    const uint64_t hash = Hash(key);
    const uint32_t tag = TagOf(hash);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const uint32_t slot = slots_[i];
      if (slot == 0) {
        slots_[i] = tag | (position + 1);
        return position;
      }
      if ((slot & tag_mask_) != tag) continue;
      const uint32_t first = (slot & ~tag_mask_) - 1;
      if (keys_[first] == key) return first;
    }
  }
  // Whether Prefetch is worth its hash for this request: only when the table is larger than a
  // core's L2 (512 KB: requests of more than 65,536 keys). A smaller table stays cached between
  // probes, and a second hash and a prefetch a key cost more than they hide: on 100 CTR-DNN
  // steps' keys (13,312 a request, a 128 KB table) dedup took 12% less time without them, and
  // 0-8% less at 53,248 keys (512 KB); at 212,992 keys (2 MB) the prefetch saved ~5% when few
  // keys repeat (and cost ~4% when most do).
  bool WorthPrefetching() const { return slots_.size() > kCachedSlots; }
  // A hint to call some positions ahead of FirstOccurrence(position), so that the misses of the
  // table overlap.
  void Prefetch(uint32_t position) const {
    PrefetchForWrite(&slots_[Hash(keys_[position]) & mask_]);
  }

 private:
  static constexpr size_t kCachedSlots = size_t{1} << 17;  // 512 KB of slots
  static uint64_t Hash(int64_t key) {
    constexpr uint64_t kMultiplier = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio, odd
    const unsigned __int128 product =
        static_cast<unsigned __int128>(static_cast<uint64_t>(key)) * kMultiplier;
    return static_cast<uint64_t>(product >> 64) ^ static_cast<uint64_t>(product);
  }
  // The tag bits of a slot for `hash`: its high half, above the position bits (the slot index
  // uses the low half).
  uint32_t TagOf(uint64_t hash) const { return static_cast<uint32_t>(hash >> 32) & tag_mask_; }

  std::vector<uint32_t> slots_;
  uint64_t mask_ = 0;
  uint32_t tag_mask_ = 0;  // the slot bits above those of (position + 1)
  absl::Span<const int64_t> keys_;
};

// Idle KeyDedup tables for reuse by concurrent callers. Thread-safe.
class KeyDedupPool {
 public:
  std::unique_ptr<KeyDedup> Acquire();
  void Release(std::unique_ptr<KeyDedup> dedup);

 private:
  static constexpr size_t kMaxIdle = 16;
  std::mutex mu_;
  std::vector<std::unique_ptr<KeyDedup>> idle_;
};

}  // namespace fleet::ps::detail
