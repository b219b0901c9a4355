// elementwise_add / _sub / _mul / _div with Paddle's broadcasting: Y's dimensions line up with a
// contiguous run of X's starting at `axis` (axis = -1 aligns Y with the end of X), and a Y
// dimension of 1 within that run broadcasts. Out has X's shape and lod. The gradient of Y sums
// over the dimensions it was broadcast along. The comparison ops broadcast alike and give bool.

#include <cmath>
#include <functional>
#include <type_traits>

#include "operators/broadcast.h"
#include "operators/grad_helpers.h"
#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// Sets `padded` to Y's shape padded with 1s to X's rank per `axis`; returns false with `why` set
// when Y does not line up with X. -1 (unknown at compile time) matches anything.
bool PadY(const Shape& x, const Shape& y, int axis, Shape* padded, std::string* why) {
  const int rx = static_cast<int>(x.size());
  const int ry = static_cast<int>(y.size());
  if (ry > rx) {
    *why = absl::StrCat("Y has more dimensions (", ry, ") than X (", rx, ")");
    return false;
  }
  const int start = axis < 0 ? rx - ry + axis + 1 : axis;
  if (start < 0 || start + ry > rx) {
    *why = absl::StrCat("axis=", axis, " puts Y's ", ry, " dimension(s) outside X's ", rx);
    return false;
  }
  padded->assign(rx, 1);
  for (int i = 0; i < ry; ++i) {
    const int64_t xd = x[start + i];
    const int64_t yd = y[i];
    if (yd != xd && yd != 1 && yd != -1 && xd != -1) {
      *why = absl::StrCat("Y dimension ", i, " (", yd, ") must equal X dimension ", start + i, " (",
                          xd, ") or be 1");
      return false;
    }
    (*padded)[start + i] = yd;
  }
  return true;
}

std::string MismatchMessage(const std::string& type, const Shape& x, const Shape& y, int axis,
                            const std::string& why) {
  return absl::StrCat(type, ": Y's shape ", ShapeToString(y), " does not broadcast to X's shape ",
                      ShapeToString(x), " at axis=", axis, ": ", why);
}

void InferElementwise(InferShapeContext* ctx) {
  const VarInfo& x = ctx->Input("X");
  const VarInfo& y = ctx->Input("Y");
  const int axis = ctx->Attr<int32_t>("axis", -1);
  Shape padded;
  std::string why;
  FLEET_ENFORCE(PadY(x.shape, y.shape, axis, &padded, &why), InvalidArgument, "op ",
                ctx->op().Describe(), ": ",
                MismatchMessage(ctx->op().type, x.shape, y.shape, axis, why));
  FLEET_ENFORCE(x.dtype == y.dtype, InvalidArgument, "op ", ctx->op().Describe(), ": X is ",
                DTypeName(x.dtype), " but Y is ", DTypeName(y.dtype));
  ctx->SetOutput("Out", x);
}

// Y's padded shape at run time, failing with both shapes named.
Shape RuntimePaddedY(const ExecutionContext& ctx, const Tensor& x, const Tensor& y) {
  const int axis = ctx.Attr<int32_t>("axis", -1);
  Shape padded;
  std::string why;
  if (!PadY(x.shape(), y.shape(), axis, &padded, &why)) {
    ctx.Fail(MismatchMessage(ctx.type(), x.shape(), y.shape(), axis, why));
  }
  FLEET_KERNEL_ENFORCE(ctx, x.dtype() == y.dtype(), "X is ", DTypeName(x.dtype()), " but Y is ",
                       DTypeName(y.dtype()));
  return padded;
}

