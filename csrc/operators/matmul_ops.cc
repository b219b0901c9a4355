// mul (the GEMM of fc: both inputs flattened to matrices) and matmul (2-D, batched, vectors,
// optional transposes and alpha), with gradients. Every product runs through blas::Gemm.

#include "operators/blas.h"
#include "operators/grad_helpers.h"
#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// Product of shape[begin, end); -1 when a dimension is unknown (compile time).
int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) {
    if (shape[i] < 0) return -1;
    p *= shape[i];
  }
  return p;
}

// ---- mul ------------------------------------------------------------------------------------

// X flattened at x_num_col_dims to [M, K], Y at y_num_col_dims to [K, N].
struct MulDims {
  int64_t m, k, n;
  Shape out;
};

// Returns false with `why` set when the attributes or the inner sizes do not fit.
bool PlanMul(const Shape& x, const Shape& y, int xnc, int ync, MulDims* dims, std::string* why) {
  if (xnc < 1 || xnc >= static_cast<int>(x.size())) {
    *why = absl::StrCat("x_num_col_dims=", xnc, " must be in [1, rank of X) for X of shape ",
                        ShapeToString(x));
    return false;
  }
  if (ync < 1 || ync >= static_cast<int>(y.size())) {
    *why = absl::StrCat("y_num_col_dims=", ync, " must be in [1, rank of Y) for Y of shape ",
                        ShapeToString(y));
    return false;
  }
  dims->m = Product(x, 0, xnc);
  dims->k = Product(x, xnc, x.size());
  const int64_t ky = Product(y, 0, ync);
  dims->n = Product(y, ync, y.size());
  if (dims->k >= 0 && ky >= 0 && dims->k != ky) {
    *why = absl::StrCat("X's shape ", ShapeToString(x), " flattened at x_num_col_dims=", xnc,
                        " has width ", dims->k, " but Y's shape ", ShapeToString(y),
                        " flattened at y_num_col_dims=", ync, " has height ", ky);
    return false;
  }
  dims->out.assign(x.begin(), x.begin() + xnc);
  dims->out.insert(dims->out.end(), y.begin() + ync, y.end());
  return true;
}

void InferMul(InferShapeContext* ctx) {
  VarInfo x = ctx->Input("X");
  const VarInfo& y = ctx->Input("Y");
  MulDims dims;
  std::string why;
  FLEET_ENFORCE(PlanMul(x.shape, y.shape, ctx->Attr<int32_t>("x_num_col_dims", 1),
                        ctx->Attr<int32_t>("y_num_col_dims", 1), &dims, &why),
                InvalidArgument, "op ", ctx->op().Describe(), ": mul: ", why);
  x.shape = dims.out;
  ctx->SetOutput("Out", x);
}

MulDims RuntimeMul(const ExecutionContext& ctx, const Tensor& x, const Tensor& y) {
  MulDims dims;
  std::string why;
  if (!PlanMul(x.shape(), y.shape(), ctx.Attr<int32_t>("x_num_col_dims", 1),
               ctx.Attr<int32_t>("y_num_col_dims", 1), &dims, &why)) {
    ctx.Fail(absl::StrCat("mul: ", why));
  }
  return dims;
}

void MulKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const MulDims d = RuntimeMul(ctx, x, y);
  const float* xs = FloatData(ctx, "X");
  const float* ys = FloatData(ctx, "Y");
  LoDTensor* out = ctx.Output("Out");
  LoD lod = x.lod();
  out->Resize(d.out);
  float* os = out->mutable_data<float>();
  out->set_lod(std::move(lod));
  blas::Gemm(false, false, d.m, d.n, d.k, 1.f, xs, ys, 0.f, os);
}

void MulGradKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const MulDims d = RuntimeMul(ctx, x, y);
  const float* g = FloatData(ctx, "Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == d.m * d.n, "Out@GRAD has shape ",
                       ShapeToString(ctx.Input("Out@GRAD").shape()), ", expected ",
                       ShapeToString(d.out));
  if (ctx.HasOutput("X@GRAD")) {
    float* dx = ResizeLike(x, ctx.Output("X@GRAD"));
    blas::Gemm(false, true, d.m, d.k, d.n, 1.f, g, FloatData(ctx, "Y"), 0.f, dx);
  }
  if (ctx.HasOutput("Y@GRAD")) {
    float* dy = ResizeLike(y, ctx.Output("Y@GRAD"));
    blas::Gemm(true, false, d.k, d.n, d.m, 1.f, FloatData(ctx, "X"), g, 0.f, dy);
  }
}

