#pragma once
// Update rules: how a pushed gradient changes a row. A rule owns no rows: it declares how many
// floats of state a row of `dim` values needs and updates value and state in place. Tables keep
// the state beside the value (row = [value | state]).

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "fleet/ps/ps.pb.h"

namespace fleet::ps {

class UpdateRule {
 public:
  virtual ~UpdateRule() = default;

  // Floats of state for a row of `dim` values (SGD 0, Adagrad dim, Adam 2 * dim + 2).
  virtual size_t StateDim(size_t dim) const = 0;
  // Writes the initial state of a new row of `dim` values.
  virtual void InitState(size_t dim, float* state) const = 0;
  // Applies `grad` (dim floats) to `w` (dim floats) and `state` (StateDim(dim) floats).
  // Stateless itself; callers serialise updates of the same row.
  virtual void Update(size_t dim, float* w, float* state, const float* grad) const = 0;
};

// The rule a config names, with its defaults filled in. InvalidArgument (naming the field) for a
// non-positive learning rate, missing rule or out-of-range hyper-parameter.
absl::StatusOr<std::unique_ptr<UpdateRule>> MakeUpdateRule(const proto::OptimizerConfig& config);

}  // namespace fleet::ps
