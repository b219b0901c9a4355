#include "ps/detail/key_dedup.h"

namespace fleet::ps::detail {

void KeyDedup::Reset(size_t n) {
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;  // load at most 1/2: short probe sequences
  mask_ = capacity - 1;
  if (slots_.size() < capacity) {
    slots_.assign(capacity, Slot{0, 0, 0});
    generation_ = 0;
  }
  if (++generation_ == 0) {  // wrapped: every slot must read as empty again
    slots_.assign(slots_.size(), Slot{0, 0, 0});
    generation_ = 1;
  }
}

uint32_t KeyDedup::FirstOccurrence(int64_t key, uint32_t position) {
  for (uint64_t i = Mix64(static_cast<uint64_t>(key)) & mask_;; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.generation != generation_) {
      slot = Slot{key, position, generation_};
      return position;
    }
    if (slot.key == key) return slot.position;
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
