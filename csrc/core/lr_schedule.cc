#include "core/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fleet {
namespace {

constexpr double kPi = 3.14159265358979323846;

absl::Status CheckPositive(const LrSchedule& s, const char* field, double value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(s.name, ": ", field, " must be positive, got ", value));
}

}  // namespace

absl::StatusOr<double> LrAtStep(const LrSchedule& s, double step) {
  const double lr = s.learning_rate;
  if (s.name == "exponential_decay" || s.name == "natural_exp_decay" ||
      s.name == "inverse_time_decay") {
    if (auto status = CheckPositive(s, "decay_steps", s.decay_steps); !status.ok()) return status;
    double div = step / s.decay_steps;
    if (s.staircase) div = std::floor(div);
    if (s.name == "exponential_decay") return lr * std::pow(s.decay_rate, div);
    if (s.name == "natural_exp_decay") return lr * std::exp(-s.decay_rate * div);
    return lr / (1 + s.decay_rate * div);
  }
  if (s.name == "piecewise_decay") {
    if (s.values.size() != s.boundaries.size() + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("piecewise_decay needs one value more than boundaries, got ",
                       s.values.size(), " values and ", s.boundaries.size(), " boundaries"));
    }
    for (size_t i = 0; i < s.boundaries.size(); ++i) {
      if (step < s.boundaries[i]) return s.values[i];
    }
    return s.values.back();
  }
  if (s.name == "noam_decay") {
    if (auto status = CheckPositive(s, "d_model", s.d_model); !status.ok()) return status;
    if (auto status = CheckPositive(s, "warmup_steps", s.warmup_steps); !status.ok()) return status;
    const double t = std::max(step, 1.0);  // the counter starts at 1; never divide by zero
    return lr * std::pow(s.d_model, -0.5) *
           std::min(std::pow(t, -0.5), t * std::pow(s.warmup_steps, -1.5));
  }
  if (s.name == "polynomial_decay") {
    if (auto status = CheckPositive(s, "decay_steps", s.decay_steps); !status.ok()) return status;
    double decay_steps = s.decay_steps;
    double t = step;
    if (s.cycle) {
      decay_steps *= std::max(std::ceil(step / decay_steps), 1.0);
    } else {
      t = std::min(step, decay_steps);
    }
    return (lr - s.end_learning_rate) * std::pow(1 - t / decay_steps, s.power) +
           s.end_learning_rate;
  }
  if (s.name == "cosine_decay") {
    if (auto status = CheckPositive(s, "step_each_epoch", s.step_each_epoch); !status.ok()) {
      return status;
    }
    if (auto status = CheckPositive(s, "epochs", s.epochs); !status.ok()) return status;
    const double epoch = std::floor(step / s.step_each_epoch);
    return lr * 0.5 * (std::cos(epoch * kPi / s.epochs) + 1);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown schedule '", s.name,
                   "'; known: exponential_decay, natural_exp_decay, inverse_time_decay, "
                   "piecewise_decay, noam_decay, polynomial_decay, cosine_decay"));
}

}  // namespace fleet
