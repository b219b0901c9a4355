#pragma once
// Named barriers among workers, served by one server. A generation counter per name lets the
// same name be reused round after round.

#include <cstdint>
#include <functional>
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

  // Runs when the last worker of a round arrives, before anyone is released, with the number of
  // arrivals that said `done`; its status becomes every arrival's result.
  using RoundAction = std::function<absl::Status(uint32_t done_workers)>;
  // Arrive, for sync training's step barrier: `action` runs once per round (under the barrier's
  // lock, so rounds of every name wait for it); `done_workers` receives the round's count of
  // `done` arrivals.
  absl::Status ArriveAndRun(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                            absl::Duration timeout, bool done, const RoundAction& action,
                            uint32_t* done_workers);
  // Wakes every waiter with Unavailable and refuses later arrivals. Thread-safe.
  void Close();

 private:
  struct Round {
    uint32_t expected = 0;
    uint32_t arrived = 0;
    uint32_t done = 0;
    uint64_t generation = 0;
    // The outcome of the round that ended last (read by its waiters after they wake: the next
    // round cannot end before they arrive again).
    absl::Status result;
    uint32_t result_done = 0;
    std::vector<bool> waiting;  // by worker id, in this generation
  };
  absl::Mutex mu_;
  absl::CondVar cv_;
  absl::flat_hash_map<std::string, Round> rounds_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fleet::ps::detail
