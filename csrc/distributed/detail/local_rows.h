#pragma once
// GEO's worker-side copy of one sparse table (geo_communicator.h): per row its value, its value
// at the last exchange ("synced") and the update rule's state, updated by the user's optimizer
// on every push_sparse and exchanged with the servers every k steps.
//
// A push touches every id of a batch (CTR-DNN: 13k ids of 26 slots a step), on the trainer
// thread, so the per-id work is what GEO adds to a step over one process. Each id costs one hash
// lookup here: the row index it finds also serves to sum a batch's repeated ids (a per-row stamp
// of the push, instead of a map of the batch's ids) and to remember the row for the next exchange
// (a per-row flag and a list, instead of a set of ids).
//
// Thread-safe: rows are split into shards, each under its own mutex, and a batch visits each
// shard's ids together under one lock of it.

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "ps/table/update_rule.h"

namespace fleet::distributed::detail {

class LocalRows {
 public:
  LocalRows(size_t dim, std::unique_ptr<ps::UpdateRule> rule);

  // Copies the values of present keys into out; returns the positions of absent keys, in
  // increasing order.
  std::vector<size_t> Read(absl::Span<const int64_t> keys, absl::Span<float> out) const;
  // Inserts (or overwrites) rows with `values` as both value and synced value.
  void Reset(absl::Span<const int64_t> keys, absl::Span<const float> values);
  // Applies gradients through the update rule (repeated keys summed first, in their order, so
  // that a stateful rule sees one gradient per row and push) and remembers the ids. Absent keys
  // are an error (pull_sparse always runs before push_sparse).
  void Update(absl::Span<const int64_t> keys, absl::Span<const float> grads);
  // One training step of the rule's learning-rate schedule (nothing without one): the worker
  // calls it once per step, so that its k-th step updates rows at the schedule's rate of step k,
  // the rate the program's own lr variable has then (the servers only add GEO deltas).
  void StepSchedule() { rule_->BeginUpdate(); }
  // The ids updated since the last call, with their deltas scale * (value - synced); their
  // synced values become their values, so that updates made while the deltas travel are the
  // next exchange's (Rebase keeps them).
  void TakeDeltas(float scale, std::vector<int64_t>* keys, std::vector<float>* deltas);
  // The servers' fresh values of rows whose deltas were taken: value = fresh + (value - synced),
  // synced = fresh. A row updated since its deltas were taken keeps that update on top of the
  // fresh value; one not updated gets the fresh value exactly (value - synced is 0), as Reset
  // would give it. Absent keys are an error.
  void Rebase(absl::Span<const int64_t> keys, absl::Span<const float> fresh);

 private:
  static constexpr size_t kShards = 16;
  // A batch's lookups are mostly cache misses on large tables: the hash slot of the key this
  // many places ahead is prefetched.
  static constexpr uint32_t kPrefetchAhead = 8;
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<int64_t, uint32_t> row_of;
    std::vector<float> rows;  // per row: value[dim] synced[dim] state[state_dim]
    // Per row, the last push that summed a gradient into it and where (Update).
    std::vector<uint32_t> push_stamp;
    std::vector<uint32_t> sum_slot;
    uint32_t pushes = 0;  // pushes that visited this shard
    // Rows updated since the last TakeDeltas: a flag per row, and their ids and indices.
    std::vector<uint8_t> touched;
    std::vector<std::pair<int64_t, uint32_t>> touched_rows;
  };
  static size_t ShardIndex(int64_t key);
  // The positions of `keys` grouped by shard: shard s's are order[begin[s], begin[s + 1]), in
  // their order within keys.
  std::vector<uint32_t> ByShard(absl::Span<const int64_t> keys,
                                std::array<uint32_t, kShards + 1>* begin) const;
  // visit(shard, i) for every position i of `keys`, a shard's keys together under one lock of
  // the shard instead of a lock per key; after_shard(shard) once a shard's keys were visited,
  // still under its lock.
  template <class Visit, class AfterShard>
  void ForEachByShard(absl::Span<const int64_t> keys, Visit&& visit,
                      AfterShard&& after_shard) const;
  // The row index of `key` in `shard`, or -1.
  static int64_t IndexOf(const Shard& shard, int64_t key);
  float* RowAt(Shard& shard, int64_t index) const {
    return shard.rows.data() + static_cast<size_t>(index) * width_;
  }

  size_t dim_;
  size_t width_;
  std::unique_ptr<ps::UpdateRule> rule_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace fleet::distributed::detail
