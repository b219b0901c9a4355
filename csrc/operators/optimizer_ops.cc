// Optimizer ops: sgd, momentum, adagrad, adam, with the slots, attributes and formulas of
// PaddlePaddle fluid (paddle/fluid/operators/optimizers/). The update rules themselves live in
// optimizer_math.h, shared with the CUDA kernels.
//
// Every op updates its parameter and state in place: ParamOut is normally the same variable as
// Param (and MomentOut as Moment, ...). When a program binds a different variable, that variable
// first receives a copy of the input and is then updated, so the input is left untouched.
//
// Grad is either a dense LoDTensor of Param's shape or a SelectedRows (the gradient of an
// embedding lookup). Sparse rows may repeat; they are summed first (MergeDuplicateRows), and a
// row outside [0, Param rows) is an InvalidArgument naming the row. The ops have no gradient.

#include <vector>

#include "operators/op_helpers.h"
#include "operators/optimizer_math.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// ---- Contiguous update loops. Hot: they run over every dense parameter each step, so they
// are plain loops over floats with no branch per element (the build compiles this file with
// -fno-math-errno so that sqrtf vectorises).

void SgdRow(float lr, const float* g, float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) SgdElement(lr, g[i], p + i);
}

void MomentumRow(float lr, float mu, bool nesterov, const float* g, float* p, float* v, int64_t n) {
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i) NesterovElement(lr, mu, g[i], p + i, v + i);
  } else {
    for (int64_t i = 0; i < n; ++i) MomentumElement(lr, mu, g[i], p + i, v + i);
  }
}

void AdagradRow(float lr, float epsilon, const float* g, float* p, float* m, int64_t n) {
  for (int64_t i = 0; i < n; ++i) AdagradElement(lr, epsilon, g[i], p + i, m + i);
}

void AdamRow(const AdamStep& step, const float* g, float* p, float* m1, float* m2, int64_t n) {
  const AdamStep s = step;  // a local copy lets the compiler keep the scalars in registers
  for (int64_t i = 0; i < n; ++i) AdamElement(s, g[i], p + i, m1 + i, m2 + i);
}

// ---- Reading the op's variables.

// The value of a float32 tensor with one element (LearningRate, Beta1Pow, ...).
float ScalarInput(const ExecutionContext& ctx, const std::string& slot) {
  const LoDTensor& t = ctx.Input(slot);
  FLEET_KERNEL_ENFORCE(ctx, t.dtype() == DType::kFloat32 && t.numel() == 1, slot, " '",
                       ctx.InputName(slot), "' must be a float32 tensor with one element, got ",
                       DTypeName(t.dtype()), " of shape ", ShapeToString(t.shape()));
  return t.data<float>()[0];
}

// Makes the tensor of output slot `out` hold the values of input slot `in` (a no-op when both
// slots name the same variable) and returns its memory for an in-place update. `in` must be a
// float32 tensor of shape `shape`.
float* UpdateInPlace(const ExecutionContext& ctx, const std::string& in, const std::string& out,
                     const Shape& shape) {
  const LoDTensor& src = ctx.Input(in);
  FLEET_KERNEL_ENFORCE(ctx, src.dtype() == DType::kFloat32, in, " '", ctx.InputName(in), "' is ",
                       DTypeName(src.dtype()), ", expected float32");
  FLEET_KERNEL_ENFORCE(ctx, src.shape() == shape, in, " '", ctx.InputName(in), "' has shape ",
                       ShapeToString(src.shape()), ", expected Param's shape ",
                       ShapeToString(shape));
  Variable* out_var = ctx.OutputVar(out);
  if (out_var != &ctx.InputVar(in)) out_var->GetMutable<LoDTensor>()->CopyFrom(src);
  return out_var->GetMutable<LoDTensor>()->data<float>();
}

// Writes in * factor to the one-element output `out`, when the program binds it.
void ScaleScalar(const ExecutionContext& ctx, const std::string& in, const std::string& out,
                 float factor) {
  if (!ctx.HasOutput(out)) return;
  const float value = ScalarInput(ctx, in) * factor;
  LoDTensor* t = ctx.Output(out);
  t->Resize({1});
  *t->mutable_data<float>() = value;
}

bool HasSparseGrad(const ExecutionContext& ctx) {
  return ctx.InputVar("Grad").IsType<SelectedRows>();
}