// ---- matmul ---------------------------------------------------------------------------------

// One operand as a (possibly batched) stored matrix; op() is its transpose when `trans`.
struct Operand {
  Shape batch;  // leading dimensions; empty when not batched
  int64_t rows = 0, cols = 0;
  bool trans = false;
  int64_t op_rows() const { return trans ? cols : rows; }
  int64_t op_cols() const { return trans ? rows : cols; }
  int64_t size() const { return rows * cols; }
};

// A 1-D X is a row vector [1, K] and a 1-D Y a column vector [K, 1], as in Paddle.
Operand MakeOperand(const Shape& s, bool trans, bool is_x) {
  Operand o;
  o.trans = trans;
  if (s.size() == 1) {
    o.rows = is_x ? 1 : s[0];
    o.cols = is_x ? s[0] : 1;
  } else {
    o.batch.assign(s.begin(), s.end() - 2);
    o.rows = s[s.size() - 2];
    o.cols = s[s.size() - 1];
  }
  return o;
}

struct MatmulPlan {
  Operand x, y;
  Shape out;
  int64_t batches = 1;  // GEMMs to run
};

bool PlanMatmul(const Shape& xs, const Shape& ys, bool tx, bool ty, MatmulPlan* plan,
                std::string* why) {
  if (xs.empty() || ys.empty()) {
    *why = "X and Y need at least one dimension";
    return false;
  }
  plan->x = MakeOperand(xs, tx, true);
  plan->y = MakeOperand(ys, ty, false);
  const Operand& x = plan->x;
  const Operand& y = plan->y;
  const int64_t kx = x.op_cols(), ky = y.op_rows();
  if (kx >= 0 && ky >= 0 && kx != ky) {
    *why = absl::StrCat("X's shape ", ShapeToString(xs), " (transpose_X=", tx, ") and Y's shape ",
                        ShapeToString(ys), " (transpose_Y=", ty, ") have different inner sizes ",
                        kx, " and ", ky);
    return false;
  }
  Shape batch = x.batch.empty() ? y.batch : x.batch;
  if (!x.batch.empty() && !y.batch.empty()) {
    bool same = x.batch.size() == y.batch.size();
    for (size_t i = 0; same && i < batch.size(); ++i) {
      same = x.batch[i] == y.batch[i] || x.batch[i] < 0 || y.batch[i] < 0;
      if (batch[i] < 0) batch[i] = y.batch[i];
    }
    if (!same) {
      *why = absl::StrCat("X's shape ", ShapeToString(xs), " and Y's shape ", ShapeToString(ys),
                          " have different batch dimensions");
      return false;
    }
  }
  plan->out = batch;
  plan->out.push_back(x.op_rows());
  plan->out.push_back(y.op_cols());
  if (xs.size() == 1 && plan->out[plan->out.size() - 2] == 1) {
    plan->out.erase(plan->out.end() - 2);
  }
  if (ys.size() == 1 && plan->out.back() == 1) plan->out.pop_back();
  if (plan->out.empty()) plan->out.push_back(1);
  plan->batches = Product(batch, 0, batch.size());
  return true;
}

void InferMatmul(InferShapeContext* ctx) {
  VarInfo x = ctx->Input("X");
  const VarInfo& y = ctx->Input("Y");
  MatmulPlan plan;
  std::string why;
  FLEET_ENFORCE(PlanMatmul(x.shape, y.shape, ctx->Attr<bool>("transpose_X", false),
                           ctx->Attr<bool>("transpose_Y", false), &plan, &why),
                InvalidArgument, "op ", ctx->op().Describe(), ": matmul: ", why);
  x.shape = plan.out;
  x.lod_level = 0;
  ctx->SetOutput("Out", x);
}

MatmulPlan RuntimeMatmul(const ExecutionContext& ctx, const Tensor& x, const Tensor& y) {
  MatmulPlan plan;
  std::string why;
  if (!PlanMatmul(x.shape(), y.shape(), ctx.Attr<bool>("transpose_X", false),
                  ctx.Attr<bool>("transpose_Y", false), &plan, &why)) {
    ctx.Fail(absl::StrCat("matmul: ", why));
  }
  // A batched, untransposed X against one matrix Y is a single GEMM on [batches * rows, cols]:
  // the batches lie back to back, and so do those of Out and of the gradients.
  if (!plan.x.batch.empty() && plan.y.batch.empty() && !plan.x.trans) {
    plan.x.rows *= plan.batches;
    plan.x.batch.clear();
    plan.batches = 1;
  }
  return plan;
}

