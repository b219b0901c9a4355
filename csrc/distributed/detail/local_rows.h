#pragma once
// GEO's worker-side copy of one sparse table (geo_communicator.h): per row its value, its value
// at the last exchange ("synced") and the update rule's state, updated by the user's optimizer
// on every push_sparse and exchanged with the servers every k steps.
//
// A pull and a push touch every id of a batch (CTR-DNN: 13k ids of 26 slots a step), on the
// trainer thread, so the per-id work is what GEO adds to a step over one process, and on tables
// larger than the caches it is mostly waiting for memory. So a step looks each id up once: the
// row indices a Read found (a Lookup) serve the push of the same ids, an exchange's Lookup
// serves the rebase of its rows, and GEO's prefetch, which looks a coming batch up to find the
// rows it lacks, hands its Lookup to that batch's Read. The row index also sums a batch's repeated
// ids (a per-row stamp of the push, instead of a map of the batch's ids) and remembers the row for
// the next exchange (a per-row flag and a list, instead of a set of ids); a row's stamp, sum slot
// and flag sit together, and the rows a loop will reach a few ids later are prefetched.
//
// Thread-safe: rows are split into shards, each under its own mutex, and a batch visits each
// shard's ids together under one lock of it. A row keeps its index for the table's lifetime (rows
// are never removed), which is what lets a Lookup outlive the locks it was taken under.

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "distributed/detail/local_rows_buffer.h"
#include "distributed/detail/local_rows_index.h"
#include "ps/table/update_rule.h"

namespace fleet::distributed::detail {

class LocalRows {
  static constexpr size_t kShards = size_t{1} << LocalRowsIndex::kShardBits;

 public:
  // Where the rows of a list of keys are: the keys grouped by shard and each one's row index.
  // Filled by Read, Absent or TakeDeltas; used by a later Read, Absent, Update or Rebase of the
  // same keys, which then looks up only the rows it lacked (inserted since, maybe). Rows never
  // move, so the rows it found stay right however long it is kept. The keys are compared in full
  // and the LocalRows it was taken of too, so a Lookup of other keys or of another table is
  // ignored, never misused. Not thread-safe: one per caller.
  class Lookup {
   public:
    Lookup() { begin_.fill(0); }

   private:
    friend class LocalRows;
    const LocalRows* owner_ = nullptr;  // whose rows index_ numbers
    std::vector<int64_t> keys_;
    std::vector<uint64_t> hashes_;  // per position: LocalRowsIndex::Hash of its key
    std::vector<uint32_t> order_;   // shard s's positions: order_[begin_[s], begin_[s + 1])
    std::array<uint32_t, kShards + 1> begin_;
    std::vector<uint32_t> index_;  // per position; kAbsent where the row did not exist
    // The positions whose index_ is kAbsent, shard by shard (and in order_'s order within one).
    std::vector<uint32_t> absent_;
  };

  LocalRows(size_t dim, std::unique_ptr<ps::UpdateRule> rule);

  // Copies the values of present keys into out; returns the positions of absent keys, in
  // increasing order. With `lookup`, records where the keys are for an Update of them; when it
  // already holds these keys (GEO's prefetch looked the batch up a few steps before), only the
  // keys it lacked are looked up.
  std::vector<size_t> Read(absl::Span<const int64_t> keys, absl::Span<float> out,
                           Lookup* lookup = nullptr) const;
  // The positions of absent keys, in increasing order: Read without the copy of the present
  // rows (GEO's prefetch asks only which rows a batch lacks). `lookup` keeps its buffers
  // between calls; it holds where the keys are afterwards, as Read's does.
  std::vector<size_t> Absent(absl::Span<const int64_t> keys, Lookup* lookup = nullptr) const;
  // Inserts (or overwrites) rows with `values` as both value and synced value. The worker's
  // pulls never overwrite (InsertAbsent, InsertAbsentOrRead); tests set rows up with this.
  void Reset(absl::Span<const int64_t> keys, absl::Span<const float> values);
  // Reset of the keys that are absent only: a present row keeps its value, synced value, rule
  // state and mark (another trainer thread may have trained it since the values were pulled).
  void InsertAbsent(absl::Span<const int64_t> keys, absl::Span<const float> values);
  // InsertAbsent that also reads back what it kept: a key present already gets its row's value
  // copied into `values`, so that afterwards `values` holds every key's value as it is here. The
  // step's pull of the rows its Read missed: another trainer thread may have pulled and trained
  // one of them while this pull was in flight, and its row (and update) must win.
  void InsertAbsentOrRead(absl::Span<const int64_t> keys, absl::Span<float> values);
  // Applies gradients through the update rule (repeated keys summed first, in their order, so
  // that a stateful rule sees one gradient per row and push) and remembers the ids. Absent keys
  // are an error (pull_sparse always runs before push_sparse). A `lookup` of the same keys (the
  // step's Read) saves looking them up again; rows it lacks (Reset since) are looked up.
  void Update(absl::Span<const int64_t> keys, absl::Span<const float> grads,
              const Lookup* lookup = nullptr);
  // One training step of the rule's learning-rate schedule (nothing without one): the worker
  // calls it once per step, so that its k-th step updates rows at the schedule's rate of step k,
  // the rate the program's own lr variable has then (the servers only add GEO deltas).
  void StepSchedule() { rule_->BeginUpdate(); }
  // The ids updated since the last call, with their deltas scale * (value - synced); their
  // synced values become their values, so that updates made while the deltas travel are the
  // next exchange's (Rebase keeps them). With `lookup`, records where they are for the Rebase.
  void TakeDeltas(float scale, std::vector<int64_t>* keys, std::vector<float>* deltas,
                  Lookup* lookup = nullptr);
  // The servers' fresh values of rows whose deltas were taken: value = fresh + (value - synced),
  // synced = fresh. A row updated since its deltas were taken keeps that update on top of the
  // fresh value; one not updated gets the fresh value exactly (value - synced is 0), as Reset
  // would give it. Absent keys are an error.
  void Rebase(absl::Span<const int64_t> keys, absl::Span<const float> fresh,
              const Lookup* lookup = nullptr);

