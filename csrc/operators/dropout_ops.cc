// dropout, as Paddle fluid's op of the same name.
//
// Training zeroes each element with probability dropout_prob and records the kept elements in
// Mask (float32 0/1, X's shape). dropout_implementation picks where the 1/(1-p) rescaling goes:
//   downgrade_in_infer (default): train Out = X * Mask,           test Out = X * (1 - p)
//   upscale_in_train:             train Out = X * Mask / (1 - p), test Out = X
// The gradient applies the same factor to Out@GRAD. Randomness comes from the run's generator,
// or with fix_seed from a generator seeded with `seed` on every run, so that the op is
// deterministic. In test mode Mask is not written.

#include <random>
#include <vector>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

struct DropoutConfig {
  float prob;
  bool is_test;
  bool upscale_in_train;

  // The factor applied to kept elements in training, and to every element in test mode.
  float TrainScale() const {
    if (!upscale_in_train) return 1.f;
    return prob < 1.f ? 1.f / (1.f - prob) : 0.f;
  }
  float TestScale() const { return upscale_in_train ? 1.f : 1.f - prob; }
};

DropoutConfig ReadConfig(const ExecutionContext& ctx) {
  DropoutConfig c;
  c.prob = ctx.Attr<float>("dropout_prob", 0.5f);
  FLEET_KERNEL_ENFORCE(ctx, c.prob >= 0.f && c.prob <= 1.f, "dropout_prob ", c.prob,
                       " is outside [0, 1]");
  c.is_test = ctx.Attr<bool>("is_test", false);
  const std::string impl = ctx.Attr<std::string>("dropout_implementation", "downgrade_in_infer");
  FLEET_KERNEL_ENFORCE(ctx, impl == "downgrade_in_infer" || impl == "upscale_in_train",
                       "dropout_implementation '", impl,
                       "' is unknown; expected downgrade_in_infer or upscale_in_train");
  c.upscale_in_train = impl == "upscale_in_train";
  return c;
}

void Scale(const float* in, int64_t n, float factor, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * factor;
}

// Fills mask with 1 (kept, probability 1 - p) or 0 and writes out = x * mask * scale.
void Drop(std::mt19937_64& engine, const float* x, int64_t n, const DropoutConfig& c, float* mask,
          float* out) {
  const float scale = c.TrainScale();
  const double p = c.prob;
  for (int64_t i = 0; i < n; ++i) {
    // 53 random bits give a uniform double in [0, 1): p = 0 keeps all, p = 1 drops all.
    const double u = static_cast<double>(engine() >> 11) * 0x1.0p-53;
    const bool keep = u >= p;
    mask[i] = keep ? 1.f : 0.f;
    out[i] = keep ? x[i] * scale : 0.f;
  }
}

void DropoutKernel(const ExecutionContext& ctx) {
  const DropoutConfig c = ReadConfig(ctx);
  const LoDTensor& x_t = ctx.Input("X");
  const float* x = FloatData(ctx, "X");
  float* out = ResizeLike(x_t, ctx.Output("Out"));
  const int64_t n = x_t.numel();
  if (c.is_test) {
    Scale(x, n, c.TestScale(), out);
    return;
  }
  // Without a Mask output (inference-only callers) the mask goes to scratch memory.
  std::vector<float> scratch;
  float* mask = nullptr;
  if (ctx.HasOutput("Mask")) {
    mask = ResizeLike(x_t, ctx.Output("Mask"));
  } else {
    scratch.resize(n);
    mask = scratch.data();
  }
  if (ctx.Attr<bool>("fix_seed", false)) {
    std::mt19937_64 engine(static_cast<uint64_t>(ctx.Attr<int64_t>("seed", 0)));
    Drop(engine, x, n, c, mask, out);
  } else {
    Drop(ctx.rng(), x, n, c, mask, out);
  }
}

void DropoutGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const DropoutConfig c = ReadConfig(ctx);
  const LoDTensor& dout_t = ctx.Input("Out@GRAD");
  const float* dout = FloatData(ctx, "Out@GRAD");
  float* dx = ResizeLike(dout_t, ctx.Output("X@GRAD"));
  const int64_t n = dout_t.numel();
  if (c.is_test) {
    Scale(dout, n, c.TestScale(), dx);
    return;
  }
  FLEET_KERNEL_ENFORCE(ctx, ctx.HasInput("Mask"),
                       "the training-mode gradient needs Mask: bind the forward op's Mask output");
  const LoDTensor& mask_t = ctx.Input("Mask");
  FLEET_KERNEL_ENFORCE(ctx, mask_t.numel() == n, "Mask has shape ", ShapeToString(mask_t.shape()),
                       " but Out@GRAD has ", ShapeToString(dout_t.shape()));
  const float* mask = FloatData(ctx, "Mask");
  const float scale = c.TrainScale();
  for (int64_t i = 0; i < n; ++i) dx[i] = dout[i] * mask[i] * scale;
}

void InferDropout(InferShapeContext* ctx) {
  VarInfo x = ctx->Input("X");
  ctx->SetOutput("Out", x);
  if (ctx->HasOutput("Mask")) {
    x.dtype = DType::kFloat32;
    ctx->SetOutput("Mask", x);
  }
}

}  // namespace

void RegisterDropoutOps(OpRegistry* registry) {
  OpInfo& op = registry->Register("dropout");
  op.infer_shape = InferDropout;
  op.grad_maker = framework::SingleGradOp({}, {"Mask"}, {"Out"}, {"X"});
  SetCpuKernel(&op, DropoutKernel);
  OpInfo& grad = registry->Register("dropout_grad");
  grad.infer_shape = SameAs("Out@GRAD", "X@GRAD");
  SetCpuKernel(&grad, DropoutGradKernel);
}

}  // namespace fleet::operators
