#pragma once
// Finding the first occurrence of every key of a request, without allocating per request: a
// linear-probing table whose slots carry the generation (request) that wrote them, so starting a
// new request is O(1) instead of clearing the table. A client keeps a few in a pool.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ps/sharding.h"

namespace fleet::ps::detail {

// Not thread-safe: one request at a time.
class KeyDedup {
 public:
  // Prepares for a request of up to `n` keys, forgetting the previous one.
  void Reset(size_t n);
  // The caller position of the first occurrence of `key` in this request; records `position`
  // (and returns it) when the key is new.
  uint32_t FirstOccurrence(int64_t key, uint32_t position);
  // A hint to call some keys ahead of FirstOccurrence(key), so that the misses of the table
  // (megabytes for 100k keys) overlap.
  void Prefetch(int64_t key) const {
    __builtin_prefetch(&slots_[Mix64(static_cast<uint64_t>(key)) & mask_], 1);
  }

 private:
  struct Slot {
    int64_t key;
    uint32_t position;
    uint32_t generation;  // the request that wrote the slot; older ones read as empty
  };
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  uint32_t generation_ = 0;
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
