// Reductions: mean (of all elements, Out of shape [1]), reduce_sum and reduce_mean over a list
// of dimensions, and sum, which adds up several variables of one shape (LoDTensors,
// SelectedRows, or a mix) and is what autodiff uses to add the gradients of a variable that is
// used more than once.

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "operators/broadcast.h"
#include "operators/grad_helpers.h"
#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// ---- mean -----------------------------------------------------------------------------------

void InferMean(InferShapeContext* ctx) {
  VarInfo out = ctx->Input("X");
  out.shape = {1};
  out.lod_level = 0;
  ctx->SetOutput("Out", out);
}

void MeanKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const float* xs = FloatData(ctx, "X");
  const int64_t n = x.numel();
  FLEET_KERNEL_ENFORCE(ctx, n > 0, "X of shape ", ShapeToString(x.shape()),
                       " is empty; its mean is undefined");
  const double sum = SumOf<double>(n, [&](int64_t i) { return xs[i]; });
  LoDTensor* out = ctx.Output("Out");
  out->Resize({1});
  out->set_lod({});
  *out->mutable_data<float>() = static_cast<float>(sum / n);
}

void MeanGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  const float g = *FloatData(ctx, "Out@GRAD") / static_cast<float>(x.numel());
  float* dx = ResizeLike(x, ctx.Output("X@GRAD"));
  std::fill(dx, dx + x.numel(), g);
}

// ---- reduce_sum / reduce_mean ---------------------------------------------------------------

struct ReducePlan {
  Shape kept;  // X's shape with the reduced dimensions set to 1
  Shape out;
  bool keeps_dim0 = true;  // dimension 0 is not reduced, so X's lod still applies to Out
};

// Returns false with `why` set on an out-of-range dimension.
bool PlanReduce(const Shape& x, std::vector<int32_t> dims, bool keep_dim, bool reduce_all,
                ReducePlan* plan, std::string* why) {
  const int rank = static_cast<int>(x.size());
  std::vector<bool> reduced(rank, reduce_all || dims.empty());
  for (int32_t d : dims) {
    if (d < -rank || d >= rank) {
      *why = absl::StrCat("dim ", d, " is out of range for X of shape ", ShapeToString(x));
      return false;
    }
    reduced[d < 0 ? d + rank : d] = true;
  }
  plan->kept = x;
  plan->out.clear();
  for (int i = 0; i < rank; ++i) {
    if (reduced[i]) plan->kept[i] = 1;
    if (!reduced[i] || keep_dim) plan->out.push_back(plan->kept[i]);
  }
  if (plan->out.empty()) plan->out.push_back(1);
  plan->keeps_dim0 = rank > 0 && !reduced[0];
  return true;
}

bool PlanFromAttrs(const OpSpec& op, const Shape& x, ReducePlan* plan, std::string* why) {
  return PlanReduce(x, op.attrs.GetOr<std::vector<int32_t>>("dim", {}, op.type),
                    op.attrs.GetOr<bool>("keep_dim", false, op.type),
                    op.attrs.GetOr<bool>("reduce_all", false, op.type), plan, why);
}

void InferReduce(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  ReducePlan plan;
  std::string why;
  FLEET_ENFORCE(PlanFromAttrs(ctx->op(), info.shape, &plan, &why), InvalidArgument, "op ",
                ctx->op().Describe(), ": ", why);
  info.shape = plan.out;
  if (!plan.keeps_dim0) info.lod_level = 0;
  ctx->SetOutput("Out", info);
}

ReducePlan RuntimeReduce(const ExecutionContext& ctx, const Tensor& x) {
  ReducePlan plan;
  std::string why;
  if (!PlanFromAttrs(ctx.op(), x.shape(), &plan, &why)) ctx.Fail(why);
  return plan;
}

