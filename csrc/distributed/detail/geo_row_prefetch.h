#pragma once
// GEO's prefetch of the rows a trainer thread's next batch lacks (geo_communicator.h). A GEO
// worker pulls a row from the servers only the first time one of its batches holds the id; until
// now that pull waited at the step, every step (13,312 keys at a CTR-DNN worker's first step,
// ~150-300 a step late in a pass). On a machine whose cores the job fills, a trainer that waits
// for a round trip leaves its core idle, so the pull is started one step ahead instead:
//
//   OnBatchAhead (the dataset pass announces batch t + 1 before step t runs): its keys are copied
//     (GatherBatchIds, as the async prefetch gathers them: sparse_prefetch.h).
//   Start (step t's pull of the table is done, its own new rows inserted): the announced keys
//     are looked up in LocalRows, and one pull of those still absent starts.
//   Install (step t + 1's pull of the table, before it reads LocalRows): when the prefetch was
//     for exactly these keys, waits for it and inserts its rows that are STILL absent. A row
//     present by then (another trainer thread pulled it, and may have trained it since) keeps
//     its local value, delta and synced value: a prefetched row never overwrites local work.
//     Keys the prefetch did not cover are pulled at the step as before.
//
// What changes: a new row's value is read from the servers during step t instead of at step t + 1
// (one step more of staleness, new rows only; the other workers' deltas reach the servers only
// at exchanges, every k steps). A row no other worker pushes has its server value either way, so
// a one-worker job trains bit for bit as without the prefetch (the servers initialize a row as a
// pure function of its id: ps/table/initializer.h). The cost: one more probe of the next batch's
// ids in LocalRows a step (LocalRows::Absent: the index only, no copy of the rows).
//
// Switched by CommunicatorConfig::prefetch_sparse (the strategy's a_sync_configs
// "prefetch_sparse", as the async prefetch); tables whose SparseVar names no id variables are not
// prefetched. Only dataset passes announce batches; Executor.run steps pull as before.
//
// Threads: OnBatchAhead, Start and Install of one trainer thread run on that thread and touch
// only its slots; OnPassBegin/OnPassEnd run between passes. A pull in flight is waited for
// before its buffer is dropped (the RPC writes into it).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "distributed/communicator.h"
#include "distributed/detail/local_rows.h"
#include "framework/runtime.h"
#include "ps/client/client.h"

namespace fleet::distributed::detail {

class GeoRowPrefetch {
 public:
  GeoRowPrefetch(std::shared_ptr<ps::PsClient> client, const std::vector<SparseVar>& tables);
  ~GeoRowPrefetch();

  // A dataset pass: one set of slots per trainer thread.
  void OnPassBegin(const framework::PassInfo& pass);
  // Copies the keys of every table (with id variables) of the batch `next.scope` holds.
  void OnBatchAhead(const framework::StepInfo& next);
  // After a dataset pass: drops (waiting for) what was prefetched and not installed.
  void OnPassEnd();

  // Before `thread` reads `keys` of `table_id` from `local`: installs the rows prefetched for
  // exactly these keys that `local` still lacks (waiting for their pull). Throws the pull's
  // error, naming the table (`table_name`).
  void Install(int thread, uint32_t table_id, absl::Span<const int64_t> keys, LocalRows& local,
               const std::string& table_name);
  // After `thread`'s pull of `table_id` for the current batch (`pulled_at_step`: it had to pull
  // rows from the servers): starts the pull of the rows the announced next batch lacks.
  void Start(int thread, uint32_t table_id, const LocalRows& local, bool pulled_at_step);

  // Counts since construction (tests, benchmarks): pulls at the step served by a prefetch; those
  // whose prefetch had not arrived when the step asked (the trainer waited); pulls that still
  // pulled rows from the servers at the step.
  int64_t served() const { return served_.load(std::memory_order_relaxed); }
  int64_t waited() const { return waited_.load(std::memory_order_relaxed); }
  int64_t pulled_at_step() const { return pulled_at_step_.load(std::memory_order_relaxed); }

 private:
  // One table of one trainer thread.
  struct Slot {
    std::vector<int64_t> announced;  // the next batch's keys, until Start takes them
    bool has_announced = false;
    std::vector<int64_t> batch;          // the keys of the batch the pull in flight is for
    std::vector<int64_t> absent;         // the keys it pulls (those `batch` lacked at Start)
    std::vector<float> rows;             // absent.size() * dim, written by the pull
    std::unique_ptr<ps::Future> future;  // null when no pull is in flight
    LocalRows::Lookup lookup;            // LocalRows::Absent's buffers, kept between calls
    ~Slot();
    // Waits for the pull in flight, if any, and forgets it.
    void Drop();
  };
  struct Table {
    uint32_t table_id = 0;
    size_t dim = 0;
    std::vector<std::string> ids;  // the pull_sparse op's Ids variables, in order
  };
  // The slot of (thread, table_id), or null outside a dataset pass or for a table not
  // prefetched.
  Slot* SlotOf(int thread, uint32_t table_id, size_t* dim);

  std::shared_ptr<ps::PsClient> client_;
  std::vector<Table> tables_;
  bool dataset_pass_ = false;  // set between passes only
  // Thread i's slot of tables_[t] is slots_[i * tables_.size() + t]; only that thread touches
  // its slots during a pass.
  std::vector<std::unique_ptr<Slot>> slots_;
  int threads_ = 0;
  std::atomic<int64_t> served_{0};
  std::atomic<int64_t> waited_{0};
  std::atomic<int64_t> pulled_at_step_{0};
};

}  // namespace fleet::distributed::detail
