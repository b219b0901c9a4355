#include "ps/table/update_rule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fleet::ps {
namespace {

class SgdRule : public UpdateRule {
 public:
  explicit SgdRule(float lr) : lr_(lr) {}
  size_t StateDim(size_t) const override { return 0; }
  void InitState(size_t, float*) const override {}
  void Update(size_t dim, float* w, float*, const float* g) const override {
    for (size_t i = 0; i < dim; ++i) w[i] -= lr_ * g[i];
  }

 private:
  float lr_;
};

// The fluid `adagrad` op: G += g^2; w -= lr * g / (sqrt(G) + epsilon).
class AdagradRule : public UpdateRule {
 public:
  AdagradRule(float lr, float epsilon, float initial) : lr_(lr), eps_(epsilon), init_(initial) {}
  size_t StateDim(size_t dim) const override { return dim; }
  void InitState(size_t dim, float* state) const override {
    for (size_t i = 0; i < dim; ++i) state[i] = init_;
  }
  void Update(size_t dim, float* w, float* acc, const float* g) const override {
    for (size_t i = 0; i < dim; ++i) {
      acc[i] += g[i] * g[i];
      w[i] -= lr_ * g[i] / (std::sqrt(acc[i]) + eps_);
    }
  }

 private:
  float lr_, eps_, init_;
};

// Adam (Kingma and Ba, "Adam: a method for stochastic optimization", ICLR 2015) in the form of
// the fluid `adam` op: bias correction folded into the step size, epsilon scaled to match.
// State: m[dim], v[dim], beta1^t, beta2^t (both start at beta, as Paddle's Beta*Pow).
class AdamRule : public UpdateRule {
 public:
  AdamRule(float lr, float beta1, float beta2, float eps)
      : lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {}
  size_t StateDim(size_t dim) const override { return 2 * dim + 2; }
  void InitState(size_t dim, float* state) const override {
    for (size_t i = 0; i < 2 * dim; ++i) state[i] = 0.0f;
    state[2 * dim] = beta1_;
    state[2 * dim + 1] = beta2_;
  }
  void Update(size_t dim, float* w, float* state, const float* g) const override {
    float* m = state;
    float* v = state + dim;
    float& beta1_pow = state[2 * dim];
    float& beta2_pow = state[2 * dim + 1];
    const float correction = std::sqrt(1.0f - beta2_pow);
    const float lr_t = lr_ * correction / (1.0f - beta1_pow);
    const float eps_t = eps_ * correction;
    for (size_t i = 0; i < dim; ++i) {
      m[i] = beta1_ * m[i] + (1.0f - beta1_) * g[i];
      v[i] = beta2_ * v[i] + (1.0f - beta2_) * g[i] * g[i];
      w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps_t);
    }
    beta1_pow *= beta1_;
    beta2_pow *= beta2_;
  }

 private:
  float lr_, beta1_, beta2_, eps_;
};

absl::Status CheckRange(const char* field, float value, float low, float high) {
  if (value >= low && value < high) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.", field, " must be in [", low, ", ", high, "), got ", value));
}

}  // namespace

absl::StatusOr<std::unique_ptr<UpdateRule>> MakeUpdateRule(const proto::OptimizerConfig& config) {
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

}  // namespace fleet::ps