template <typename T>
void ReduceForward(const LoDTensor& x, const ReducePlan& plan, bool mean, LoDTensor* out) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  const T* xs = x.data<T>();
  BroadcastPlan walk(x.shape(), plan.kept);
  LoD lod = plan.keeps_dim0 ? x.lod() : LoD{};
  out->Resize(plan.out);
  T* os = out->mutable_data<T>();
  out->set_lod(std::move(lod));
  std::fill(os, os + walk.partial_numel(), T{0});
  walk.ForEachRun([&](int64_t f, int64_t p, int64_t n, bool contiguous) {
    if (contiguous) {
      for (int64_t i = 0; i < n; ++i) os[p + i] += xs[f + i];
    } else {
      os[p] += static_cast<T>(SumOf<Acc>(n, [&](int64_t i) { return xs[f + i]; }));
    }
  });
  const int64_t count = walk.partial_numel() == 0 ? 0 : x.numel() / walk.partial_numel();
  if (mean && count > 1) {
    for (int64_t i = 0; i < walk.partial_numel(); ++i) os[i] = static_cast<T>(os[i] / count);
  }
}

void ReduceKernel(const ExecutionContext& ctx, bool mean) {
  const LoDTensor& x = ctx.Input("X");
  const ReducePlan plan = RuntimeReduce(ctx, x);
  LoDTensor scratch;
  LoDTensor* out = ctx.Output("Out");
  LoDTensor* target = out == &x ? &scratch : out;
  VisitDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.Fail("bool tensors are not supported; cast X to a numeric dtype first");
    } else {
      ReduceForward<T>(x, plan, mean, target);
    }
  });
  if (target != out) *out = scratch;
}

// dX = dOut broadcast back over the reduced dimensions (divided by their size for the mean).
void ReduceGradKernel(const ExecutionContext& ctx, bool mean) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  const ReducePlan plan = RuntimeReduce(ctx, x);
  const float* g = FloatData(ctx, "Out@GRAD");
  BroadcastPlan walk(x.shape(), plan.kept);
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == walk.partial_numel(),
                       "Out@GRAD has shape ", ShapeToString(ctx.Input("Out@GRAD").shape()),
                       ", expected ", ShapeToString(plan.out));
  const int64_t count = walk.partial_numel() == 0 ? 1 : x.numel() / walk.partial_numel();
  const float scale = mean ? 1.f / static_cast<float>(std::max<int64_t>(count, 1)) : 1.f;
  float* dx = ResizeLike(x, ctx.Output("X@GRAD"));
  walk.ForEachRun([&](int64_t f, int64_t p, int64_t n, bool contiguous) {
    if (contiguous) {
      for (int64_t i = 0; i < n; ++i) dx[f + i] = g[p + i] * scale;
    } else {
      std::fill(dx + f, dx + f + n, g[p] * scale);
    }
  });
}

void RegisterReduce(OpRegistry* registry, const std::string& type, bool mean) {
  OpInfo& op = registry->Register(type);
  op.infer_shape = InferReduce;
  op.grad_maker = framework::SingleGradOp({"X"}, {}, {"Out"}, {"X"});
  SetCpuKernel(&op, [mean](const ExecutionContext& ctx) { ReduceKernel(ctx, mean); });
  OpInfo& grad = registry->Register(type + "_grad");
  grad.infer_shape = GradsLikeInputs({"X"});
  SetCpuKernel(&grad, [mean](const ExecutionContext& ctx) { ReduceGradKernel(ctx, mean); });
}

// ---- sum ------------------------------------------------------------------------------------

bool SameKnownShape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  }
  return true;
}

// All SelectedRows in: SelectedRows out. Otherwise a dense output shaped like the dense inputs.
void InferSum(InferShapeContext* ctx) {
  const size_t n = ctx->InputSize("X");
  FLEET_ENFORCE(n > 0, InvalidArgument, "op ", ctx->op().Describe(), ": sum needs inputs");
  const VarInfo* dense = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const VarInfo& in = ctx->Input("X", i);
    if (in.kind == framework::VarKind::kSelectedRows) continue;
    if (dense == nullptr) {
      dense = &in;
    } else {
      FLEET_ENFORCE(SameKnownShape(dense->shape, in.shape), InvalidArgument, "op ",
                    ctx->op().Describe(), ": sum: input ", i, " has shape ",
                    ShapeToString(in.shape), " but input 0 has shape ",
                    ShapeToString(dense->shape));
    }
  }
  ctx->SetOutput("Out", dense != nullptr ? *dense : ctx->Input("X", 0));
}

