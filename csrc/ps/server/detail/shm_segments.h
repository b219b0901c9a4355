#pragma once
// The shared-memory segments that workers on this server's host attached (AttachSegment,
// ps/detail/shm_segment.h), by the id the server gave each. Thread-safe.

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "fleet/ps/ps.pb.h"
#include "ps/detail/shm_segment.h"

namespace fleet::ps::detail {

class ShmSegments {
 public:
  // Maps the segment `request` describes and returns its id (never 0); the errors of
  // ShmSegment::Attach.
  absl::StatusOr<uint64_t> Attach(const proto::AttachSegmentRequest& request);
  // Drops segment `id`; a call still using it keeps it mapped until that call ends. NotFound for
  // an id that is not attached.
  absl::Status Detach(uint64_t id);
  // Segment `id`, held for the duration of a call; InvalidArgument naming `what` and the id when
  // no such segment is attached (never attached, detached, or attached to an earlier start of
  // this server).
  absl::StatusOr<std::shared_ptr<const ShmSegment>> Get(uint64_t id, const char* what) const;

 private:
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const ShmSegment>> segments_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::ps::detail
