#pragma once
// ReplicaPool: N replicas of one data-parallel step run as N threads of this process. Run(fn)
// is a fork-join: replica 0 runs on the calling thread, replicas 1..N-1 on threads the pool
// keeps for its lifetime, and Run returns when all N calls have returned, so consecutive Runs
// are separated by a barrier. The first exception any replica threw is rethrown by Run (after
// every replica has finished). Run is not reentrant and must be called from one thread at a time.
//
// Waits poll briefly before they sleep (spin_wait.h): a worker between two Runs, and Run for the
// workers to finish. A data-parallel step is a few fork-joins a few microseconds apart, and a
// wake-up from sleep on an idle core costs tens of microseconds, paid by the step's critical
// path; on a loaded machine the poll soon gives way to sleeping. `spin` bounds each poll (0:
// sleep at once).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace fleet::trainer {

class ReplicaPool {
 public:
  explicit ReplicaPool(int replicas,
                       std::chrono::microseconds spin = std::chrono::microseconds{50});
  ~ReplicaPool();  // joins the threads
  ReplicaPool(const ReplicaPool&) = delete;
  ReplicaPool& operator=(const ReplicaPool&) = delete;

  int size() const { return replicas_; }
  // Calls fn(r) for every replica r in parallel and waits for all of them.
  void Run(const std::function<void(int replica)>& fn);
  // Waits whose poll gave up since the pool was made (the waiter then blocked on the condition,
  // asleep unless its partner came meanwhile), each a hand-off that likely cost a wake-up: of
  // the workers waiting for a Run, and of Run waiting for the workers to finish.
  int64_t polls_given_up_for_work() const {
    return polls_given_up_for_work_.load(std::memory_order_relaxed);
  }
  int64_t polls_given_up_for_workers() const {
    return polls_given_up_for_workers_.load(std::memory_order_relaxed);
  }

 private:
  void WorkerLoop(int replica);
  void Record(std::exception_ptr error);

  const int replicas_;
  const std::chrono::microseconds spin_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  const std::function<void(int)>* work_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Written under mu_ (so that sleepers on a condition of them wake), read lock-free by polls.
  std::atomic<uint64_t> generation_{0};  // bumped by every Run
  std::atomic<int> pending_{0};          // worker threads still inside this Run
  std::atomic<bool> closing_{false};
  std::atomic<int64_t> polls_given_up_for_work_{0};
  std::atomic<int64_t> polls_given_up_for_workers_{0};
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::trainer
