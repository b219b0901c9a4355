#include "ps/table/update_rule.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/table/detail/magnitude.h"
#include "ps/table/detail/rule_kernels.h"

namespace fleet::ps {
namespace {

class SgdRule : public UpdateRule {
 public:
  explicit SgdRule(float lr) : UpdateRule(lr) {}
  size_t StateDim(size_t) const override { return 0; }
  void InitState(size_t, float*) const override {}
  void Apply(size_t dim, float* w, float*, const float* g, float* out) const override {
    detail::SgdKernel(dim, learning_rate(), w, g, out);
  }
  // |w - lr * g| <= h + lr * h; the 1% covers the rounding of the two operations.
  double SafeInputMagnitude(size_t, const float*, double bound) const override {
    return bound / (1.01 * (1.0 + learning_rate()));
  }
};

// The fluid `adagrad` op: G += g^2; w -= lr * g / (sqrt(G) + epsilon).
class AdagradRule : public UpdateRule {
 public:
  AdagradRule(float lr, float epsilon, float initial)
      : UpdateRule(lr), eps_(epsilon), init_(initial) {}
  size_t StateDim(size_t dim) const override { return dim; }
  void InitState(size_t dim, float* state) const override {
    for (size_t i = 0; i < dim; ++i) state[i] = init_;
  }
  void Apply(size_t dim, float* w, float* acc, const float* g, float* out) const override {
    detail::AdagradKernel(dim, learning_rate(), eps_, w, acc, g, out);
  }
  // With |w|, G, |g| <= h and G >= 0 (the denominator at least epsilon > 0): G' <= h + h^2 and
  // |w'| <= h + lr * h / epsilon; the 1% covers rounding.
  double SafeInputMagnitude(size_t, const float*, double bound) const override {
    if (!(eps_ > 0.0f)) return 0.0;
    const double step_per_h = static_cast<double>(learning_rate()) / eps_;
    return std::min({bound / (1.01 * (1.0 + step_per_h)), bound / 2.02, std::sqrt(bound / 2.02)});
  }
  StateRange NonNegativeState(size_t dim) const override { return {0, dim}; }  // G