 private:
  static constexpr uint32_t kAbsent = LocalRowsIndex::kAbsent;
  // A batch's lookups and rows are mostly cache misses on large tables: the row of the key this
  // many places ahead is prefetched (a row is 2-4 cache lines; 32 rows ahead made the rule's
  // updates and TakeDeltas slower in a profile, too many lines in flight)...
  static constexpr uint32_t kPrefetchAhead = 8;
  // ...and its hash slot and row marks this many ahead: one line each, and the loops that read
  // them do little else per id (about 40 instructions), so 8 places ahead was about 100 cycles,
  // less than a miss to memory (16, 24 and 40 were tried; 24 was fastest).
  static constexpr uint32_t kProbeAhead = 24;
  // What Update and TakeDeltas keep per row, together so that an id costs one miss for them.
  struct RowMarks {
    uint32_t push_stamp = 0;  // the last push that summed a gradient into the row
    uint32_t sum_slot = 0;    // and where
    uint32_t touched = 0;     // updated since the last TakeDeltas
  };
  static constexpr size_t kLineBytes = 64;
  struct Shard {
    mutable std::mutex mu;
    LocalRowsIndex row_of;
    // Per row (stride_ floats): value[dim] state[state_dim] synced[dim], then padding. The
    // rule's update reads and writes value and state, the exchange value and synced, a read
    // only the value: with the value and the state side by side and each row on its own lines
    // (Adam of dim 10: 32 floats, two lines), an update touches two lines instead of three or
    // four of a packed 168-byte row.
    LocalRowsBuffer rows;  // page-aligned: with a stride of whole lines every row is on a line
    std::vector<RowMarks> marks;
    uint32_t pushes = 0;  // pushes that visited this shard
    // Rows updated since the last TakeDeltas: their ids and indices.
    std::vector<std::pair<int64_t, uint32_t>> touched_rows;
  };
  // Groups the positions of `keys` by shard into lookup->order_ and begin_, and sets every
  // index_ to kAbsent; keeps the keys and their hashes.
  void Group(absl::Span<const int64_t> keys, Lookup* lookup) const;
  // Read's and Absent's probe: the positions of absent keys, in increasing order; copies the
  // values of present keys into `out` unless it is null.
  std::vector<size_t> Probe(absl::Span<const int64_t> keys, float* out, Lookup* lookup) const;
  // Whether `lookup` holds the places of exactly `keys` among these rows.
  bool Holds(const Lookup& lookup, absl::Span<const int64_t> keys) const;
  // The end of shard s's run of lookup.absent_, which starts at `from`.
  static size_t AbsentEnd(const Lookup& lookup, size_t s, size_t from);
  // Reset's insertion, `overwrite` telling what becomes of a present row; when it is kept and
  // `read_back` is not null, the row's value goes to read_back at the key's position.
  void Insert(absl::Span<const int64_t> keys, absl::Span<const float> values, bool overwrite,
              float* read_back);
  // The row index of keys[i] (whose hash is hashes[i]) for each position i of `positions` (all
  // in `shard`, whose lock the caller holds), or kAbsent. Returns how many were absent.
  static size_t Find(const Shard& shard, absl::Span<const int64_t> keys, const uint64_t* hashes,
                     const uint32_t* positions, size_t n, uint32_t* index);
  // Visits the shards that hold some of `keys`, each under one lock of it, once every row index
  // is filled in: from `lookup` when it holds exactly these keys (only the rows it lacks are
  // looked up), else all of them. visit(shard, positions, n, index, absent) gets the shard's
  // positions in order, the row index of every position and how many of its keys it lacks.
  template <class Visit>
  void ForEachShard(absl::Span<const int64_t> keys, const Lookup* lookup, Visit&& visit) const;
  // Floats between rows for a row of `width` floats: whole cache lines (or, for a short row, a
  // power of two that divides one), where that adds at most a quarter to the row; else `width`.
  static size_t StrideOf(size_t width);
  float* RowAt(Shard& shard, uint32_t index) const {
    return shard.rows.data() + static_cast<size_t>(index) * stride_;
  }
  const float* RowAt(const Shard& shard, uint32_t index) const {
    return shard.rows.data() + static_cast<size_t>(index) * stride_;
  }
  // Every cache line of the row's value and rule state (what Update reads and writes).
  void PrefetchValueAndState(const float* row_start) const {
    const char* row = reinterpret_cast<const char*>(row_start);
    for (size_t byte = 0; byte < synced_ * sizeof(float); byte += kLineBytes) {
      __builtin_prefetch(row + byte);
    }
  }
  // The lines of the row's value and synced value (what TakeDeltas and Rebase read and write).
  void PrefetchValueAndSynced(const Shard& shard, uint32_t index) const {
    const float* row = RowAt(shard, index);
    __builtin_prefetch(row);
    __builtin_prefetch(row + dim_ - 1);
    __builtin_prefetch(row + synced_);
    __builtin_prefetch(row + synced_ + dim_ - 1);
  }

  size_t dim_;
  size_t synced_;  // where a row's synced value starts: after value and rule state
  size_t stride_;
  std::unique_ptr<ps::UpdateRule> rule_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace fleet::distributed::detail
