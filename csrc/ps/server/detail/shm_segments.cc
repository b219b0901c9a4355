#include "ps/server/detail/shm_segments.h"

#include "absl/strings/str_cat.h"

namespace fleet::ps::detail {

absl::StatusOr<uint64_t> ShmSegments::Attach(const proto::AttachSegmentRequest& request) {
  auto segment =
      ShmSegment::Attach(static_cast<int64_t>(request.pid()), static_cast<int64_t>(request.fd()),
                         request.token(), request.size());
  if (!segment.ok()) return segment.status();
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  segments_[id] = std::shared_ptr<const ShmSegment>(std::move(*segment));
  return id;
}

absl::Status ShmSegments::Detach(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (segments_.erase(id) == 0) {
    return absl::NotFoundError(absl::StrCat("no shared-memory segment ", id, " to detach"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ShmSegment>> ShmSegments::Get(uint64_t id,
                                                                   const char* what) const {
  absl::MutexLock lock(&mu_);
  auto it = segments_.find(id);
  if (it == segments_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shared-memory segment ", id,
                     " is not attached to this server (detached, or attached to an earlier "
                     "start of it)"));
  }
  return it->second;
}

}  // namespace fleet::ps::detail
