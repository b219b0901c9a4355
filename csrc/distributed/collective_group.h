#pragma once
// CollectiveGroup: the process's collective group as the collective ops see it (a resource of
// framework::RuntimeResources, set by the `fleet` facade's collective runtime). It wraps a
// CollectiveBackend (Gloo on CPU) with the group's communication thread, so that:
// - every collective of the group, synchronous op or bucket started during backward, reaches the
//   backend in program order (the same order on every rank, as backend.h requires);
// - a fused gradient bucket is reduced on that thread while backward goes on, and the op that
//   needs it waits only for its own bucket (StartAllReduce / WaitAllReduce);
// - a failure names the ranks that died (LivenessListener probes), not just a socket address.
//
// Collective order under trainer threads: a collective program runs on ONE trainer thread per
// process. N Hogwild threads would each issue their allreduces in an order that differs between
// ranks (and a different number of them), which no backend can match up; summing the threads'
// gradients locally first would add a barrier of the threads per step and change Hogwild into
// synchronous SGD anyway. Data parallelism across cores is had with more ranks instead
// (fleetrun --nproc_per_node). OneThreadPerRankHook enforces this at the start of a pass.
//
// Thread safety: all methods may be called from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "collective/backend.h"
#include "collective/comm_thread.h"
#include "framework/runtime.h"

namespace fleet::distributed {

struct CollectiveGroupOptions {
  // Bounds each collective (and the wait for it).
  collective::Duration timeout = collective::kDefaultCollectiveTimeout;
  // "host:port" of every rank's LivenessListener, indexed by rank; empty: failures name no rank.
  std::vector<std::string> rank_endpoints;
  collective::Duration probe_timeout = std::chrono::milliseconds(500);
};

// Times of the bucketed (asynchronous) all-reduces since the last reset, for the overlap figure:
// hidden = comm - exposed is the part that ran while backward computed.
struct OverlapStats {
  int64_t buckets = 0;
  int64_t bytes = 0;
  double comm_seconds = 0;     // time the all-reduces ran on the communication thread
  double exposed_seconds = 0;  // time the waiting ops were blocked on them
};

class CollectiveGroup {
 public:
  static constexpr char kResourceName[] = "collective group";

  CollectiveGroup(std::shared_ptr<collective::CollectiveBackend> backend,
                  CollectiveGroupOptions options);
  ~CollectiveGroup();

  int rank() const { return backend_->rank(); }
  int size() const { return backend_->size(); }
  const std::string& name() const { return backend_->name(); }
  collective::Duration timeout() const { return options_.timeout; }

  // Runs `fn` after everything submitted before and waits for it: on this thread when nothing
  // is in flight, else on the communication thread. `what` names the call in errors
  // ("c_allreduce_sum of fc_0.w_0@GRAD").
  void Run(const std::string& what, std::function<void(collective::CollectiveBackend&)> fn);

  // Starts an in-place sum all-reduce of `count` elements at `data`, registered under `key` (the
  // bucket's variable). `data` must stay untouched until WaitAllReduce(key) returns; call
  // Drain(key) before refilling it.
  void StartAllReduce(const void* key, void* data, size_t count, DType dtype,
                      const std::string& what);
  // Waits for (and forgets) an all-reduce still in flight under `key`, if any; errors of that
  // earlier call are dropped (the step that started it has failed already).
  void Drain(const void* key, const std::string& what);
  // Waits for the all-reduce started under `key`; InvalidArgument when none was started.
  void WaitAllReduce(const void* key, const std::string& what);

  OverlapStats overlap_stats() const;
  void ResetOverlapStats();

 private:
  struct Pending {
    std::shared_ptr<collective::Work> work;
    size_t bytes = 0;
  };
  void Wait(collective::Work* work, const std::string& what);
  // Rethrows the active error with the dead ranks named.
  [[noreturn]] void RethrowNamingDeadRanks(const std::string& what);

  std::shared_ptr<collective::CollectiveBackend> backend_;
  CollectiveGroupOptions options_;
  mutable std::mutex mu_;
  absl::flat_hash_map<const void*, Pending> pending_;
  OverlapStats stats_;
  // Declared last: destroyed (joined) first, while the backend is still alive.
  std::unique_ptr<collective::CommThread> comm_;
};

// Fails a pass of more than one trainer thread on an executor that has a collective group (see
// the header comment for why).
class OneThreadPerRankHook : public framework::StepHook {
 public:
  void OnPassBegin(const framework::PassInfo& pass) override;
  std::string Name() const override { return "collective one-thread-per-rank check"; }
};

}  // namespace fleet::distributed
