// Ops between values and positions: one_hot (ids to rows of zeros and a one) and top_k (the k
// largest values of each row and where they were), as PaddlePaddle fluid defines them.

#include <algorithm>
#include <numeric>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// ---- one_hot ----------------------------------------------------------------------------------

// X holds int ids of shape [..., 1]; Out is float32 [..., depth].
Shape OneHotShape(const Shape& x, int64_t depth) {
  Shape out = x;
  if (!out.empty() && out.back() == 1) out.pop_back();
  out.push_back(depth);
  return out;
}

void InferOneHot(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  const int64_t depth = ctx->Attr<int64_t>("depth");
  FLEET_ENFORCE(depth > 0, InvalidArgument, "op ", ctx->op().Describe(), ": depth (", depth,
                ") must be positive");
  info.shape = OneHotShape(info.shape, depth);
  info.dtype = DType::kFloat32;
  ctx->SetOutput("Out", info);
}

// An id outside [0, depth) is an error naming it, or, with allow_out_of_range, a row of zeros.
void OneHotKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const int64_t depth = ctx.Attr<int64_t>("depth");
  const bool allow_out_of_range = ctx.Attr<bool>("allow_out_of_range", false);
  std::vector<int64_t> ids(x.numel());
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      std::copy(x.data<T>(), x.data<T>() + x.numel(), ids.begin());
    } else {
      ctx.Fail(absl::StrCat("X must hold integer ids, got ", DTypeName(x.dtype())));
    }
  });
  LoDTensor out(Tensor(DType::kFloat32, OneHotShape(x.shape(), depth)));
  float* dst = out.mutable_data<float>();
  std::fill(dst, dst + out.numel(), 0.f);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0 && ids[i] < depth) {
      dst[i * depth + ids[i]] = 1.f;
    } else {
      FLEET_KERNEL_ENFORCE(ctx, allow_out_of_range, "id ", ids[i], " (element ", i,
                           " of X) is outside [0, depth=", depth, ")");
    }
  }
  out.set_lod(x.lod());
  *ctx.Output("Out") = out;
}

// ---- top_k ------------------------------------------------------------------------------------

void InferTopK(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  const int64_t k = ctx->Attr<int64_t>("k", 1);
  FLEET_ENFORCE(!info.shape.empty() && k >= 1 && (info.shape.back() < 0 || k <= info.shape.back()),
                InvalidArgument, "op ", ctx->op().Describe(), ": k=", k,
                " must be in [1, the last dimension of X ", ShapeToString(info.shape), "]");
  info.shape.back() = k;
  ctx->SetOutput("Out", info);
  info.dtype = DType::kInt64;
  ctx->SetOutput("Indices", info);
}

// Each row's k largest values in descending order; ties keep the lower index first.
void TopKKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const int64_t k = ctx.Attr<int64_t>("k", 1);
  FLEET_KERNEL_ENFORCE(ctx, x.rank() >= 1 && k >= 1 && k <= x.dim(x.rank() - 1), "k=", k,
                       " must be in [1, the last dimension of X ", ShapeToString(x.shape()), "]");
  const float* in = FloatData(ctx, "X");
  const int64_t width = x.dim(x.rank() - 1);
  const int64_t rows = width == 0 ? 0 : x.numel() / width;
  Shape shape = x.shape();
  shape.back() = k;
  LoDTensor* out = ctx.Output("Out");
  LoDTensor* indices = ctx.Output("Indices");
  out->Resize(shape);
  indices->Resize(shape);
  float* values = out->mutable_data<float>();
  int64_t* where = indices->mutable_data<int64_t>();
  std::vector<int64_t> order(width);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * width;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int64_t a, int64_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int64_t j = 0; j < k; ++j) {
      values[r * k + j] = row[order[j]];
      where[r * k + j] = order[j];
    }
  }
  out->set_lod(x.lod());
  indices->set_lod(x.lod());
}

// dX is Out@GRAD at the chosen positions and zero elsewhere.
void TopKGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& indices = ctx.Input("Indices");
  const float* g = FloatData(ctx, "Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == indices.numel(), "Out@GRAD has shape ",
                       ShapeToString(ctx.Input("Out@GRAD").shape()), " but Indices has ",
                       ShapeToString(indices.shape()));
  const int64_t width = x.dim(x.rank() - 1);
  const int64_t k = indices.dim(indices.rank() - 1);
  const int64_t* where = indices.data<int64_t>();
  float* dx = ResizeLike(x, ctx.Output("X@GRAD"));
  std::fill(dx, dx + x.numel(), 0.f);
  for (int64_t i = 0; i < indices.numel(); ++i) dx[(i / k) * width + where[i]] += g[i];
}

}  // namespace

void RegisterIndexOps(OpRegistry* registry) {
  OpInfo& one_hot = registry->Register("one_hot");
  one_hot.infer_shape = InferOneHot;
  SetCpuKernel(&one_hot, OneHotKernel);

  OpInfo& top_k = registry->Register("top_k");
  top_k.infer_shape = InferTopK;
  top_k.grad_maker = framework::SingleGradOp({"X"}, {"Indices"}, {"Out"}, {"X"});
  SetCpuKernel(&top_k, TopKKernel);
  OpInfo& top_k_grad = registry->Register("top_k_grad");
  top_k_grad.infer_shape = SameAs("X", "X@GRAD");
  SetCpuKernel(&top_k_grad, TopKGradKernel);
}

}  // namespace fleet::operators
