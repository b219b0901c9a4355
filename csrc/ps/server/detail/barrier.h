#pragma once
// Named barriers among workers, served by one server. A generation counter per name lets the
// same name be reused round after round.
//
// A worker's failure (reported by the worker, or its presence call dropped: see ps.proto's
// BarrierRequest) fails every barrier from then on, waiters included, with ABORTED naming it:
// the other workers stop within a round trip instead of waiting for the timeout. A wait longer
// than kProgressEvery is reported through `log` every kProgressEvery, naming the missing workers.
//
// A job that takes restarted workers (`worker_restarts`, the job's
// a_sync_configs["worker_restarts"]) is waited for instead: a worker whose presence call dropped
// is away, not failed. Its arrivals in rounds not yet ended are withdrawn, the barriers wait for
// it within their timeout (which names it as away), and it is back once a presence call of its
// opens again: a worker restarted with the same id (by a cluster manager) rejoins the job. Its
// first barrier, init_worker's, which the others passed long ago, lets it through at once. A
// reported failure (the worker's script raised) still fails the job.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ps/server/detail/step_output.h"

namespace fleet::ps::detail {

class BarrierSet {
 public:
  using Log = std::function<void(const std::string&)>;
  static constexpr absl::Duration kProgressEvery = absl::Seconds(30);

  // `log` receives the progress lines of long waits, and with `worker_restarts` a line when a
  // worker goes away and when it is back (none when empty).
  explicit BarrierSet(Log log = nullptr, bool worker_restarts = false)
      : log_(std::move(log)), worker_restarts_(worker_restarts) {}

  // Blocks until `num_workers` callers have arrived at `name` (all of them must pass the same
  // num_workers) and returns OK; DeadlineExceeded naming the barrier and the count that arrived
  // when `timeout` passes first (the caller's arrival is withdrawn); Unavailable after Close().
  // InvalidArgument, without counting the arrival, for a worker id outside [0, num_workers) or
  // one that already waits in this round of the barrier.
  absl::Status Arrive(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                      absl::Duration timeout);

  // Runs when the last worker of a round arrives, before anyone is released, with the number of
  // arrivals that said `done` and the non-empty outputs of the round's arrivals (each counted
  // arrival's, the last one's included, in worker id order); its status becomes every arrival's
  // result.
  using RoundAction =
      std::function<absl::Status(uint32_t done_workers, absl::Span<const StepOutput> outputs)>;
  // Arrive, for sync training's step barrier: `action` runs once per round (under the barrier's
  // lock, so rounds of every name wait for it); `done_workers` receives the round's count of
  // `done` arrivals. `output` goes to the action of the round this arrival is counted in, and
  // to no other: an arrival that leaves its round (timeout, withdrawal, failure, close) takes
  // it back before it returns.
  absl::Status ArriveAndRun(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                            absl::Duration timeout, bool done, const RoundAction& action,
                            uint32_t* done_workers, StepOutput output = {});
  // Wakes every waiter with Unavailable and refuses later arrivals. Thread-safe.
  void Close();
  // Blocks up to `timeout` for Close(); true once closed.
  bool WaitForClose(absl::Duration timeout);

  // Worker `worker_id` failed (`why`): every barrier, waiting or later, fails with ABORTED
  // naming it. The first failure is kept. Thread-safe.
  void Fail(uint32_t worker_id, const std::string& why);
  // The worker ends normally: a later Dropped(worker_id) is no failure.
  void Leave(uint32_t worker_id);
  // A presence call of the worker opened (from `peer`): with worker_restarts, a worker that was
  // away is back.
  void Attended(uint32_t worker_id, const std::string& peer);
  // The worker's presence call ended without a goodbye: Fail, unless it left or the set is
  // closed (the server stopping ends every presence call); with worker_restarts the worker is
  // away instead, unless another presence call of its is open (it restarted already).
  void Dropped(uint32_t worker_id, const std::string& peer);

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
    std::vector<bool> waiting;        // by worker id, in this generation
    std::vector<bool> said_done;      // by worker id: its waiting arrival said `done`
    std::vector<StepOutput> outputs;  // by worker id: its waiting arrival's output
  };
  // With worker_restarts: the worker's arrivals in rounds not yet ended are taken back (their
  // waiters see `away_epoch_` change and return without counting again).
  void WithdrawLocked(uint32_t worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "; worker(s) 1, 3 away (...)" for a timeout message, or "".
  std::string AwayNote() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The missing workers of `round`, the first few by id ("1, 3 and 5 more").
  static std::string Missing(const Round& round, uint32_t num_workers);

  Log log_;
  const bool worker_restarts_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  absl::flat_hash_map<std::string, Round> rounds_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // OK until a worker failed
  absl::flat_hash_set<uint32_t> left_ ABSL_GUARDED_BY(mu_);
  // worker_restarts: open presence calls by worker; away workers and why; how often each
  // worker went away (a waiter that saw it change was withdrawn).
  absl::flat_hash_map<uint32_t, int> present_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, std::string> away_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, uint64_t> away_epoch_ ABSL_GUARDED_BY(mu_);
  // Away workers whose next incarnation has not arrived at a barrier yet.
  absl::flat_hash_set<uint32_t> returning_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::ps::detail
