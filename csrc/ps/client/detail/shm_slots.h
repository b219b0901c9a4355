#pragma once
// A worker's shared-memory segments with the parameter servers on its host, cut into slots for
// the dense calls in flight (ps/detail/shm_segment.h says why, the protocol and the lifetime).
//
// Each server's segment holds kSlots slots; a slot is one dense call's gradients followed by its
// values, each `half` bytes (the server's largest share of a dense table). A call takes a free
// slot for its whole life, so no two calls in flight share bytes; a call that finds none free
// (more than kSlots dense calls in flight to one server) goes on the wire. A slot whose call did
// not end with a reply (deadline, dropped connection) is never reused: the server may still be
// working on it. Thread-safe.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "ps/detail/shm_segment.h"

namespace fleet::ps::detail {

class ShmSlots {
 public:
  // A sync step holds one for its values while its pushes (a dense one, sparse ones per
  // max_keys_per_request piece) hold others; unused slots cost address space, not memory (a
  // memfd's pages exist once written).
  static constexpr uint32_t kSlots = 8;

  // One call's slot. Release() (after the call's reply was read) gives it back; destroyed
  // without Release, it stays out of use.
  class Lease {
   public:
    Lease(std::shared_ptr<ShmSlots> owner, uint32_t slot) : owner_(std::move(owner)), slot_(slot) {}
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

    uint64_t segment_id() const { return owner_->segment_id_; }
    uint64_t grads_offset() const { return slot_ * 2 * owner_->half_; }
    uint64_t values_offset() const { return grads_offset() + owner_->half_; }
    char* grads() const { return owner_->segment_->data() + grads_offset(); }
    const char* values() const { return owner_->segment_->data() + values_offset(); }
    void Release() { released_ = true; }

   private:
    std::shared_ptr<ShmSlots> owner_;
    uint32_t slot_;
    bool released_ = false;
  };

  // The slots of `segment`, attached to its server as `segment_id`, of `half` bytes per side.
  ShmSlots(std::unique_ptr<ShmSegment> segment, uint64_t segment_id, uint64_t half)
      : segment_(std::move(segment)), segment_id_(segment_id), half_(half) {}
  // The segment size for slots of `half` bytes per side.
  static uint64_t SegmentBytes(uint64_t half) { return kSlots * 2 * half; }

  // A free slot for a call of at most half() bytes each way, or nullptr when all are taken.
  static std::shared_ptr<Lease> Acquire(const std::shared_ptr<ShmSlots>& slots);

  uint64_t half() const { return half_; }
  uint64_t segment_id() const { return segment_id_; }
  const ShmSegment& segment() const { return *segment_; }

 private:
  void Give(uint32_t slot);

  std::unique_ptr<ShmSegment> segment_;
  uint64_t segment_id_;
  uint64_t half_;
  absl::Mutex mu_;
  uint32_t taken_ ABSL_GUARDED_BY(mu_) = 0;  // a bit per slot in use or lost
};

}  // namespace fleet::ps::detail
