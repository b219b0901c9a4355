#pragma once
// Prefetch of sparse rows for a trainer thread's next batch (async mode): when a dataset pass
// announces the next batch (StepHook::OnBatchAhead), its ids are copied; the pull of a table's
// rows for it starts when the thread has queued its current gradient of that table (Release,
// from push_sparse), and the batch's pull_sparse ops take the rows that arrived meanwhile
// instead of waiting for a round trip. So the pull of step t + 1 overlaps the end of step t's
// backward, its dense send and the wait for the dense refresh at the step boundary.
//
// The prefetcher learns which variables hold a table's ids from the pull_sparse op itself (its
// first run), and gathers the keys the same way the op does (the Ids tensors joined in order);
// a pull whose keys differ from every prefetched set (another program, is_test clones) is not
// served and pulls as usual.
//
// Why wait for the push: a pull started at the announcement (the start of step t) reads rows
// before step t's gradients reach them, one step more of staleness for the frequent ids that
// are in every batch. Started after the push, the pull races the push as a pull at the step
// does. Measured on CTR-DNN (200k rows, 2 workers, 1 server, one trainer thread each; mean test
// AUC and samples/s): pulls started at the announcement 0.7669 at 34.5k (6 runs), after the
// push 0.7674 at 34.6k (12 runs), no prefetch 0.7678 at 32.7k (11 runs); one process 0.7720.
// The strategy's a_sync_configs["prefetch_sparse"] = False turns the prefetch off.
//
// Threads: Announce and Take of one trainer thread run on that thread; SetInputs may come from
// any. A pending prefetch is waited for before its buffer is dropped (the RPC writes into it).

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/scope.h"
#include "ps/client/client.h"

namespace fleet::distributed::detail {

class SparsePrefetcher {
 public:
  explicit SparsePrefetcher(ps::PsClient* client) : client_(client) {}
  ~SparsePrefetcher();

  // Before a pass: one queue per trainer thread (dropping what is left from the last pass).
  void StartPass(int num_threads);
  // After a pass: drops (waiting for) what was prefetched and not used.
  void EndPass() { pending_.clear(); }
  bool WantsInputs(uint32_t table_id) const;
  void SetInputs(uint32_t table_id, std::vector<std::string> ids);
  // Copies the keys of every known table for the batch whose inputs `scope` holds; their pulls
  // start at Release (or at Take). Skips a table whose id variables are not all int64 tensors.
  void Announce(int thread, const Scope& scope);
  // Starts the pull of `table_id`'s announced rows: `thread` has queued its gradient of the
  // table for the current batch.
  void Release(int thread, uint32_t table_id);
  // Serves a pull from a prefetch of the same keys, if one was started: waits for it and copies
  // its rows to `out`, true. False when nothing matches. Throws the pull's error, naming the
  // table (`table_name`, the parameter).
  bool Take(int thread, uint32_t table_id, absl::Span<const int64_t> keys, absl::Span<float> out,
            const std::string& table_name);
  // Prefetches served and missed since construction (tests, benchmarks).
  int64_t served() const;
  int64_t missed() const;

 private:
  struct Pending {
    uint32_t table_id = 0;
    std::vector<int64_t> keys;
    std::vector<float> rows;
    std::unique_ptr<ps::Future> future;  // null until the pull starts
    ~Pending();
  };
  struct Inputs {
    std::vector<std::string> ids;  // the pull_sparse op's Ids variables, in order
    size_t dim = 0;
  };
  std::vector<std::pair<uint32_t, Inputs>> AllInputs() const;
  void StartPull(Pending& pending);

  ps::PsClient* client_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, Inputs> inputs_ ABSL_GUARDED_BY(mu_);
  // Per trainer thread, oldest first; only that thread touches its queue during a pass.
  std::vector<std::deque<std::unique_ptr<Pending>>> pending_;
  int64_t served_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t missed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fleet::distributed::detail
