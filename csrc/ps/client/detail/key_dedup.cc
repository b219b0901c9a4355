#include "ps/client/detail/key_dedup.h"

#include <cstring>

namespace fleet::ps::detail {

void KeyDedup::Reset(absl::Span<const int64_t> keys) {
  keys_ = keys;
  size_t capacity = 16;
  while (capacity < 2 * keys.size()) capacity *= 2;  // load at most 1/2: short probe sequences
  mask_ = capacity - 1;
  // A table of the size the last request had keeps its memory: only the memset is paid.
  slots_.resize(capacity);
  std::memset(slots_.data(), 0, capacity * sizeof(uint32_t));
  // Positions + 1 take bit_width(n) bits; the rest is tag (none from 2^31 keys on).
  const int position_bits = keys.empty() ? 0 : 64 - __builtin_clzll(keys.size());
  tag_mask_ = position_bits >= 32 ? 0 : ~((uint32_t{1} << position_bits) - 1);
}

std::unique_ptr<KeyDedup> KeyDedupPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<KeyDedup> dedup = std::move(idle_.back());
      idle_.pop_back();
      return dedup;
    }
  }
  return std::make_unique<KeyDedup>();
}

void KeyDedupPool::Release(std::unique_ptr<KeyDedup> dedup) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(dedup));
}

}  // namespace fleet::ps::detail