 private:
  float eps_, init_;
};

// Adam (Kingma and Ba, "Adam: a method for stochastic optimization", ICLR 2015) in the form of
// the fluid `adam` op: bias correction folded into the step size, epsilon scaled to match.
// State: m[dim], v[dim], beta1^t, beta2^t (both start at beta, as Paddle's Beta*Pow).
class AdamRule : public UpdateRule {
 public:
  AdamRule(float lr, float beta1, float beta2, float eps)
      : UpdateRule(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {}
  size_t StateDim(size_t dim) const override { return 2 * dim + 2; }
  void InitState(size_t dim, float* state) const override {
    for (size_t i = 0; i < 2 * dim; ++i) state[i] = 0.0f;
    state[2 * dim] = beta1_;
    state[2 * dim + 1] = beta2_;
  }
  void Apply(size_t dim, float* w, float* state, const float* g, float* out) const override {
    Step(dim, w, state, g, out, /*measured=*/false);
  }
  uint32_t ApplyMeasured(size_t dim, float* w, float* state, const float* g,
                         float* out) const override {
    return Step(dim, w, state, g, out, /*measured=*/true);
  }
  void ApplyRows(size_t dim, absl::Span<float* const> rows, size_t state_offset,
                 const float* grads) const override {
    detail::AdamRowsKernel(dim, rows.size(), beta1_, beta2_, learning_rate(), eps_, rows.data(),
                           state_offset, grads);
  }
  size_t RowScalars() const override { return 2; }
  // With |w|, |m|, v, |g| <= h (and v >= 0, so that the denominator is at least eps_t > 0):
  // |m'| <= h, v' <= h + h^2 and |w'| <= h + lr_t * h / eps_t, every intermediate below those.
  // The 1% covers rounding (a few operations at 2^-24 each). lr_t and eps_t are computed as
  // Apply computes them.
  double SafeInputMagnitude(size_t dim, const float* state, double bound) const override {
    const float beta1_pow = state[2 * dim];
    const float beta2_pow = state[2 * dim + 1];
    if (!(beta1_pow >= 0.0f && beta1_pow < 1.0f && beta2_pow >= 0.0f && beta2_pow < 1.0f)) {
      return 0.0;
    }
    // The powers after the update, as Apply computes them, are part of the row too.
    if (!(beta1_pow * beta1_ <= bound && beta2_pow * beta2_ <= bound)) return 0.0;
    const float correction = std::sqrt(1.0f - beta2_pow);
    const float lr_t = learning_rate() * correction / (1.0f - beta1_pow);
    const float eps_t = eps_ * correction;
    if (!(eps_t > 0.0f) || !std::isfinite(lr_t)) return 0.0;
    const double step_per_h = static_cast<double>(lr_t) / eps_t;
    return std::min({bound / (1.01 * (1.0 + step_per_h)), bound / 2.02, std::sqrt(bound / 2.02)});
  }
  StateRange NonNegativeState(size_t dim) const override {
    return {dim, dim};  // v: a negative one makes sqrt NaN
  }

 private:
  // Apply, measuring the row it leaves (ApplyMeasured) when `measured`; kUnknownBound otherwise.
  uint32_t Step(size_t dim, float* w, float* state, const float* g, float* out,
                bool measured) const {
    float* m = state;
    float* v = state + dim;
    float& beta1_pow = state[2 * dim];
    float& beta2_pow = state[2 * dim + 1];
    const float correction = std::sqrt(1.0f - beta2_pow);
    const float lr_t = learning_rate() * correction / (1.0f - beta1_pow);
    const float eps_t = eps_ * correction;
    uint32_t row_bound = kUnknownBound;
    if (measured) {
      row_bound = detail::AdamKernelMeasured(dim, beta1_, beta2_, lr_t, eps_t, w, m, v, g, out);
    } else {
      detail::AdamKernel(dim, beta1_, beta2_, lr_t, eps_t, w, m, v, g, out);
    }
    beta1_pow *= beta1_;
    beta2_pow *= beta2_;
    return row_bound;
  }

  float beta1_, beta2_, eps_;
};

absl::Status CheckRange(const char* field, float value, float low, float high) {
  if (value >= low && value < high) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.", field, " must be in [", low, ", ", high, "), got ", value));
}

LrSchedule ScheduleOf(const proto::LrScheduleConfig& c) {
  LrSchedule s;
  s.name = c.name();
  s.learning_rate = c.learning_rate();
  s.decay_steps = c.decay_steps();
  s.decay_rate = c.decay_rate();
  s.staircase = c.staircase();
  s.boundaries.assign(c.boundaries().begin(), c.boundaries().end());
  s.values.assign(c.values().begin(), c.values().end());
  s.d_model = c.d_model();
  s.warmup_steps = c.warmup_steps();
  s.end_learning_rate = c.end_learning_rate();
  s.power = c.power();
  s.cycle = c.cycle();
  s.step_each_epoch = c.step_each_epoch();
  s.epochs = c.epochs();
  return s;
}

absl::StatusOr<std::unique_ptr<UpdateRule>> MakeConstantRateRule(
    const proto::OptimizerConfig& config) {
  const float lr = config.learning_rate();
  if (!(lr > 0.0f) || !std::isfinite(lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.learning_rate must be a positive number, got ", lr));
  }
  switch (config.rule_case()) {
    case proto::OptimizerConfig::kSgd:
      return std::make_unique<SgdRule>(lr);
    case proto::OptimizerConfig::kAdagrad: {
      const auto& c = config.adagrad();
      const float eps = c.has_epsilon() ? c.epsilon() : 1e-6f;
      const float init = c.has_initial_accumulator() ? c.initial_accumulator() : 0.0f;
      if (auto s = CheckRange("adagrad.epsilon", eps, 0.0f, 1.0f); !s.ok()) return s;
      if (auto s = CheckRange("adagrad.initial_accumulator", init, 0.0f, 1e30f); !s.ok()) return s;
      return std::make_unique<AdagradRule>(lr, eps, init);
    }
    case proto::OptimizerConfig::kAdam: {
      const auto& c = config.adam();
      const float beta1 = c.has_beta1() ? c.beta1() : 0.9f;
      const float beta2 = c.has_beta2() ? c.beta2() : 0.999f;
      const float eps = c.has_epsilon() ? c.epsilon() : 1e-8f;
      if (auto s = CheckRange("adam.beta1", beta1, 0.0f, 1.0f); !s.ok()) return s;
      if (auto s = CheckRange("adam.beta2", beta2, 0.0f, 1.0f); !s.ok()) return s;
      if (auto s = CheckRange("adam.epsilon", eps, 0.0f, 1.0f); !s.ok()) return s;
      return std::make_unique<AdamRule>(lr, beta1, beta2, eps);
    }
    case proto::OptimizerConfig::RULE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("optimizer: no rule set (one of sgd, adagrad, adam)");
}

}  // namespace

void UpdateRule::BeginUpdate() {
  if (!schedule_.has_value()) return;
  const int64_t step = next_step_.fetch_add(1, std::memory_order_relaxed);
  // MakeUpdateRule checked the schedule, so the rate of any step is a number.
  const absl::StatusOr<double> rate = LrAtStep(*schedule_, static_cast<double>(step));
  if (rate.ok()) lr_.store(static_cast<float>(*rate), std::memory_order_relaxed);
}

void UpdateRule::Update(size_t dim, float* w, float* state, const float* grad, float* out) const {
  if (l2_decay_ == 0.0f && l1_decay_ == 0.0f) {
    Apply(dim, w, state, grad, out);
    return;
  }
  thread_local std::vector<float> decayed;
  DecayInto(dim, w, grad, &decayed);
  Apply(dim, w, state, decayed.data(), out);
}

void UpdateRule::UpdateRows(size_t dim, absl::Span<float* const> rows, size_t state_offset,
                            const float* grads) const {
  if (l2_decay_ == 0.0f && l1_decay_ == 0.0f) {
    ApplyRows(dim, rows, state_offset, grads);
    return;
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    Update(dim, rows[r], rows[r] + state_offset, grads + r * dim);
  }
}

uint32_t UpdateRule::UpdateMeasured(size_t dim, float* w, float* state, const float* grad,
                                    float* out) const {
  if (l2_decay_ == 0.0f && l1_decay_ == 0.0f) return ApplyMeasured(dim, w, state, grad, out);
  thread_local std::vector<float> decayed;
  DecayInto(dim, w, grad, &decayed);
  return ApplyMeasured(dim, w, state, decayed.data(), out);
}

void UpdateRule::DecayInto(size_t dim, const float* w, const float* grad,
                           std::vector<float>* decayed) const {
  decayed->resize(dim);
  for (size_t i = 0; i < dim; ++i) {
    const float sign = static_cast<float>((w[i] > 0.0f) - (w[i] < 0.0f));
    (*decayed)[i] = grad[i] + l2_decay_ * w[i] + l1_decay_ * sign;
  }
}

bool UpdateRule::InputLimits(size_t dim, const float* state, float bound, uint32_t* value_bits,
                             uint32_t* grad_bits) const {
  // A schedule's rate may change between this check and Update (another push's BeginUpdate).
  if (schedule_.has_value()) return false;
  const double h = SafeInputMagnitude(dim, state, bound);
  // Weight decay adds up to l2 * |w| + l1 to a gradient (Update): the raw gradient gets what is
  // left of h, less 1% for the rounding of the sum.
  const double grad_limit = (h * (1.0 - l2_decay_) - l1_decay_) * 0.99;
  if (!(h > 0.0) || !(grad_limit > 0.0)) return false;
  *value_bits = detail::MagnitudeBits(static_cast<float>(h));
  *grad_bits = detail::MagnitudeBits(static_cast<float>(grad_limit));
  return true;
}

bool UpdateRule::UpdateStaysWithin(size_t dim, const float* w, const float* state,
                                   const float* grad, float bound) const {
  return UpdateStaysWithin(dim, w, state, grad, bound, Known{});
}

bool UpdateRule::UpdateStaysWithin(size_t dim, const float* w, const float* state,
                                   const float* grad, float bound, const Known& known) const {
  uint32_t value_bits, grad_bits;
  if (!InputLimits(dim, state, bound, &value_bits, &grad_bits)) return false;
  const bool grad_within = known.grad != kUnknownBound
                               ? known.grad <= grad_bits
                               : !detail::ScanMagnitudeAbove(grad, dim, grad_bits);
  if (!grad_within) return false;
  // value_bits < kInfinityBits: a sign bit in the non-negative state would have put known.row
  // above it, and every value and per-value state float is within h.
  if (known.row <= value_bits) return true;
  const StateRange nonnegative = NonNegativeState(dim);
  return !detail::ScanSignBit(state + nonnegative.first, nonnegative.count) &&
         !detail::ScanMagnitudeAbove(w, dim, value_bits) &&
         !detail::ScanMagnitudeAbove(state, StateDim(dim) - RowScalars(), value_bits);
}

absl::StatusOr<std::unique_ptr<UpdateRule>> MakeUpdateRule(const proto::OptimizerConfig& config) {
  for (const auto& [field, value] :
       {std::pair{"l2_decay", config.l2_decay()}, std::pair{"l1_decay", config.l1_decay()}}) {
    if (auto s = CheckRange(field, value, 0.0f, 1e30f); !s.ok()) return s;
  }
  auto rule = MakeConstantRateRule(config);
  if (rule.ok()) {
    (*rule)->l2_decay_ = config.l2_decay();
    (*rule)->l1_decay_ = config.l1_decay();
  }
  if (!rule.ok() || !config.has_schedule()) return rule;
  LrSchedule schedule = ScheduleOf(config.schedule());
  const int64_t begin = config.schedule().begin();
  if (auto first = LrAtStep(schedule, static_cast<double>(begin)); !first.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.schedule: ", first.status().message()));
  }
  (*rule)->schedule_ = std::move(schedule);
  (*rule)->next_step_.store(begin);
  return rule;
}

}  // namespace fleet::ps
