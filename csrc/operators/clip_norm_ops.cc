// clip (values bounded to [min, max]) and norm (Out = X / sqrt(sum(X^2 along axis) + epsilon),
// what fluid.layers.l2_normalize appends), with the attributes of PaddlePaddle fluid's ops.

#include <algorithm>
#include <cmath>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// ---- clip -------------------------------------------------------------------------------------

void ClipKernel(const ExecutionContext& ctx) {
  const float lo = ctx.Attr<float>("min");
  const float hi = ctx.Attr<float>("max");
  FLEET_KERNEL_ENFORCE(ctx, lo <= hi, "min (", lo, ") must not exceed max (", hi, ")");
  const LoDTensor& x = ctx.Input("X");
  const float* in = FloatData(ctx, "X");
  float* out = ResizeLike(x, ctx.Output("Out"));
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::min(std::max(in[i], lo), hi);
}

// dX = dOut where min < X < max, else 0 (a clipped value does not move with X).
void ClipGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const float lo = ctx.Attr<float>("min");
  const float hi = ctx.Attr<float>("max");
  const LoDTensor& x = ctx.Input("X");
  const float* in = FloatData(ctx, "X");
  const float* g = FloatData(ctx, "Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == x.numel(), "Out@GRAD has shape ",
                       ShapeToString(ctx.Input("Out@GRAD").shape()), " but X has ",
                       ShapeToString(x.shape()));
  float* dx = ResizeLike(x, ctx.Output("X@GRAD"));
  for (int64_t i = 0; i < x.numel(); ++i) dx[i] = (in[i] > lo && in[i] < hi) ? g[i] : 0.f;
}

// ---- norm -------------------------------------------------------------------------------------

// X seen as [outer, n, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

bool MakeAxisView(const Shape& shape, int64_t axis_attr, AxisView* view, int* axis) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t a = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (a < 0 || a >= rank) return false;
  *axis = static_cast<int>(a);
  for (int64_t d = 0; d < rank; ++d) {
    if (d < a) view->outer *= shape[d];
    if (d == a) view->n = shape[d];
    if (d > a) view->inner *= shape[d];
  }
  return true;
}

void InferNorm(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  const int64_t rank = static_cast<int64_t>(info.shape.size());
  int64_t axis = ctx->Attr<int64_t>("axis", -1);
  axis = axis < 0 ? axis + rank : axis;
  FLEET_ENFORCE(axis >= 0 && axis < rank, InvalidArgument, "op ", ctx->op().Describe(), ": axis ",
                ctx->Attr<int64_t>("axis", -1), " is out of range for X of shape ",
                ShapeToString(info.shape));
  ctx->SetOutput("Out", info);
  info.shape[axis] = 1;
  ctx->SetOutput("Norm", info);
}

AxisView NormView(const ExecutionContext& ctx, const Shape& shape, int* axis_out = nullptr) {
  AxisView view;
  int axis = 0;
  FLEET_KERNEL_ENFORCE(ctx, MakeAxisView(shape, ctx.Attr<int64_t>("axis", -1), &view, &axis),
                       "axis ", ctx.Attr<int64_t>("axis", -1), " is out of range for X of shape ",
                       ShapeToString(shape));
  if (axis_out != nullptr) *axis_out = axis;
  return view;
}

void NormKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  int axis = 0;
  const AxisView v = NormView(ctx, x.shape(), &axis);
  const float epsilon = ctx.Attr<float>("epsilon", 1e-10f);
  const float* in = FloatData(ctx, "X");
  Shape norm_shape = x.shape();
  norm_shape[axis] = 1;
  LoDTensor norm_t(Tensor(DType::kFloat32, norm_shape));
  float* norm = norm_t.mutable_data<float>();
  LoDTensor out_t(Tensor(DType::kFloat32, x.shape()));
  float* out = out_t.mutable_data<float>();
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const float* xs = in + o * v.n * v.inner + i;
      double sum = 0;
      for (int64_t j = 0; j < v.n; ++j) sum += double{xs[j * v.inner]} * xs[j * v.inner];
      const float nrm = static_cast<float>(std::sqrt(sum + epsilon));
      norm[o * v.inner + i] = nrm;
      for (int64_t j = 0; j < v.n; ++j) {
        out[o * v.n * v.inner + i + j * v.inner] = xs[j * v.inner] / nrm;
      }
    }
  }
  out_t.set_lod(x.lod());
  *ctx.Output("Out") = out_t;
  if (ctx.HasOutput("Norm")) *ctx.Output("Norm") = norm_t;
}

// With y = x / norm: dx = (dy - y * sum(dy * y along axis)) / norm.
void NormGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  const AxisView v = NormView(ctx, x.shape());
  const float* in = FloatData(ctx, "X");
  const float* norm = FloatData(ctx, "Norm");
  const float* g = FloatData(ctx, "Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == x.numel(), "Out@GRAD has shape ",
                       ShapeToString(ctx.Input("Out@GRAD").shape()), " but X has ",
                       ShapeToString(x.shape()));
  float* dx = ResizeLike(x, ctx.Output("X@GRAD"));
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t base = o * v.n * v.inner + i;
      const float nrm = norm[o * v.inner + i];
      double dot = 0;
      for (int64_t j = 0; j < v.n; ++j) {
        dot += double{g[base + j * v.inner]} * in[base + j * v.inner] / nrm;
      }
      for (int64_t j = 0; j < v.n; ++j) {
        const int64_t e = base + j * v.inner;
        dx[e] = static_cast<float>((g[e] - in[e] / nrm * dot) / nrm);
      }
    }
  }
}

}  // namespace

void RegisterClipNormOps(OpRegistry* registry) {
  OpInfo& clip = registry->Register("clip");
  clip.infer_shape = SameAs("X", "Out");
  clip.grad_maker = framework::SingleGradOp({"X"}, {}, {"Out"}, {"X"});
  SetCpuKernel(&clip, ClipKernel);
  OpInfo& clip_grad = registry->Register("clip_grad");
  clip_grad.infer_shape = SameAs("X", "X@GRAD");
  SetCpuKernel(&clip_grad, ClipGradKernel);

  OpInfo& norm = registry->Register("norm");
  norm.infer_shape = InferNorm;
  norm.grad_maker = framework::SingleGradOp({"X"}, {"Norm"}, {"Out"}, {"X"});
  SetCpuKernel(&norm, NormKernel);
  OpInfo& norm_grad = registry->Register("norm_grad");
  norm_grad.infer_shape = SameAs("X", "X@GRAD");
  SetCpuKernel(&norm_grad, NormGradKernel);
}

}  // namespace fleet::operators
