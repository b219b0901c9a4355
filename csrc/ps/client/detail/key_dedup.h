#pragma once
// Finding the first occurrence of every key of a request, without allocating per request: a
// linear-probing table of 4-byte slots, each holding a position in the request's keys (+1; 0 is
// empty) under a few bits of the key's hash as a tag, so that most foreign slots are skipped
// without reading their key. Small slots keep the table in L2 (1 MiB for 100k keys) where
// 16-byte (key, position, generation) slots spilled to L3 and were a third of the client's
// time; clearing it per request costs a memset of that size. A client keeps a few in a pool.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "core/prefetch.h"
#include "ps/sharding.h"

namespace fleet::ps::detail {

// Not thread-safe: one request at a time.
class KeyDedup {
 public:
  // Prepares for the request `keys` (which must outlive its use), forgetting the previous one.
  void Reset(absl::Span<const int64_t> keys);
  // The position of the first occurrence of keys[position] in the request; records `position`
  // (and returns it) when the key is new. Positions must be visited in increasing order.
  uint32_t FirstOccurrence(uint32_t position);
  // A hint to call some positions ahead of FirstOccurrence(position), so that the misses of the
  // table overlap.
  void Prefetch(uint32_t position) const { PrefetchForWrite(&slots_[SlotOf(keys_[position])]); }

 private:
  size_t SlotOf(int64_t key) const { return Mix64(static_cast<uint64_t>(key)) & mask_; }
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