// The dense gradient, checked to have Param's shape.
const float* DenseGrad(const ExecutionContext& ctx, const Shape& param_shape) {
  const LoDTensor& grad = ctx.Input("Grad");
  FLEET_KERNEL_ENFORCE(ctx, grad.shape() == param_shape, "Grad '", ctx.InputName("Grad"),
                       "' has shape ", ShapeToString(grad.shape()), ", expected Param's shape ",
                       ShapeToString(param_shape));
  return FloatData(ctx, "Grad");
}

// A SelectedRows gradient with its rows checked against Param and duplicates summed.
struct RowGrad {
  SelectedRows merged;
  int64_t height = 0;  // rows of Param
  int64_t width = 0;   // elements per row

  const float* Row(size_t i) const { return merged.value().data<float>() + i * width; }
};

RowGrad SparseGrad(const ExecutionContext& ctx, const Shape& param_shape) {
  const SelectedRows& grad = ctx.InputVar("Grad").Get<SelectedRows>();
  const std::string& name = ctx.InputName("Grad");
  FLEET_KERNEL_ENFORCE(ctx, !param_shape.empty(), "Param '", ctx.InputName("Param"),
                       "' is a scalar; a SelectedRows Grad needs a parameter with rows");
  RowGrad out;
  out.height = param_shape[0];
  out.width = out.height == 0 ? 0 : NumElements(param_shape) / out.height;
  FLEET_KERNEL_ENFORCE(ctx, grad.height() == out.height, "Grad '", name, "' has height ",
                       grad.height(), " but Param has ", out.height, " rows");
  const auto& rows = grad.rows();
  if (!rows.empty()) {
    const Tensor& value = grad.value();
    FLEET_KERNEL_ENFORCE(ctx, value.initialized() && value.dtype() == DType::kFloat32, "Grad '",
                         name, "' values must be float32 data");
    FLEET_KERNEL_ENFORCE(ctx, value.numel() == static_cast<int64_t>(rows.size()) * out.width,
                         "Grad '", name, "' values have shape ", ShapeToString(value.shape()),
                         ", expected ", rows.size(), " rows of ", out.width, " elements");
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    FLEET_KERNEL_ENFORCE(ctx, rows[i] >= 0 && rows[i] < out.height, "Grad '", name, "' row ",
                         rows[i], " (entry ", i, ") is outside [0, ", out.height,
                         "), the rows of Param '", ctx.InputName("Param"), "'");
  }
  out.merged = MergeDuplicateRows(grad);
  return out;
}

// Calls fn(row, grad_row) for each row the gradient holds.
template <typename Fn>
void ForEachGradRow(const RowGrad& grad, Fn fn) {
  const auto& rows = grad.merged.rows();
  for (size_t i = 0; i < rows.size(); ++i) fn(rows[i], grad.Row(i));
}

// Calls fn(row, grad_row) for every row of Param, passing zeros for the rows the gradient lacks:
// Paddle's non-lazy sparse update, where state decays on every row each step.
template <typename Fn>
void ForEachParamRow(const RowGrad& grad, Fn fn) {
  std::vector<int64_t> slot(grad.height, -1);
  const auto& rows = grad.merged.rows();
  for (size_t i = 0; i < rows.size(); ++i) slot[rows[i]] = static_cast<int64_t>(i);
  const std::vector<float> zeros(grad.width, 0.f);
  for (int64_t r = 0; r < grad.height; ++r) fn(r, slot[r] < 0 ? zeros.data() : grad.Row(slot[r]));
}

// ---- Kernels.

void SgdKernel(const ExecutionContext& ctx) {
  const float lr = ScalarInput(ctx, "LearningRate");
  const Shape shape = ctx.Input("Param").shape();
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  if (HasSparseGrad(ctx)) {
    const RowGrad grad = SparseGrad(ctx, shape);
    const int64_t w = grad.width;
    ForEachGradRow(grad, [&](int64_t r, const float* g) { SgdRow(lr, g, p + r * w, w); });
  } else {
    SgdRow(lr, DenseGrad(ctx, shape), p, NumElements(shape));
  }
}

// Velocity decays on every row, also with a sparse gradient (as Paddle's momentum op does).
void MomentumKernel(const ExecutionContext& ctx) {
  const float lr = ScalarInput(ctx, "LearningRate");
  const float mu = ctx.Attr<float>("mu");
  const bool nesterov = ctx.Attr<bool>("use_nesterov", false);
  const Shape shape = ctx.Input("Param").shape();
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* v = UpdateInPlace(ctx, "Velocity", "VelocityOut", shape);
  if (HasSparseGrad(ctx)) {
    const RowGrad grad = SparseGrad(ctx, shape);
    const int64_t w = grad.width;
    ForEachParamRow(grad, [&](int64_t r, const float* g) {
      MomentumRow(lr, mu, nesterov, g, p + r * w, v + r * w, w);
    });
  } else {
    MomentumRow(lr, mu, nesterov, DenseGrad(ctx, shape), p, v, NumElements(shape));
  }
}