bool OutputAliasesAnInput(const ExecutionContext& ctx) {
  const Variable* out = ctx.OutputVar("Out");
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    if (&ctx.InputVar("X", i) == out) return true;
  }
  return false;
}

// Rows and values of every input, one after the other: duplicates are left for the consumer.
SelectedRows ConcatRows(const ExecutionContext& ctx) {
  SelectedRows result;
  const auto& first = ctx.InputVar("X", 0).Get<SelectedRows>();
  result.set_height(first.height());
  int64_t width = -1;
  std::vector<const SelectedRows*> inputs;
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    const auto& in = ctx.InputVar("X", i).Get<SelectedRows>();
    FLEET_KERNEL_ENFORCE(ctx, in.height() == first.height(), "SelectedRows input '",
                         ctx.InputName("X", i), "' has height ", in.height(), " but input '",
                         ctx.InputName("X", 0), "' has height ", first.height());
    inputs.push_back(&in);
    if (in.rows().empty()) continue;
    FLEET_KERNEL_ENFORCE(ctx, in.value().dtype() == DType::kFloat32 && in.value().rank() == 2,
                         "SelectedRows input '", ctx.InputName("X", i),
                         "' must hold a float32 [rows, width] value, got ",
                         DTypeName(in.value().dtype()), " ", ShapeToString(in.value().shape()));
    FLEET_KERNEL_ENFORCE(ctx, width < 0 || in.value().dim(1) == width, "SelectedRows input '",
                         ctx.InputName("X", i), "' has width ", in.value().dim(1),
                         ", earlier inputs have width ", width);
    width = in.value().dim(1);
    result.mutable_rows()->insert(result.mutable_rows()->end(), in.rows().begin(), in.rows().end());
  }
  const int64_t total = static_cast<int64_t>(result.rows().size());
  result.mutable_value()->Resize({total, std::max<int64_t>(width, 0)});
  float* dst = result.mutable_value()->mutable_data<float>();
  for (const SelectedRows* in : inputs) {
    if (in->rows().empty()) continue;
    std::memcpy(dst, in->value().data<float>(), in->value().nbytes());
    dst += in->value().numel();
  }
  return result;
}

template <typename T>
void AddDense(const std::vector<const LoDTensor*>& inputs, LoDTensor* out) {
  const int64_t n = inputs[0]->numel();
  LoD lod = inputs[0]->lod();
  const T* first = inputs[0]->data<T>();
  out->Resize(inputs[0]->shape());
  T* os = out->mutable_data<T>();
  if (os != first) std::memcpy(os, first, n * sizeof(T));
  out->set_lod(std::move(lod));
  for (size_t k = 1; k < inputs.size(); ++k) {
    const T* xs = inputs[k]->data<T>();
    for (int64_t i = 0; i < n; ++i) os[i] += xs[i];
  }
}

// Adds each row of `rows` into the dense float32 [height, width...] tensor `out`.
void ScatterAddRows(const ExecutionContext& ctx, size_t i, const SelectedRows& rows,
                    LoDTensor* out) {
  if (rows.rows().empty()) return;
  const int64_t height = out->rank() > 0 ? out->dim(0) : 0;
  const int64_t width = height > 0 ? out->numel() / height : 0;
  const Tensor& value = rows.value();
  FLEET_KERNEL_ENFORCE(ctx, out->dtype() == DType::kFloat32 && value.dtype() == DType::kFloat32,
                       "mixing SelectedRows and dense inputs needs float32 values");
  FLEET_KERNEL_ENFORCE(
      ctx,
      rows.height() == height && value.numel() == static_cast<int64_t>(rows.rows().size()) * width,
      "SelectedRows input '", ctx.InputName("X", i), "' (height ", rows.height(), ", value ",
      ShapeToString(value.shape()), ") does not fit the dense inputs of shape ",
      ShapeToString(out->shape()));
  float* dst = out->data<float>();
  const float* src = value.data<float>();
  for (size_t r = 0; r < rows.rows().size(); ++r) {
    const int64_t row = rows.rows()[r];
    FLEET_KERNEL_ENFORCE(ctx, row >= 0 && row < height, "SelectedRows input '",
                         ctx.InputName("X", i), "' has row ", row, " outside height ", height);
    float* d = dst + row * width;
    const float* s = src + r * width;
    for (int64_t j = 0; j < width; ++j) d[j] += s[j];
  }
}