struct Add {
  template <typename T>
  T operator()(T x, T y) const {
    return x + y;
  }
  static float Dx(float, float, float dout) { return dout; }
  static float Dy(float, float, float dout) { return dout; }
  static constexpr bool kDxIsDout = true;
};
struct Sub {
  template <typename T>
  T operator()(T x, T y) const {
    return x - y;
  }
  static float Dx(float, float, float dout) { return dout; }
  static float Dy(float, float, float dout) { return -dout; }
  static constexpr bool kDxIsDout = true;
};
struct Mul {
  template <typename T>
  T operator()(T x, T y) const {
    return x * y;
  }
  static float Dx(float, float y, float dout) { return dout * y; }
  static float Dy(float x, float, float dout) { return dout * x; }
  static constexpr bool kDxIsDout = false;
};
struct Div {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      // min / -1 overflows and traps on x86; negate in unsigned arithmetic (wraps) instead.
      if (y == T(-1)) return static_cast<T>(std::make_unsigned_t<T>(0) - x);
    }
    return x / y;
  }
  static float Dx(float, float y, float dout) { return dout / y; }
  static float Dy(float x, float y, float dout) { return -dout * x / (y * y); }
  static constexpr bool kDxIsDout = false;
};

template <typename T, typename Op>
void Forward(const ExecutionContext& ctx, const LoDTensor& x, const LoDTensor& y,
             const Shape& padded, LoDTensor* out) {
  const T* xs = x.data<T>();
  const T* ys = y.data<T>();
  if constexpr (std::is_integral_v<T> && std::is_same_v<Op, Div>) {
    for (int64_t i = 0; i < y.numel(); ++i) {
      FLEET_KERNEL_ENFORCE(ctx, ys[i] != 0, "integer division by zero: Y[", i, "] is 0");
    }
  }
  BroadcastPlan plan(x.shape(), padded);
  LoD lod = x.lod();
  out->Resize(x.shape());
  T* os = out->mutable_data<T>();
  out->set_lod(std::move(lod));
  Op op;
  plan.ForEachRun([&](int64_t f, int64_t p, int64_t n, bool contiguous) {
    if (contiguous) {
      for (int64_t i = 0; i < n; ++i) os[f + i] = op(xs[f + i], ys[p + i]);
    } else {
      const T yv = ys[p];
      for (int64_t i = 0; i < n; ++i) os[f + i] = op(xs[f + i], yv);
    }
  });
}

template <typename Op>
void ForwardKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const Shape padded = RuntimePaddedY(ctx, x, y);
  LoDTensor* out = ctx.Output("Out");
  // Writing over Y while reading it broadcast would be wrong: compute aside in that case.
  LoDTensor scratch;
  LoDTensor* target = out == &y ? &scratch : out;
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.Fail("bool tensors are not supported; cast X and Y to a numeric dtype first");
    } else {
      Forward<T, Op>(ctx, x, y, padded, target);
    }
  });
  if (target != out) *out = scratch;
}

template <typename Op>
void GradKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const LoDTensor& dout = ctx.Input("Out@GRAD");
  const Shape padded = RuntimePaddedY(ctx, x, y);
  FLEET_KERNEL_ENFORCE(ctx, dout.shape() == x.shape(), "Out@GRAD has shape ",
                       ShapeToString(dout.shape()), " but X has ", ShapeToString(x.shape()));
  const float* xs = FloatData(ctx, "X");
  const float* ys = FloatData(ctx, "Y");
  const float* g = FloatData(ctx, "Out@GRAD");
  BroadcastPlan plan(x.shape(), padded);
  LoDTensor* dx_tensor = ctx.HasOutput("X@GRAD") ? ctx.Output("X@GRAD") : nullptr;
  if (Op::kDxIsDout && dx_tensor != nullptr) {
    // dX is dOut, element for element (Out has X's shape): X@GRAD shares Out@GRAD's memory
    // instead of copying an activation-sized tensor, as Paddle's in-place elementwise_add_grad
    // does. Out@GRAD is not read again in the step, and the next step rewrites both.
    if (dx_tensor != &dout) {
      dx_tensor->ShareDataWith(dout);
      dx_tensor->set_lod(x.lod());
    }
  } else if (dx_tensor != nullptr) {
    float* dx = ResizeLike(x, dx_tensor);
    plan.ForEachRun([&](int64_t f, int64_t p, int64_t n, bool contiguous) {
      for (int64_t i = 0; i < n; ++i) {
        dx[f + i] = Op::Dx(xs[f + i], ys[contiguous ? p + i : p], g[f + i]);
      }
    });
  }
  if (ctx.HasOutput("Y@GRAD")) {
    float* dy = ResizeLike(y, ctx.Output("Y@GRAD"));
    std::fill(dy, dy + y.numel(), 0.f);
    plan.ForEachRun([&](int64_t f, int64_t p, int64_t n, bool contiguous) {
      if (contiguous) {
        for (int64_t i = 0; i < n; ++i) dy[p + i] += Op::Dy(xs[f + i], ys[p + i], g[f + i]);
      } else {
        const float y = ys[p];
        dy[p] += static_cast<float>(
            SumOf<double>(n, [&](int64_t i) { return Op::Dy(xs[f + i], y, g[f + i]); }));
      }
    });
  }
}