// A zero gradient leaves both Param and Moment unchanged, so the sparse path visits only the
// rows present.
void AdagradKernel(const ExecutionContext& ctx) {
  const float lr = ScalarInput(ctx, "LearningRate");
  const float epsilon = ctx.Attr<float>("epsilon", 1e-6f);
  const Shape shape = ctx.Input("Param").shape();
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* m = UpdateInPlace(ctx, "Moment", "MomentOut", shape);
  if (HasSparseGrad(ctx)) {
    const RowGrad grad = SparseGrad(ctx, shape);
    const int64_t w = grad.width;
    ForEachGradRow(grad, [&](int64_t r, const float* g) {
      AdagradRow(lr, epsilon, g, p + r * w, m + r * w, w);
    });
  } else {
    AdagradRow(lr, epsilon, DenseGrad(ctx, shape), p, m, NumElements(shape));
  }
}

// With a sparse gradient, lazy_mode updates only the rows present; otherwise every row is
// updated with a zero gradient where it has none, so its moments decay (Paddle's behaviour).
void AdamKernel(const ExecutionContext& ctx) {
  const float beta1 = ctx.Attr<float>("beta1", 0.9f);
  const float beta2 = ctx.Attr<float>("beta2", 0.999f);
  const AdamStep step = MakeAdamStep(ScalarInput(ctx, "LearningRate"), beta1, beta2,
                                     ctx.Attr<float>("epsilon", 1e-8f),
                                     ScalarInput(ctx, "Beta1Pow"), ScalarInput(ctx, "Beta2Pow"));
  const Shape shape = ctx.Input("Param").shape();
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* m1 = UpdateInPlace(ctx, "Moment1", "Moment1Out", shape);
  float* m2 = UpdateInPlace(ctx, "Moment2", "Moment2Out", shape);
  if (HasSparseGrad(ctx)) {
    const RowGrad grad = SparseGrad(ctx, shape);
    const int64_t w = grad.width;
    auto update = [&](int64_t r, const float* g) {
      AdamRow(step, g, p + r * w, m1 + r * w, m2 + r * w, w);
    };
    if (ctx.Attr<bool>("lazy_mode", false)) {
      ForEachGradRow(grad, update);
    } else {
      ForEachParamRow(grad, update);
    }
  } else {
    AdamRow(step, DenseGrad(ctx, shape), p, m1, m2, NumElements(shape));
  }
  // Older fluid programs update the powers with separate scale ops and bind no outputs here.
  ScaleScalar(ctx, "Beta1Pow", "Beta1PowOut", beta1);
  ScaleScalar(ctx, "Beta2Pow", "Beta2PowOut", beta2);
}

// Infer-shape: each output named in `pairs` takes the shape of its input.
framework::InferShapeFn OutputsLikeInputs(std::vector<std::pair<std::string, std::string>> pairs) {
  return [pairs](InferShapeContext* ctx) {
    for (const auto& [in, out] : pairs) {
      if (ctx->HasInput(in) && ctx->HasOutput(out)) ctx->SetOutput(out, ctx->Input(in));
    }
  };
}

void Register(OpRegistry* registry, const std::string& type,
              std::vector<std::pair<std::string, std::string>> in_out, framework::KernelFn fn) {
  OpInfo& op = registry->Register(type);
  op.infer_shape = OutputsLikeInputs(std::move(in_out));
  SetCpuKernel(&op, std::move(fn));
}

}  // namespace

void RegisterOptimizerOps(OpRegistry* registry) {
  Register(registry, "sgd", {{"Param", "ParamOut"}}, SgdKernel);
  Register(registry, "momentum", {{"Param", "ParamOut"}, {"Velocity", "VelocityOut"}},
           MomentumKernel);
  Register(registry, "adagrad", {{"Param", "ParamOut"}, {"Moment", "MomentOut"}}, AdagradKernel);
  Register(registry, "adam",
           {{"Param", "ParamOut"},
            {"Moment1", "Moment1Out"},
            {"Moment2", "Moment2Out"},
            {"Beta1Pow", "Beta1PowOut"},
            {"Beta2Pow", "Beta2PowOut"}},
           AdamKernel);
}

}  // namespace fleet::operators