void MatmulKernel(const ExecutionContext& ctx) {
  const LoDTensor& xt = ctx.Input("X");
  const LoDTensor& yt = ctx.Input("Y");
  const MatmulPlan p = RuntimeMatmul(ctx, xt, yt);
  const float* xs = FloatData(ctx, "X");
  const float* ys = FloatData(ctx, "Y");
  const float alpha = ctx.Attr<float>("alpha", 1.f);
  LoDTensor* out = ctx.Output("Out");
  out->Resize(p.out);
  out->set_lod({});
  float* os = out->mutable_data<float>();
  const int64_t m = p.x.op_rows(), n = p.y.op_cols(), k = p.x.op_cols();
  for (int64_t b = 0; b < p.batches; ++b) {
    const float* xb = xs + (p.x.batch.empty() ? 0 : b * p.x.size());
    const float* yb = ys + (p.y.batch.empty() ? 0 : b * p.y.size());
    blas::Gemm(p.x.trans, p.y.trans, m, n, k, alpha, xb, yb, 0.f, os + b * m * n);
  }
}

// dX = alpha * dOut op(Y)^T (stored transposed when transpose_X), and dY = alpha * op(X)^T dOut
// (likewise); an operand used by every batch sums its gradient over the batches.
void MatmulGradKernel(const ExecutionContext& ctx) {
  const LoDTensor& xt = ctx.Input("X");
  const LoDTensor& yt = ctx.Input("Y");
  const MatmulPlan p = RuntimeMatmul(ctx, xt, yt);
  const float* xs = FloatData(ctx, "X");
  const float* ys = FloatData(ctx, "Y");
  const float* g = FloatData(ctx, "Out@GRAD");
  const float alpha = ctx.Attr<float>("alpha", 1.f);
  const int64_t m = p.x.op_rows(), n = p.y.op_cols(), k = p.x.op_cols();
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == p.batches * m * n,
                       "Out@GRAD has shape ", ShapeToString(ctx.Input("Out@GRAD").shape()),
                       ", expected ", ShapeToString(p.out));
  const bool tx = p.x.trans, ty = p.y.trans;
  const bool xb = !p.x.batch.empty(), yb = !p.y.batch.empty();
  float* dx = ctx.HasOutput("X@GRAD") ? ResizeLike(xt, ctx.Output("X@GRAD")) : nullptr;
  float* dy = ctx.HasOutput("Y@GRAD") ? ResizeLike(yt, ctx.Output("Y@GRAD")) : nullptr;
  for (int64_t b = 0; b < p.batches; ++b) {
    const float* xb_data = xs + (xb ? b * p.x.size() : 0);
    const float* yb_data = ys + (yb ? b * p.y.size() : 0);
    const float* gb = g + b * m * n;
    if (dx != nullptr) {
      float* target = dx + (xb ? b * p.x.size() : 0);
      const float beta = (xb || b == 0) ? 0.f : 1.f;
      if (!tx) {
        blas::Gemm(false, !ty, m, k, n, alpha, gb, yb_data, beta, target);
      } else {
        blas::Gemm(ty, true, k, m, n, alpha, yb_data, gb, beta, target);
      }
    }
    if (dy != nullptr) {
      float* target = dy + (yb ? b * p.y.size() : 0);
      const float beta = (yb || b == 0) ? 0.f : 1.f;
      if (!ty) {
        blas::Gemm(!tx, false, k, n, m, alpha, xb_data, gb, beta, target);
      } else {
        blas::Gemm(true, tx, n, k, m, alpha, gb, xb_data, beta, target);
      }
    }
  }
}

void RegisterWithGrad(OpRegistry* registry, const std::string& type, framework::InferShapeFn infer,
                      framework::KernelFn forward, framework::KernelFn backward) {
  OpInfo& op = registry->Register(type);
  op.infer_shape = std::move(infer);
  op.grad_maker = framework::SingleGradOp({"X", "Y"}, {}, {"Out"}, {"X", "Y"});
  SetCpuKernel(&op, std::move(forward));
  OpInfo& grad = registry->Register(type + "_grad");
  grad.infer_shape = GradsLikeInputs({"X", "Y"});
  SetCpuKernel(&grad, std::move(backward));
}

}  // namespace

void RegisterMatmulOps(OpRegistry* registry) {
  RegisterWithGrad(registry, "mul", InferMul, MulKernel, MulGradKernel);
  RegisterWithGrad(registry, "matmul", InferMatmul, MatmulKernel, MatmulGradKernel);
}

}  // namespace fleet::operators
