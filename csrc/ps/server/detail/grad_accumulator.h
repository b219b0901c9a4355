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
#include "absl/types/span.h"
#include "ps/server/detail/table_set.h"

namespace fleet::ps::detail {

class GradAccumulator {
 public:
  explicit GradAccumulator(TableSet* tables) : tables_(tables) {}

  // Adds a sparse push's gradients to the pending sums of `table_id`. Thread-safe.
  absl::Status AddSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                         absl::Span<const float> grads);
  // Adds a dense push's gradients (this server's part, local order). Thread-safe.
  absl::Status AddDense(uint32_t table_id, absl::Span<const float> grads);
  // Applies every pending sum times `scale` through its table's update rule and clears them.
  // Not meant to run beside Add* of the same step (the barrier orders them).
  absl::Status ApplyAll(float scale);

 private:
  struct Sparse {
    std::mutex mu;
    size_t dim = 0;
    absl::flat_hash_map<int64_t, uint32_t> row_of;  // key -> row in sums
    std::vector<int64_t> keys;
    std::vector<float> sums;
  };
  struct Dense {
    std::mutex mu;
    std::vector<float> sums;
    bool any = false;
  };
  Sparse& SparseOf(uint32_t table_id);
  Dense& DenseOf(uint32_t table_id);

  TableSet* tables_;
  std::mutex mu_;  // guards the maps (not their entries)
  std::map<uint32_t, std::unique_ptr<Sparse>> sparse_;
  std::map<uint32_t, std::unique_ptr<Dense>> dense_;
};

}  // namespace fleet::ps::detail
