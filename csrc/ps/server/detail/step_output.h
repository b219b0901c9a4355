#pragma once
// A sync step's request to its round beyond the update (BarrierSet::ArriveAndRun,
// GradAccumulator::ApplyAll).

#include <cstdint>

#include "absl/types/span.h"

namespace fleet::ps::detail {

// Where a sync step's arrival wants a dense table's values once its round is applied: the
// round writes them there (the arrival's reply or its worker's shared memory) while it updates
// the table, so no arrival copies them after the round. `values` is empty for none. `values`
// and `written` belong to the arrival's caller and must stay valid until the arrival returns:
// only the round's action writes them, while the arrival still waits, and it sets *written
// once the values are in (an arrival let through without a round finds it false).
struct StepOutput {
  uint32_t dense_table = 0;
  absl::Span<float> values;
  bool* written = nullptr;
};

}  // namespace fleet::ps::detail