template <typename Op>
void RegisterElementwise(OpRegistry* registry, const std::string& type) {
  OpInfo& op = registry->Register(type);
  op.infer_shape = InferElementwise;
  op.grad_maker = framework::SingleGradOp({"X", "Y"}, {}, {"Out"}, {"X", "Y"});
  SetCpuKernel(&op, ForwardKernel<Op>);
  OpInfo& grad = registry->Register(type + "_grad");
  grad.infer_shape = GradsLikeInputs({"X", "Y"});
  SetCpuKernel(&grad, GradKernel<Op>);
}

// ---- less_than, less_equal, greater_than, greater_equal, equal, not_equal ----------------------
// Out is a bool tensor of X's shape; Y broadcasts as in the arithmetic ops. No gradient.

void InferCompare(InferShapeContext* ctx) {
  InferElementwise(ctx);
  VarInfo out = ctx->Input("X");
  out.dtype = DType::kBool;
  ctx->SetOutput("Out", out);
}

template <typename Cmp>
void CompareKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const Shape padded = RuntimePaddedY(ctx, x, y);
  LoDTensor out(Tensor(DType::kBool, x.shape()));
  bool* os = out.mutable_data<bool>();
  BroadcastPlan plan(x.shape(), padded);
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* xs = x.data<T>();
    const T* ys = y.data<T>();
    Cmp cmp;
    plan.ForEachRun([&](int64_t f, int64_t p, int64_t n, bool contiguous) {
      for (int64_t i = 0; i < n; ++i) os[f + i] = cmp(xs[f + i], ys[contiguous ? p + i : p]);
    });
  });
  out.set_lod(x.lod());
  *ctx.Output("Out") = out;
}

template <typename Cmp>
void RegisterCompare(OpRegistry* registry, const std::string& type) {
  OpInfo& op = registry->Register(type);
  op.infer_shape = InferCompare;
  SetCpuKernel(&op, CompareKernel<Cmp>);
}

}  // namespace

void RegisterElementwiseOps(OpRegistry* registry) {
  RegisterCompare<std::less<>>(registry, "less_than");
  RegisterCompare<std::less_equal<>>(registry, "less_equal");
  RegisterCompare<std::greater<>>(registry, "greater_than");
  RegisterCompare<std::greater_equal<>>(registry, "greater_equal");
  RegisterCompare<std::equal_to<>>(registry, "equal");
  RegisterCompare<std::not_equal_to<>>(registry, "not_equal");
  RegisterElementwise<Add>(registry, "elementwise_add");
  RegisterElementwise<Sub>(registry, "elementwise_sub");
  RegisterElementwise<Mul>(registry, "elementwise_mul");
  RegisterElementwise<Div>(registry, "elementwise_div");
}

}  // namespace fleet::operators
