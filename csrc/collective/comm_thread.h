#pragma once
// CommThread: one background thread that runs a group's collectives in the order they were
// submitted, so that a rank's program can go on computing (backward) while its gradient buckets
// are reduced, and so that every collective of the group, synchronous or not, reaches the
// backend in program order (the backend contract requires the same order on every rank; letting
// two threads race for the backend's mutex would break it).
//
// Submit() never blocks; the returned Work is finished by Work::Wait(timeout), which rethrows the
// task's error (fleet::Timeout, fleet::Unavailable, ...) on the waiting thread. After a task
// failed, the group is broken (backend.h): every later task fails at once with the first error,
// without touching the backend.
//
// Thread safety: Submit and Wait may be called from any thread. Destruction waits for the task
// running now (each is bounded by its own collective timeout), fails the queued ones and joins.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "collective/store.h"

namespace fleet::collective {

class Work {
 public:
  // Blocks until the task ran; rethrows its error. Timeout naming `what` after `timeout` (the
  // task itself keeps running: it is bounded by its own collective timeout).
  void Wait(Duration timeout, const std::string& what);
  bool Done();
  // Seconds the task ran on the communication thread (0 before it finished).
  double run_seconds();

 private:
  friend class CommThread;
  void Finish(std::exception_ptr error, double seconds);

  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  double seconds_ = 0;
};

class CommThread {
 public:
  // `name` appears in the thread's error messages ("group 'collective'").
  explicit CommThread(std::string name);
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `task` behind the tasks submitted before it. The task must not throw anything but
  // fleet errors (others are wrapped as Internal).
  std::shared_ptr<Work> Submit(std::function<void()> task);

  // Runs `task` on the calling thread and returns true when no task is queued or running (then
  // it is the only collective in flight, and program order holds); returns false, running
  // nothing, otherwise. The task's error is rethrown here and breaks the thread like a queued
  // task's; on a broken thread the first error is rethrown without running `task`.
  // Why: a synchronous collective (c_allreduce_sum, broadcast) waits for its result anyway, and
  // handing it to this thread costs two wake-ups that a loaded machine can make slow.
  bool RunIfIdle(const std::function<void()>& task);

 private:
  void Loop();
  // Runs `task`, returning its error (non-fleet exceptions wrapped as Internal).
  std::exception_ptr RunTask(const std::function<void()>& task);

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<Work>>> queue_;
  bool stop_ = false;
  bool busy_ = false;          // a task runs, here or on a caller's thread
  std::exception_ptr broken_;  // the first task error: later tasks fail with it
  std::thread thread_;
};

}  // namespace fleet::collective
