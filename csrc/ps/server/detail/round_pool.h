#pragma once
// The threads that apply a sync round (GradAccumulator::ApplyAll). The round's update runs while
// every worker waits at the step barrier, so on a host with a core per worker all but one core
// would sit idle through it: splitting it into independent tasks (a sparse table's push, a dense
// table's blocks) spreads it over the idle cores and shortens the step's critical path.
//
// Deterministic by construction: each task index runs exactly once, on one thread, and tasks of
// one batch must touch disjoint data, so a round's result is the same bit for bit whatever the
// thread count and whichever thread takes which task.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace fleet::ps::detail {

class RoundPool {
 public:
  // Runs tasks on `threads` threads: the caller of ParallelFor and threads - 1 helpers (none for
  // 0 or 1). Helpers sleep on a condition variable between rounds and use no CPU then.
  explicit RoundPool(size_t threads);
  ~RoundPool();
  RoundPool(const RoundPool&) = delete;
  RoundPool& operator=(const RoundPool&) = delete;

  // The thread count for `configured` (ServerOptions.round_threads): itself when positive, else
  // the host's core count capped at kMaxAutoThreads (one helper per core a waiting worker leaves
  // idle; more would only queue behind the workers of a busier host).
  static size_t ThreadsFor(int configured);
  static constexpr size_t kMaxAutoThreads = 4;

  size_t threads() const { return helpers_.size() + 1; }

  // Calls task(i) for every i in [0, n), each exactly once, on the calling thread and the
  // helpers, and returns once every call has returned. A task that throws (std::bad_alloc from
  // a table, say) ends neither its thread nor the batch: every task still runs, and the first
  // exception is rethrown here at the end (the others are dropped). Thread-safe; a task may
  // itself call ParallelFor: a thread waiting for its batch's last tasks works on any other
  // posted batch meanwhile (so a nested batch gets every idle thread, the waiting caller's too).
  void ParallelFor(size_t n, const std::function<void(size_t)>& task);

 private:
  struct Batch {
    Batch(size_t n, const std::function<void(size_t)>* task) : n(n), task(task) {}
    const size_t n;
    const std::function<void(size_t)>* task;
    std::atomic<size_t> next{0};  // the next index to hand out
    size_t finished = 0;          // tasks that returned; guarded by mu_
    size_t users = 0;             // other threads working through it; guarded by mu_
    std::mutex error_mu;
    std::exception_ptr error;  // the first task's exception, if any
  };
  // Runs the batch's indices until none is left to hand out; returns how many it ran.
  static size_t Drain(Batch& batch);
  // A posted batch with indices left to hand out, or null.
  Batch* Pending() const;
  // Works through `batch` (taken from Pending() under `lock`, which it drops meanwhile).
  void Help(Batch* batch, std::unique_lock<std::mutex>& lock);
  void HelperLoop();

  std::mutex mu_;
  // Any change: a batch posted, a batch's tasks all finished, the pool stopping.
  std::condition_variable changed_;
  std::list<Batch*> batches_;  // posted batches that may still have indices to hand out
  bool stopping_ = false;
  std::vector<std::thread> helpers_;
};

}  // namespace fleet::ps::detail
