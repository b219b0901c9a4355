#include "ps/client/detail/key_dedup.h"

namespace fleet::ps::detail {

void KeyDedup::Reset(absl::Span<const int64_t> keys) {
  keys_ = keys;
  size_t capacity = 16;
  while (capacity < 2 * keys.size()) capacity *= 2;  // load at most 1/2: short probe sequences
  mask_ = capacity - 1;
  slots_.assign(capacity, 0);
  // Positions + 1 take bit_width(n) bits; the rest is tag (none from 2^31 keys on).
  const int position_bits = keys.empty() ? 0 : 64 - __builtin_clzll(keys.size());
  tag_mask_ = position_bits >= 32 ? 0 : ~((uint32_t{1} << position_bits) - 1);
}

uint32_t KeyDedup::FirstOccurrence(uint32_t position) {
  const int64_t key = keys_[position];
  const uint64_t hash = Mix64(static_cast<uint64_t>(key));
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
