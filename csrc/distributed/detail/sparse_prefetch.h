#pragma once
// Prefetch of sparse rows for a trainer thread's next batch (async mode): when a dataset pass
// announces the next batch (StepHook::OnBatchAhead), its ids are copied; the pull of a table's
// rows for it starts when the thread has queued its current gradient of that table (Release,
// from push_sparse), and the batch's pull_sparse ops take the rows that arrived meanwhile
// instead of waiting for a round trip. So the pull of step t + 1 overlaps the end of step t's
// backward, its dense send and the wait for the dense refresh at the step boundary.
//
// Which variables hold a table's ids comes from the PS pass's plan (SparseVar.ids, the
// pull_sparse op's Ids in order), given at init_worker, which refuses a plan whose names are not
// the program's (fleet/ps/runtime.py); the keys are gathered the way the op gathers them (the Ids
// tensors joined in order). A pull whose keys differ from every prefetched set (another program,
// is_test clones) is not served and pulls as usual.
//
// Why wait for the push: a pull started at the announcement (the start of step t) reads rows
// before step t's gradients reach them, one step more of staleness for the frequent ids that
// are in every batch. Started after the push, the pull races the push as a pull at the step
// does. Measured on CTR-DNN (200k rows, 2 workers, 1 server, one trainer thread each; mean test
// AUC and samples/s): pulls started at the announcement 0.7669 at 34.5k (6 runs), after the
// push 0.7674 at 34.6k (12 runs), no prefetch 0.7678 at 32.7k (11 runs); one process 0.7720.
// The strategy's a_sync_configs["prefetch_sparse"] = False turns the prefetch off.
//
// A step hook of its own, owned by the async communicator (AsyncCommunicator::hooks): a dataset
// pass gives every trainer thread a queue, each announced batch (OnBatchAhead) adds its keys to
// the thread's queue, the pass's end drops what is left. Executor.run steps announce nothing.
//
// Threads: OnBatchAhead, Release and Take of one trainer thread run on that thread; the tables
// are fixed at construction. A pending prefetch is waited for before its buffer is dropped (the
// RPC writes into it).

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/scope.h"
#include "distributed/communicator.h"
#include "framework/runtime.h"
#include "ps/client/client.h"

namespace fleet::distributed::detail {

// A table's keys for the batch whose inputs `scope` holds, gathered as the pull_sparse op gathers
// them: the Ids tensors named `ids`, joined in order, appended to `keys`. False (and `keys` left
// as it was) when one of them is missing or not an initialized int64 tensor (a pass of another
// program). Shared by the async prefetch and GEO's (geo_row_prefetch.h).
bool GatherBatchIds(const Scope& scope, const std::vector<std::string>& ids,
                    std::vector<int64_t>* keys);

class SparsePrefetcher : public framework::StepHook {
 public:
  // Prefetches the rows of every table of `tables` through `client`. InvalidArgument naming a
  // table without id variables (SparseVar.ids).
  SparsePrefetcher(std::shared_ptr<ps::PsClient> client, const std::vector<SparseVar>& tables);
  ~SparsePrefetcher() override;

  // A dataset pass: one queue per trainer thread (dropping what is left from the last pass).
  void OnPassBegin(const framework::PassInfo& pass) override;
  // Copies the keys of every table for the batch whose inputs `next.scope` holds; their pulls
  // start at Release (or at Take). Skips a table whose id variables are not all int64 tensors
  // there (a pass of another program).
  void OnBatchAhead(const framework::StepInfo& next) override;
  // After a dataset pass: drops (waiting for) what was prefetched and not used.
  void OnPassEnd() override;
  std::string Name() const override { return "async sparse prefetch"; }

  // Starts the pull of `table_id`'s announced rows: `thread` has queued its gradient of the
  // table for the current batch.
  void Release(int thread, uint32_t table_id);
  // Serves a pull from a prefetch of the same keys, if one was started: waits for it and copies
  // its rows to `out`, true. False when nothing matches. Throws the pull's error, naming the
  // table (`table_name`, the parameter).
  bool Take(int thread, uint32_t table_id, absl::Span<const int64_t> keys, absl::Span<float> out,
            const std::string& table_name);
  // As Take, but gives the prefetch's own buffer away (`floats` floats of rows) instead of
  // copying it: the pull_sparse op's outputs become views of it. Null when nothing matches.
  std::shared_ptr<Buffer> TakeRows(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                   size_t floats, const std::string& table_name);
  // Prefetches served and missed since construction (tests, benchmarks).
  int64_t served() const;
  int64_t missed() const;
  // Served prefetches whose rows had not all arrived when the step asked for them, so that the
  // trainer thread waited for the pull (a round trip that the step before did not hide).
  int64_t waited() const;

 private:
  struct Pending {
    uint32_t table_id = 0;
    std::vector<int64_t> keys;
    // Not zeroed (the pull writes every row); handed to the op by TakeRows.
    std::shared_ptr<Buffer> rows;
    absl::Span<float> row_span;          // rows' floats
    std::unique_ptr<ps::Future> future;  // null until the pull starts
    ~Pending();
  };
  struct Inputs {
    uint32_t table_id = 0;
    std::vector<std::string> ids;  // the pull_sparse op's Ids variables, in order
    size_t dim = 0;
  };
  static std::vector<Inputs> InputsOf(const std::vector<SparseVar>& tables);
  void StartPull(Pending& pending);
  // The prefetch of `keys` with `floats` floats of rows, its pull waited for (and started if
  // the step pushed nothing of the table), out of the thread's queue; null when none matches.
  // Throws the pull's error, naming the table.
  std::unique_ptr<Pending> Serve(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                 size_t floats, const std::string& table_name);

  std::shared_ptr<ps::PsClient> client_;  // the registered hook may outlive the communicator
  const std::vector<Inputs> inputs_;
  bool dataset_pass_ = false;  // set between passes only
  mutable absl::Mutex mu_;
  // Per trainer thread, oldest first; only that thread touches its queue during a pass.
  std::vector<std::deque<std::unique_ptr<Pending>>> pending_;
  int64_t served_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t missed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t waited_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fleet::distributed::detail
