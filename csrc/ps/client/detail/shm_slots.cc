#include "ps/client/detail/shm_slots.h"

namespace fleet::ps::detail {

std::shared_ptr<ShmSlots::Lease> ShmSlots::Acquire(const std::shared_ptr<ShmSlots>& slots) {
  absl::MutexLock lock(&slots->mu_);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    if ((slots->taken_ & (1u << slot)) == 0) {
      slots->taken_ |= 1u << slot;
      return std::make_shared<Lease>(slots, slot);
    }
  }
  return nullptr;
}

void ShmSlots::Give(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  taken_ &= ~(1u << slot);
}

ShmSlots::Lease::~Lease() {
  if (released_) owner_->Give(slot_);
}

}  // namespace fleet::ps::detail
