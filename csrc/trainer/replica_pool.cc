#include "trainer/replica_pool.h"

#include "core/errors.h"
#include "trainer/spin_wait.h"

namespace fleet::trainer {

ReplicaPool::ReplicaPool(int replicas, std::chrono::microseconds spin)
    : replicas_(replicas), spin_(spin) {
  FLEET_ENFORCE(replicas > 0, InvalidArgument, "data parallelism needs at least one replica, got ",
                replicas);
  for (int r = 1; r < replicas; ++r) threads_.emplace_back([this, r] { WorkerLoop(r); });
}

ReplicaPool::~ReplicaPool() {
  {
    absl::MutexLock lock(&mu_);
    closing_.store(true);
  }
  for (auto& t : threads_) t.join();
}

void ReplicaPool::Record(std::exception_ptr error) {
  absl::MutexLock lock(&mu_);
  if (!error_) error_ = error;
}

void ReplicaPool::Run(const std::function<void(int)>& fn) {
  {
    absl::MutexLock lock(&mu_);
    work_ = &fn;
    pending_ = replicas_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  try {
    fn(0);
  } catch (...) {
    Record(std::current_exception());
  }
  std::exception_ptr error;
  if (!SpinWait([&] { return pending_.load(std::memory_order_acquire) == 0; }, spin_)) {
    polls_given_up_for_workers_.fetch_add(1, std::memory_order_relaxed);
  }
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::atomic<int>* pending) { return pending->load() == 0; }, &pending_));
    work_ = nullptr;
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

void ReplicaPool::WorkerLoop(int replica) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* work = nullptr;
    auto ready = [&] { return closing_.load() || generation_.load() != seen; };
    if (!SpinWait(ready, spin_)) polls_given_up_for_work_.fetch_add(1, std::memory_order_relaxed);
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (closing_.load()) return;
      seen = generation_;
      work = work_;
    }
    try {
      (*work)(replica);
    } catch (...) {
      Record(std::current_exception());
    }
    absl::MutexLock lock(&mu_);
    --pending_;
  }
}

}  // namespace fleet::trainer
