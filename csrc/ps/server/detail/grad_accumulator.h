#pragma once
// Sync training's server side: gradients pushed with `accumulate` are summed here per table (and
// per key for sparse tables) instead of being applied; the sync-step barrier applies, once per
// step, their average over the workers that contributed, through each table's update rule.
//
// With W workers of batch B this gives the update one process would make with batch W*B: each
// worker's gradient is the mean over its B samples, so the mean over W*B samples is their sum
// divided by W; sparse rows get the sum of every worker's gradient for that key divided by W,
// as the single process's gradient row for that key is.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ps/server/detail/round_pool.h"
#include "ps/server/detail/step_output.h"
#include "ps/server/detail/table_set.h"

namespace fleet::ps::detail {

class GradAccumulator {
 public:
  // `round_threads`: the threads ApplyAll spreads a round over (the caller and helpers).
  explicit GradAccumulator(TableSet* tables, size_t round_threads = 1)
      : tables_(tables), pool_(round_threads) {}

  // Adds a sparse push's gradients to the pending sums of `table_id`. Thread-safe.
  absl::Status AddSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                         absl::Span<const float> grads);
  // Adds a dense push's gradients (this server's part, local order). Thread-safe.
  absl::Status AddDense(uint32_t table_id, absl::Span<const float> grads);
  // Applies every pending sum times `scale` through its table's update rule and clears them.
  // Not meant to run beside Add* of the same step (the barrier orders them). The work is spread
  // over the round's threads: a sparse table's push in parts of whole shards, a dense table's
  // blocks one task each; tasks touch disjoint rows, so the tables end the same bit for bit
  // whatever the thread count. The first error in table order (sparse tables, then dense) is
  // returned.
  // Each output receives its dense table's values after the round (a table without sums this
  // round is copied as it is), written by the round's threads right after each block's update,
  // and its *written set; the outputs' tables must exist and their spans be the tables' size
  // (the caller checks; otherwise the round fails).
  absl::Status ApplyAll(float scale, absl::Span<const StepOutput> outputs = {});

  // A sync worker sends a step's accumulate pushes and its step barrier without waiting for the
  // pushes' replies, announcing in the barrier how many pushes it sent this server
  // (BarrierRequest.accumulate_pushes); handlers may run in any order, so the arrival waits
  // until the pushes are in:
  //   CountPush:       an accumulate push's handler ended (whatever its outcome: a failed push
  //                    is counted too, its error goes to the worker in the push's reply).
  //   AwaitPushes:     adds `announced` to the round's announced pushes and blocks until at
  //                    least as many have been counted; DeadlineExceeded at `deadline`, naming
  //                    both counts (the announcement is taken back).
  //   ResetPushCounts: the round ends (every arrival's pushes were counted, and no worker can
  //                    have sent the next step's before the round releases it): both start again
  //                    from zero, so that a push nobody announced (a client that awaited its
  //                    pushes) cannot carry over.
  // Thread-safe.
  void CountPush();
  absl::Status AwaitPushes(uint32_t announced, absl::Time deadline);
  void ResetPushCounts();

 private:
  struct Sparse {
    std::mutex mu;
    size_t dim = 0;
    absl::flat_hash_map<int64_t, uint32_t> row_of;  // key -> row in sums
    // The keys of the last round applied: the next round's first add reserves room for as many
    // (see AddSparse).
    size_t last_round_keys = 0;
    std::vector<int64_t> keys;
    std::vector<float> sums;
    // ApplyAll's scratch: the round's keys and sums sorted by part (PushSparseInParts).
    std::vector<uint32_t> part_of;
    std::vector<int64_t> part_keys;
    std::vector<float> part_sums;
  };
  struct Dense {
    std::mutex mu;
    std::vector<float> sums;
    bool any = false;
  };
  Sparse& SparseOf(uint32_t table_id);
  Dense& DenseOf(uint32_t table_id);
  // ApplyAll's task for one table: its pending sums times `scale` through the table's rule.
  absl::Status ApplySparse(uint32_t table_id, Sparse& acc, float scale);
  // ApplyDense also writes the table's values after its update to `outs` (without sums this
  // round, the values as they are: CopyDense).
  absl::Status ApplyDense(uint32_t table_id, Dense& acc, float scale,
                          absl::Span<const absl::Span<float>> outs);
  absl::Status CopyDense(uint32_t table_id, absl::Span<const absl::Span<float>> outs);
  // Floats a task of the dense sums' scaling covers (64 KiB: a pool hand-off costs far less).
  static constexpr size_t kScaleChunk = 16384;
  // A sparse table's round as pushes of whole shards on the pool's threads (one push when the
  // pool has one thread, the round is small or the rule has a learning-rate schedule). Each
  // part's error is its own: a failing part does not keep the others from being applied.
  absl::Status PushSparseInParts(SparseTable& table, Sparse& acc);
  static constexpr size_t kSparsePartsPerThread = 4;  // finer parts even out the threads' loads
  static constexpr size_t kMinKeysToSplit = 512;

  TableSet* tables_;
  std::mutex mu_;  // guards the maps (not their entries)
  std::map<uint32_t, std::unique_ptr<Sparse>> sparse_;
  std::map<uint32_t, std::unique_ptr<Dense>> dense_;
  RoundPool pool_;  // ApplyAll's threads

  absl::Mutex count_mu_;
  uint64_t pushes_counted_ ABSL_GUARDED_BY(count_mu_) = 0;
  uint64_t pushes_announced_ ABSL_GUARDED_BY(count_mu_) = 0;
};

// Counts an accumulate push when its handler ends (CountPush), whichever way it returns; does
// nothing for other pushes (a null accumulator).
class CountedPush {
 public:
  explicit CountedPush(GradAccumulator* accumulator) : accumulator_(accumulator) {}
  ~CountedPush() {
    if (accumulator_ != nullptr) accumulator_->CountPush();
  }
  CountedPush(const CountedPush&) = delete;
  CountedPush& operator=(const CountedPush&) = delete;

 private:
  GradAccumulator* accumulator_;
};

}  // namespace fleet::ps::detail