void SumDense(const ExecutionContext& ctx, LoDTensor* out) {
  std::vector<const LoDTensor*> dense;
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    if (ctx.InputVar("X", i).IsType<SelectedRows>()) continue;
    const LoDTensor& in = ctx.Input("X", i);
    if (!dense.empty()) {
      FLEET_KERNEL_ENFORCE(ctx, in.shape() == dense[0]->shape() && in.dtype() == dense[0]->dtype(),
                           "input '", ctx.InputName("X", i), "' is ", DTypeName(in.dtype()), " ",
                           ShapeToString(in.shape()), " but the first dense input is ",
                           DTypeName(dense[0]->dtype()), " ", ShapeToString(dense[0]->shape()));
    }
    dense.push_back(&in);
  }
  VisitDType(dense[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.Fail("bool tensors cannot be summed");
    } else {
      AddDense<T>(dense, out);
    }
  });
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    const Variable& var = ctx.InputVar("X", i);
    if (var.IsType<SelectedRows>()) ScatterAddRows(ctx, i, var.Get<SelectedRows>(), out);
  }
}

void SumKernel(const ExecutionContext& ctx) {
  const size_t n = ctx.InputSize("X");
  FLEET_KERNEL_ENFORCE(ctx, n > 0, "sum needs at least one input");
  bool all_rows = true;
  for (size_t i = 0; i < n; ++i) all_rows &= ctx.InputVar("X", i).IsType<SelectedRows>();
  Variable* out = ctx.OutputVar("Out");
  if (all_rows) {
    SelectedRows result = ConcatRows(ctx);
    *out->GetMutable<SelectedRows>() = std::move(result);
    return;
  }
  // The output may be one of the inputs (in-place accumulation): sum into fresh memory then.
  if (OutputAliasesAnInput(ctx)) {
    LoDTensor result;
    SumDense(ctx, &result);
    *out->GetMutable<LoDTensor>() = std::move(result);
  } else {
    SumDense(ctx, out->GetMutable<LoDTensor>());
  }
}

// d(sum)/dX_i is the identity: each input's gradient is a copy of Out@GRAD (a scale by 1, as
// in Paddle, so no kernel of its own is needed).
std::vector<OpSpec> SumGradMaker(const OpSpec& fwd) {
  std::vector<OpSpec> ops;
  const std::string dout = framework::GradName(fwd.Outputs("Out").at(0));
  for (const auto& x : fwd.Inputs("X")) {
    OpSpec grad;
    grad.type = "scale";
    grad.inputs["X"] = {dout};
    grad.outputs["Out"] = {framework::GradName(x)};
    grad.attrs.Set("scale", 1.f);
    grad.attrs.Set("bias", 0.f);
    ops.push_back(std::move(grad));
  }
  return ops;
}

}  // namespace

void RegisterReduceOps(OpRegistry* registry) {
  OpInfo& mean = registry->Register("mean");
  mean.infer_shape = InferMean;
  mean.grad_maker = framework::SingleGradOp({"X"}, {}, {"Out"}, {"X"});
  SetCpuKernel(&mean, MeanKernel);
  OpInfo& mean_grad = registry->Register("mean_grad");
  mean_grad.infer_shape = GradsLikeInputs({"X"});
  SetCpuKernel(&mean_grad, MeanGradKernel);

  RegisterReduce(registry, "reduce_sum", /*mean=*/false);
  RegisterReduce(registry, "reduce_mean", /*mean=*/true);

  OpInfo& sum = registry->Register("sum");
  sum.infer_shape = InferSum;
  sum.grad_maker = SumGradMaker;
  SetCpuKernel(&sum, SumKernel);
}

}  // namespace fleet::operators
