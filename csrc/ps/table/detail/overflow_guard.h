#pragma once
// Keeps an update from finite gradients from taking a row out of range: float overflow to
// infinity, a NaN (inf - inf), or a magnitude past the table's bound (TableConfig.overflow).
// Finite gradients are checked at the door (AllFinite); this catches what the update rule makes
// of them. One guard per push, used row by row; not thread-safe.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fleet/ps/ps.pb.h"

namespace fleet::ps::detail {

// InvalidArgument naming the table (`name`) for a negative or non-finite max_abs.
absl::Status CheckOverflowConfig(const proto::TableConfig& config, const std::string& name);

class OverflowGuard {
 public:
  explicit OverflowGuard(const proto::OverflowConfig& config);

  // Before updating the `floats` floats at `row`: keeps a copy of them.
  void Keep(const float* row, size_t floats);
  // After the update: true when every value is within range. Otherwise, with CLIP and no NaN,
  // clamps them into range and returns true; else puts the kept copy back and returns false.
  bool Check(float* row, size_t floats);
  // The bound of |value|, for messages.
  float bound() const { return bound_; }

 private:
  bool clip_;
  float bound_;
  std::vector<float> kept_;
};

}  // namespace fleet::ps::detail
