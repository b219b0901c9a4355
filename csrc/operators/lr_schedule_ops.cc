// Learning-rate schedules, built as fluid builds them: a persistable step counter that an
// `increment` op advances once per run, and an op that computes the rate from the counter, so
// that the optimizer ops read an ordinary learning-rate variable.
//
// lr_decay: Out = the rate at step Step (a one-element float32 tensor) of the schedule its
// attributes describe, by the formulas of core/lr_schedule.h (shared with the parameter servers,
// which step a schedule themselves). None has a gradient.

#include "core/lr_schedule.h"
#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// ---- increment --------------------------------------------------------------------------------

// Out = X + step for a one-element numeric X. With Out = X (the step counter) the value changes
// in place: the counter is a persistable variable, which trainer threads share and which is
// never replaced while a pass runs (docs/design.md).
void IncrementKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  FLEET_KERNEL_ENFORCE(ctx, x.numel() == 1, "X '", ctx.InputName("X"),
                       "' must hold one element, got shape ", ShapeToString(x.shape()));
  const double step = ctx.Attr<float>("step", 1.f);
  LoDTensor* out = ctx.Output("Out");
  if (ctx.OutputVar("Out") != &ctx.InputVar("X")) {
    out->Resize(x.shape());
    out->set_lod({});
    out->mutable_data(x.dtype());
  }
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.Fail("X must be numeric, got bool");
    } else {
      const T value = static_cast<T>(x.data<T>()[0] + step);
      out->data<T>()[0] = value;
    }
  });
}

// ---- lr_decay ---------------------------------------------------------------------------------

std::vector<double> Doubles(const std::vector<float>& values) {
  return std::vector<double>(values.begin(), values.end());
}

// The schedule the op's attributes describe (absent ones keep LrSchedule's defaults).
LrSchedule ScheduleOf(const ExecutionContext& ctx) {
  LrSchedule s;
  s.name = ctx.Attr<std::string>("schedule");
  s.learning_rate = ctx.Attr<float>("learning_rate", 1.f);
  s.decay_steps = ctx.Attr<float>("decay_steps", 0.f);
  s.decay_rate = ctx.Attr<float>("decay_rate", 0.f);
  s.staircase = ctx.Attr<bool>("staircase", false);
  s.boundaries = Doubles(ctx.Attr<std::vector<float>>("boundaries", {}));
  s.values = Doubles(ctx.Attr<std::vector<float>>("values", {}));
  s.d_model = ctx.Attr<float>("d_model", 0.f);
  s.warmup_steps = ctx.Attr<float>("warmup_steps", 0.f);
  s.end_learning_rate = ctx.Attr<float>("end_learning_rate", 1e-4f);
  s.power = ctx.Attr<float>("power", 1.f);
  s.cycle = ctx.Attr<bool>("cycle", false);
  s.step_each_epoch = ctx.Attr<float>("step_each_epoch", 0.f);
  s.epochs = ctx.Attr<float>("epochs", 0.f);
  return s;
}

void LrDecayKernel(const ExecutionContext& ctx) {
  const LoDTensor& step_t = ctx.Input("Step");
  FLEET_KERNEL_ENFORCE(ctx, step_t.numel() == 1 && step_t.dtype() == DType::kFloat32, "Step '",
                       ctx.InputName("Step"), "' must be a float32 tensor with one element, got ",
                       DTypeName(step_t.dtype()), " of shape ", ShapeToString(step_t.shape()));
  const absl::StatusOr<double> rate = LrAtStep(ScheduleOf(ctx), step_t.data<float>()[0]);
  if (!rate.ok()) ctx.Fail(std::string(rate.status().message()));
  LoDTensor* out = ctx.Output("Out");
  out->Resize({1});
  out->set_lod({});
  *out->mutable_data<float>() = static_cast<float>(*rate);
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
