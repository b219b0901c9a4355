#pragma once
// GEO's prefetch of the rows a trainer thread's coming batches lack (geo_communicator.h). A GEO
// worker pulls a row from the servers only the first time one of its batches holds the id; that
// pull used to wait at the step, every step (13,312 keys at a CTR-DNN worker's first step,
// ~150-300 a step late in a pass). On a machine whose cores the job fills, a trainer that waits
// for a round trip leaves its core idle, so the pull is started ahead; and since each call costs
// the client and the server gRPC's fixed work whatever its size (about 30% of the server's CPU
// in a GEO job was that, for ~780 pulls of a few hundred rows), one pull covers the new rows of
// several batches (a window):
//
//   OnBatchAhead (the dataset pass announces each batch kBatchesAhead batches before it runs,
//     framework::StepHook::BatchesAhead): its keys are appended to the thread's announced ones.
//   Start (step t's pull of the table is done, its own new rows inserted): unless the window's
//     batches still reach step t + 1, the announced batches become the window: each batch's keys
//     are looked up in LocalRows (a Lookup per batch, kept), and one pull of those absent (each
//     id once) starts.
//   Install (a step's pull of the table, before it reads LocalRows): when the step's keys are
//     the window's next batch, it is served; at the window's first batch the pull is waited for
//     and its rows that are STILL absent are inserted, those of the later batches too. A row
//     present by then (another trainer thread pulled it, and may have trained it since) keeps
//     its local value, delta and synced value: a prefetched row never overwrites local work.
//     Keys the window did not cover are pulled at the step as before. A step that asks for other
//     keys than the window's next batch ends the window (the batches no longer come in order).
//     A served batch's Lookup goes to the step: its Read looks up only the rows that were absent
//     at Start (rows never move, so the others are where Start found them), so each id of a
//     batch is looked up once, not once at Start and again at the step.
//
// What changes: a new row's value is read from the servers up to kBatchesAhead steps before its
// batch runs instead of at that step (more staleness, new rows only; the other workers' deltas
// reach the servers only at exchanges, every k steps). An inserted row that is not trained is
// not pushed (LocalRows::InsertAbsent marks nothing). A row no other worker pushes has its
// server value either way, so a one-worker job trains bit for bit as without the prefetch (the
// servers initialize a row as a pure function of its id: ps/table/initializer.h). The cost: the
// probe of every announced id in LocalRows moves from the step to Start (LocalRows::Absent: the
// index only, no copy of the rows), a few steps earlier.
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
  // Batches a window covers: one pull of their new rows instead of one a batch. 4 cut the GEO
  // job's pulls from ~780 to ~200 (a window's pull is still read before its first batch runs,
  // one step after it starts); more batches make new rows staler.
  static constexpr int kBatchesAhead = 4;

  GeoRowPrefetch(std::shared_ptr<ps::PsClient> client, const std::vector<SparseVar>& tables);
  ~GeoRowPrefetch();

  // A dataset pass: one set of slots per trainer thread.
  void OnPassBegin(const framework::PassInfo& pass);
  // Appends the keys of every table (with id variables) of the batch `next.scope` holds to
  // `next.thread`'s announced batches.
  void OnBatchAhead(const framework::StepInfo& next);
  // After a dataset pass: drops (waiting for) what was prefetched and not installed.
  void OnPassEnd();

  // Before `thread` reads `keys` of `table_id` from `local`: when they are the window's next
  // batch, installs the window's rows that `local` still lacks (waiting for their pull) if this
  // is its first batch, and swaps the batch's Lookup (taken at Start) into `*batch_lookup`, if
  // given, for the step's Read (the window keeps the buffers swapped out, for its next Start).
  // Throws the pull's error, naming the table (`table_name`).
  void Install(int thread, uint32_t table_id, absl::Span<const int64_t> keys, LocalRows& local,
               const std::string& table_name, LocalRows::Lookup* batch_lookup = nullptr);
  // After `thread`'s pull of `table_id` for the current batch (`pulled_at_step`: it had to pull
  // rows from the servers): when the window is used up (or was not followed), starts the pull of
  // the rows the announced batches lack.
  void Start(int thread, uint32_t table_id, const LocalRows& local, bool pulled_at_step);

  // Counts since construction (tests, benchmarks): pulls at the step served by a window that
  // pulled rows (a window whose batches lacked none serves them uncounted); those whose
  // window's pull had not arrived when the step asked (the trainer waited); pulls that still
  // pulled rows from the servers at the step; the windows' pulls started.
  int64_t served() const { return served_.load(std::memory_order_relaxed); }
  int64_t waited() const { return waited_.load(std::memory_order_relaxed); }
  int64_t pulled_at_step() const { return pulled_at_step_.load(std::memory_order_relaxed); }
  int64_t window_pulls() const { return window_pulls_.load(std::memory_order_relaxed); }

 private:
  // A run of batches' keys, joined; ends[b] is where batch b's keys end.
  struct Batches {
    std::vector<int64_t> keys;
    std::vector<size_t> ends;
    void Clear() {
      keys.clear();
      ends.clear();
    }
  };
  // One table of one trainer thread.
  struct Slot {
    Batches announced;                   // announced, not yet in a window
    Batches window;                      // the batches the last pull is for
    size_t next = 0;                     // the window's batch the next step should ask for
    bool served = false;                 // Install served a batch since the last Start
    bool pulled = false;                 // the window pulled rows (none were absent: nothing)
    std::vector<int64_t> absent;         // the ids the window's pull pulls (those absent at Start)
    std::vector<float> rows;             // absent.size() * dim, written by the pull
    std::unique_ptr<ps::Future> future;  // null when no pull is in flight
    // Per batch of the window, where LocalRows found its keys at Start (LocalRows::Absent's);
    // the buffers are kept between windows.
    std::vector<LocalRows::Lookup> lookups;
    ~Slot();
    // Waits for the pull in flight, if any, and forgets it.
    void Drop();
  };
  struct Table {
    uint32_t table_id = 0;
    size_t dim = 0;
    std::vector<std::string> ids;  // the pull_sparse op's Ids variables, in order
  };
  // Announced batches kept at most: Start takes them all, so more means no step of this table
  // takes them (a program whose pull_sparse is not the one announced).
  static constexpr size_t kMaxAnnounced = 2 * kBatchesAhead;

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
  std::atomic<int64_t> window_pulls_{0};
};

}  // namespace fleet::distributed::detail
