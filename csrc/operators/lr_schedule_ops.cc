// Learning-rate schedules, built as fluid builds them: a persistable step counter that an
// `increment` op advances once per run, and an op that computes the rate from the counter, so
// that the optimizer ops read an ordinary learning-rate variable.
//
// lr_decay: Out = the rate at step Step (a one-element float32 tensor) for attribute `schedule`,
// with the formulas of fluid.layers.learning_rate_scheduler (Paddle 1.x):
//   exponential_decay  lr * decay_rate ^ (step / decay_steps)
//   natural_exp_decay  lr * exp(-decay_rate * step / decay_steps)
//   inverse_time_decay lr / (1 + decay_rate * step / decay_steps)
//     (step / decay_steps floored when staircase)
//   piecewise_decay    values[i] for the first boundaries[i] > step, else values.back()
//   noam_decay         lr * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)
//                      (Vaswani et al., "Attention is all you need", 2017, eq. 3)
//   polynomial_decay   (lr - end_lr) * (1 - step / decay_steps)^power + end_lr, step capped at
//                      decay_steps, or with cycle decay_steps grown to the next multiple
//   cosine_decay       lr * (cos(floor(step / step_each_epoch) * pi / epochs) + 1) / 2
// None has a gradient.

#include <algorithm>
#include <cmath>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

constexpr double kPi = 3.14159265358979323846;

// ---- increment --------------------------------------------------------------------------------

// Out = X + step for a one-element numeric X (in place when Out is X).
void IncrementKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  FLEET_KERNEL_ENFORCE(ctx, x.numel() == 1, "X '", ctx.InputName("X"),
                       "' must hold one element, got shape ", ShapeToString(x.shape()));
  const double step = ctx.Attr<float>("step", 1.f);
  LoDTensor out(Tensor(x.dtype(), x.shape()));
  void* dst = out.mutable_data(x.dtype());
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.Fail("X must be numeric, got bool");
    } else {
      *static_cast<T*>(dst) = static_cast<T>(x.data<T>()[0] + step);
    }
  });
  *ctx.Output("Out") = out;
}

// ---- lr_decay ---------------------------------------------------------------------------------

double Positive(const ExecutionContext& ctx, const std::string& name) {
  const double v = ctx.Attr<float>(name);
  FLEET_KERNEL_ENFORCE(ctx, v > 0, "attribute ", name, " (", v, ") must be positive");
  return v;
}

double DecayRate(const ExecutionContext& ctx, const std::string& schedule, double step) {
  const double lr = ctx.Attr<float>("learning_rate", 1.f);
  if (schedule == "exponential_decay" || schedule == "natural_exp_decay" ||
      schedule == "inverse_time_decay") {
    double div = step / Positive(ctx, "decay_steps");
    if (ctx.Attr<bool>("staircase", false)) div = std::floor(div);
    const double rate = ctx.Attr<float>("decay_rate");
    if (schedule == "exponential_decay") return lr * std::pow(rate, div);
    if (schedule == "natural_exp_decay") return lr * std::exp(-rate * div);
    return lr / (1 + rate * div);
  }
  if (schedule == "piecewise_decay") {
    const auto boundaries = ctx.Attr<std::vector<float>>("boundaries");
    const auto values = ctx.Attr<std::vector<float>>("values");
    FLEET_KERNEL_ENFORCE(ctx, values.size() == boundaries.size() + 1, "piecewise_decay needs one ",
                         "value more than boundaries, got ", values.size(), " values and ",
                         boundaries.size(), " boundaries");
    for (size_t i = 0; i < boundaries.size(); ++i) {
      if (step < boundaries[i]) return values[i];
    }
    return values.back();
  }
  if (schedule == "noam_decay") {
    const double warmup = Positive(ctx, "warmup_steps");
    const double s = std::max(step, 1.0);  // the counter starts at 1; never divide by zero
    return lr * std::pow(Positive(ctx, "d_model"), -0.5) *
           std::min(std::pow(s, -0.5), s * std::pow(warmup, -1.5));
  }
  if (schedule == "polynomial_decay") {
    double decay_steps = Positive(ctx, "decay_steps");
    const double end_lr = ctx.Attr<float>("end_learning_rate", 1e-4f);
    const double power = ctx.Attr<float>("power", 1.f);
    double s = step;
    if (ctx.Attr<bool>("cycle", false)) {
      decay_steps *= std::max(std::ceil(step / decay_steps), 1.0);
    } else {
      s = std::min(step, decay_steps);
    }
    return (lr - end_lr) * std::pow(1 - s / decay_steps, power) + end_lr;
  }
  if (schedule == "cosine_decay") {
    const double epoch = std::floor(step / Positive(ctx, "step_each_epoch"));
    return lr * 0.5 * (std::cos(epoch * kPi / Positive(ctx, "epochs")) + 1);
  }
  ctx.Fail(absl::StrCat("unknown schedule '", schedule,
                        "'; known: exponential_decay, natural_exp_decay, inverse_time_decay, "
                        "piecewise_decay, noam_decay, polynomial_decay, cosine_decay"));
}

void LrDecayKernel(const ExecutionContext& ctx) {
  const LoDTensor& step_t = ctx.Input("Step");
  FLEET_KERNEL_ENFORCE(ctx, step_t.numel() == 1 && step_t.dtype() == DType::kFloat32, "Step '",
                       ctx.InputName("Step"), "' must be a float32 tensor with one element, got ",
                       DTypeName(step_t.dtype()), " of shape ", ShapeToString(step_t.shape()));
  const double rate = DecayRate(ctx, ctx.Attr<std::string>("schedule"), step_t.data<float>()[0]);
  LoDTensor* out = ctx.Output("Out");
  out->Resize({1});
  out->set_lod({});
  *out->mutable_data<float>() = static_cast<float>(rate);
}

void InferScalar(InferShapeContext* ctx) {
  VarInfo info;
  info.shape = {1};
  ctx->SetOutput("Out", info);
}

}  // namespace

void RegisterLrScheduleOps(OpRegistry* registry) {
  OpInfo& increment = registry->Register("increment");
  increment.infer_shape = SameAs("X", "Out");
  SetCpuKernel(&increment, IncrementKernel);

  OpInfo& decay = registry->Register("lr_decay");
  decay.infer_shape = InferScalar;
  SetCpuKernel(&decay, LrDecayKernel);
}

}  // namespace fleet::operators
