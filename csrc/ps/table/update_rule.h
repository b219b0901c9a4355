#pragma once
// Update rules: how a pushed gradient changes a row. A rule owns no rows: it declares how many
// floats of state a row of `dim` values needs and updates value and state in place. Tables keep
// the state beside the value (row = [value | state]).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/lr_schedule.h"
#include "fleet/ps/ps.pb.h"

namespace fleet::ps {

class UpdateRule {
 public:
  virtual ~UpdateRule() = default;

  // Steps the learning-rate schedule (OptimizerConfig.schedule; nothing without one): a table
  // calls it once per push of gradients it applies, before that push's Update calls, so the
  // k-th push (counting from the schedule's `begin`) updates at the schedule's rate of step k.
  // Thread-safe: concurrent pushes take distinct steps, and an Update reads the rate set last.
  void BeginUpdate();
  // The rate Update applies now.
  float learning_rate() const { return lr_.load(std::memory_order_relaxed); }

  // Floats of state for a row of `dim` values (SGD 0, Adagrad dim, Adam 2 * dim + 2).
  virtual size_t StateDim(size_t dim) const = 0;
  // Writes the initial state of a new row of `dim` values.
  virtual void InitState(size_t dim, float* state) const = 0;
  // Applies `grad` (dim floats), plus the config's weight decay of `w` when it has one, to `w`
  // (dim floats) and `state` (StateDim(dim) floats). Stateless itself; callers serialise
  // updates of the same row. `out`, when not null, receives the updated values (dim floats)
  // from the same pass, as a copy of `w` after the update would give them.
  void Update(size_t dim, float* w, float* state, const float* grad, float* out = nullptr) const;
  // Update of several distinct rows, bit for bit Update(dim, row, state, grad) of each in turn:
  // row r's dim values at rows[r], its state at rows[r] + state_offset, its gradient at
  // grads + r * dim. A worker's local rows push a batch's rows this way; a rule with a kernel for
  // many rows (Adam) spends one call on them instead of several per row.
  void UpdateRows(size_t dim, absl::Span<float* const> rows, size_t state_offset,
                  const float* grads) const;
  // Whether Update(dim, w, state, grad) is sure to leave every value and state float finite and
  // within `bound` (> 0), judged from magnitudes before the update. False says nothing: a table
  // then keeps a copy of the row to restore (detail/overflow_guard.h). Reads the row and the
  // gradient once, without writing; proving a row safe is cheaper than copying it.
  bool UpdateStaysWithin(size_t dim, const float* w, const float* state, const float* grad,
                         float bound) const;

  // What UpdateMeasured returns when it knows no bound.
  static constexpr uint32_t kUnknownBound = UINT32_MAX;
  // Update, returning a bound on the row it leaves: no value or per-value state float has
  // detail::MagnitudeBits above it, and the state the rule needs non-negative has no sign bit (a
  // sign bit counts above every magnitude). kUnknownBound from a rule that does not measure the
  // rows it updates (SGD and Adagrad; Adam's kernel finds the bound in its own loop).
  uint32_t UpdateMeasured(size_t dim, float* w, float* state, const float* grad,
                          float* out = nullptr) const;
  // What a caller may know of a row and its gradient without reading them.
  struct Known {
    // The bound UpdateMeasured returned for the row, nothing having changed the row since.
    uint32_t row = kUnknownBound;
    // The gradient's largest detail::MagnitudeBits (detail::MaxMagnitudeBits).
    uint32_t grad = kUnknownBound;
  };
  // UpdateStaysWithin with what the caller knows: a bound that proves the row spares the scans
  // of its values and state (a dense block's push would otherwise read its whole block twice),
  // a known gradient maximum the scan of the gradient. What is unknown, or a row bound above the
  // range, is scanned. The answer is the overload's without `known`.
  bool UpdateStaysWithin(size_t dim, const float* w, const float* state, const float* grad,
                         float bound, const Known& known) const;

 protected:
  explicit UpdateRule(float learning_rate) : lr_(learning_rate) {}
  // The rule proper: Update with the decayed gradient.
  virtual void Apply(size_t dim, float* w, float* state, const float* grad, float* out) const = 0;
  // UpdateRows without weight decay; this one applies each row in turn.
  virtual void ApplyRows(size_t dim, absl::Span<float* const> rows, size_t state_offset,
                         const float* grads) const {
    for (size_t r = 0; r < rows.size(); ++r) {
      Apply(dim, rows[r], rows[r] + state_offset, grads + r * dim, nullptr);
    }
  }
  // Apply, returning the bound UpdateMeasured describes; a rule that does not measure its rows
  // keeps this one.
  virtual uint32_t ApplyMeasured(size_t dim, float* w, float* state, const float* grad,
                                 float* out) const {
    Apply(dim, w, state, grad, out);
    return kUnknownBound;
  }
  // A magnitude h such that Apply with every value, per-value state float and (decayed)
  // gradient within [-h, h] leaves them all finite and within `bound`, given the row's scalars
  // as `state` holds them now (which the rule checks itself) and no sign bit in its
  // NonNegativeState (which the caller checks); 0 when the rule promises nothing for this row.
  virtual double SafeInputMagnitude(size_t /*dim*/, const float* /*state*/,
                                    double /*bound*/) const {
    return 0.0;
  }
  // The per-value state floats [first, first + count) of a row's state that SafeInputMagnitude's
  // h assumes hold no sign bit (Adagrad's accumulator, Adam's v): count 0 for none.
  struct StateRange {
    size_t first = 0;
    size_t count = 0;
  };
  virtual StateRange NonNegativeState(size_t /*dim*/) const { return {}; }
  // Floats at the end of a row's state that are the row's own rather than one per value (Adam's
  // beta powers).
  virtual size_t RowScalars() const { return 0; }

 private:
  friend absl::StatusOr<std::unique_ptr<UpdateRule>> MakeUpdateRule(
      const proto::OptimizerConfig& config);

  // The MagnitudeBits limits of a row's values and per-value state, and of its raw gradient,
  // within which Update stays in range (SafeInputMagnitude less the weight decay); false when
  // none hold (a schedule, or a row the rule promises nothing for).
  bool InputLimits(size_t dim, const float* state, float bound, uint32_t* value_bits,
                   uint32_t* grad_bits) const;
  // The gradient plus the config's weight decay of `w`, into `decayed` (dim floats).
  void DecayInto(size_t dim, const float* w, const float* grad, std::vector<float>* decayed) const;

  std::atomic<float> lr_;
  float l2_decay_ = 0.0f;  // OptimizerConfig.l2_decay / l1_decay
  float l1_decay_ = 0.0f;
  std::optional<LrSchedule> schedule_;
  std::atomic<int64_t> next_step_{0};
};

// The rule a config names, with its defaults filled in. InvalidArgument (naming the field) for a
// non-positive learning rate, missing rule, out-of-range hyper-parameter or bad schedule.
absl::StatusOr<std::unique_ptr<UpdateRule>> MakeUpdateRule(const proto::OptimizerConfig& config);

}  // namespace fleet::ps
