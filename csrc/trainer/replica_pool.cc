#include "trainer/replica_pool.h"

#include <chrono>

#include "core/errors.h"

namespace fleet::trainer {
namespace {

// How long a wait polls before it sleeps (see the header).
constexpr std::chrono::microseconds kPollBeforeSleep{50};

// Polls `done` for up to kPollBeforeSleep; returns whether it became true.
template <typename Done>
bool PollFor(Done done) {
  const auto until = std::chrono::steady_clock::now() + kPollBeforeSleep;
  do {
    for (int i = 0; i < 64; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (done()) return true;
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

}  // namespace

ReplicaPool::ReplicaPool(int replicas) : replicas_(replicas) {
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
  PollFor([&] { return pending_.load(std::memory_order_acquire) == 0; });
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
    PollFor(ready);
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
