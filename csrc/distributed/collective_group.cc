#include "distributed/collective_group.h"

#include <thread>

#include "absl/strings/str_join.h"
#include "collective/liveness.h"
#include "core/errors.h"

namespace fleet::distributed {

using Clock = std::chrono::steady_clock;

CollectiveGroup::CollectiveGroup(std::shared_ptr<collective::CollectiveBackend> backend,
                                 CollectiveGroupOptions options)
    : backend_(std::move(backend)), options_(std::move(options)) {
  FLEET_ENFORCE(backend_ != nullptr, InvalidArgument, "CollectiveGroup needs a backend");
  FLEET_ENFORCE(options_.timeout.count() > 0, InvalidArgument,
                "collective timeout must be positive");
  comm_ = std::make_unique<collective::CommThread>(absl::StrCat("group '", name(), "'"));
}

CollectiveGroup::~CollectiveGroup() = default;

void CollectiveGroup::RethrowNamingDeadRanks(const std::string& what) {
  std::string dead;
  if (!options_.rank_endpoints.empty()) {
    // A dying process closes its sockets one by one: the peers may learn of it from a Gloo
    // connection before its listener is gone, so look again for a little while.
    std::vector<int> gone;
    const auto deadline = Clock::now() + 4 * options_.probe_timeout;
    while (true) {
      gone = collective::UnreachableRanks(options_.rank_endpoints, rank(), options_.probe_timeout);
      if (!gone.empty() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!gone.empty()) {
      std::vector<std::string> named;
      for (int r : gone) named.push_back(absl::StrCat(r, " (", options_.rank_endpoints[r], ")"));
      dead = absl::StrCat("; rank(s) ", absl::StrJoin(named, ", "), " of ", size(),
                          " are gone (their process exited or was killed)");
    } else {
      dead = absl::StrCat("; every other rank of ", size(), " still runs (one may be stuck)");
    }
  }
  const std::string prefix = absl::StrCat(what, " on rank ", rank(), " of group '", name(), "': ");
  try {
    throw;
  } catch (const Timeout& e) {
    throw Timeout(absl::StrCat(prefix, e.what(), dead));
  } catch (const Unavailable& e) {
    throw Unavailable(absl::StrCat(prefix, e.what(), dead));
  }
}

void CollectiveGroup::Wait(collective::Work* work, const std::string& what) {
  try {
    // The task bounds itself by options_.timeout; the margin lets its own error surface first.
    work->Wait(options_.timeout + std::chrono::seconds(5), what);
  } catch (const Timeout&) {
    RethrowNamingDeadRanks(what);
  } catch (const Unavailable&) {
    RethrowNamingDeadRanks(what);
  }
}

void CollectiveGroup::Run(const std::string& what,
                          std::function<void(collective::CollectiveBackend&)> fn) {
  auto backend = backend_;
  std::function<void()> task = [backend, fn = std::move(fn)] { fn(*backend); };
  try {
    if (comm_->RunIfIdle(task)) return;  // nothing in flight: no hand-over to the thread
  } catch (const Timeout&) {
    RethrowNamingDeadRanks(what);
  } catch (const Unavailable&) {
    RethrowNamingDeadRanks(what);
  }
  auto work = comm_->Submit(std::move(task));
  Wait(work.get(), what);
}

void CollectiveGroup::StartAllReduce(const void* key, void* data, size_t count, DType dtype,
                                     const std::string& what) {
  auto backend = backend_;
  collective::AllReduceOptions options{collective::ReduceOp::kSum, options_.timeout};
  auto work = comm_->Submit([backend, data, count, dtype, options] {
    backend->AllReduce(data, data, count, dtype, options);
  });
  std::lock_guard<std::mutex> lock(mu_);
  pending_[key] = Pending{std::move(work), count * SizeOf(dtype)};
}

void CollectiveGroup::Drain(const void* key, const std::string& what) {
  std::shared_ptr<collective::Work> previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(key);
    if (it == pending_.end()) return;
    previous = it->second.work;
    pending_.erase(it);
  }
  try {
    previous->Wait(options_.timeout + std::chrono::seconds(5), what);
  } catch (const Error&) {  // reported by the step that started it
  }
}

void CollectiveGroup::WaitAllReduce(const void* key, const std::string& what) {
  Pending pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(key);
    FLEET_ENFORCE(it != pending_.end(), InvalidArgument, what,
                  ": no all-reduce was started for this bucket (its c_allreduce_start op must "
                  "run before, in the same scope)");
    pending = std::move(it->second);
    pending_.erase(it);
  }
  const auto start = Clock::now();
  Wait(pending.work.get(), what);
  const std::chrono::duration<double> blocked = Clock::now() - start;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.buckets += 1;
  stats_.bytes += static_cast<int64_t>(pending.bytes);
  stats_.comm_seconds += pending.work->run_seconds();
  stats_.exposed_seconds += blocked.count();
}

OverlapStats CollectiveGroup::overlap_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CollectiveGroup::ResetOverlapStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = OverlapStats{};
}

void OneThreadPerRankHook::OnPassBegin(const framework::PassInfo& pass) {
  const int num_threads = pass.num_threads;
  FLEET_ENFORCE(num_threads == 1, InvalidArgument,
                "collective training runs one trainer thread "
                "per process, got thread=",
                num_threads,
                ": the threads' allreduces would reach "
                "the group in a different order on each rank. Use thread=1 and more processes "
                "(fleetrun --nproc_per_node) to use more cores.");
}

}  // namespace fleet::distributed
