#pragma once
// Learning-rate schedules of fluid.layers (Paddle 1.x learning_rate_scheduler): one formula for
// the lr_decay op, which one process and collective jobs run, and for the parameter servers'
// tables, which step a schedule themselves. Rates at step s:
//   exponential_decay  lr * decay_rate ^ (s / decay_steps)
//   natural_exp_decay  lr * exp(-decay_rate * s / decay_steps)
//   inverse_time_decay lr / (1 + decay_rate * s / decay_steps)
//     (s / decay_steps floored when staircase)
//   piecewise_decay    values[i] for the first boundaries[i] > s, else values.back()
//   noam_decay         lr * d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5)
//                      (Vaswani et al., "Attention is all you need", 2017, eq. 3; s >= 1)
//   polynomial_decay   (lr - end_lr) * (1 - s / decay_steps)^power + end_lr, s capped at
//                      decay_steps, or with cycle decay_steps grown to the next multiple
//   cosine_decay       lr * (cos(floor(s / step_each_epoch) * pi / epochs) + 1) / 2

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fleet {

struct LrSchedule {
  std::string name;  // one of the schedules above
  double learning_rate = 1.0;
  double decay_steps = 0, decay_rate = 0;
  bool staircase = false;
  std::vector<double> boundaries, values;
  double d_model = 0, warmup_steps = 0;
  double end_learning_rate = 1e-4, power = 1.0;
  bool cycle = false;
  double step_each_epoch = 0, epochs = 0;
};

// The rate of `schedule` at `step`. InvalidArgument naming the field at fault for an unknown
// name, a non-positive length (decay_steps, warmup_steps, ...) or piecewise values that are
// not one more than the boundaries. Pure, so thread-safe.
absl::StatusOr<double> LrAtStep(const LrSchedule& schedule, double step);

}  // namespace fleet
