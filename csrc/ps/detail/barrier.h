#pragma once
// Named barriers among workers, served by one server. A generation counter per name lets the
// same name be reused round after round.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fleet::ps::detail {

class BarrierSet {
 public:
  // Blocks until `num_workers` callers have arrived at `name` (all of them must pass the same
  // num_workers) and returns OK; DeadlineExceeded naming the barrier and the count that arrived
  // when `timeout` passes first (the caller's arrival is withdrawn); Unavailable after Close().
  // InvalidArgument, without counting the arrival, for a worker id outside [0, num_workers) or
  // one that already waits in this round of the barrier.
  absl::Status Arrive(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                      absl::Duration timeout);
  // Wakes every waiter with Unavailable and refuses later arrivals. Thread-safe.
  void Close();

 private:
  struct Round {
    uint32_t expected = 0;
    uint32_t arrived = 0;
    uint64_t generation = 0;
    std::vector<bool> waiting;  // by worker id, in this generation
  };
  absl::Mutex mu_;
  absl::CondVar cv_;
  absl::flat_hash_map<std::string, Round> rounds_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fleet::ps::detail
