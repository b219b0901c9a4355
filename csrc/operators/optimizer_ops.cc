// Optimizer ops: sgd, momentum, adagrad, adam, rmsprop, ftrl, adamax, lamb and decayed_adagrad,
// with the slots, attributes and formulas of
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

#include <algorithm>
#include <cmath>
#include <functional>
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
  // The gradient's rows with duplicates summed (MergeDuplicateRows), or, when its rows ascend
  // strictly (a data-parallel replica's block of a dense gradient split by rows), the op's
  // input itself: merging would only copy it, in the same order.
  const SelectedRows* input = nullptr;
  SelectedRows merged;
  bool merged_used = false;
  int64_t height = 0;  // rows of Param
  int64_t width = 0;   // elements per row

  const SelectedRows& rows() const { return merged_used ? merged : *input; }
  const float* Row(size_t i) const { return rows().value().data<float>() + i * width; }
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
  out.input = &grad;
  out.merged_used = !std::is_sorted(rows.begin(), rows.end(), std::less_equal<int64_t>());
  if (out.merged_used) out.merged = MergeDuplicateRows(grad);
  return out;
}

// Calls fn(row, grad_row) for each row the gradient holds.
template <typename Fn>
void ForEachGradRow(const RowGrad& grad, Fn fn) {
  const auto& rows = grad.rows().rows();
  for (size_t i = 0; i < rows.size(); ++i) fn(rows[i], grad.Row(i));
}

// Calls fn(row, grad_row) for every row of Param, passing zeros for the rows the gradient lacks:
// Paddle's non-lazy sparse update, where state decays on every row each step.
template <typename Fn>
void ForEachParamRow(const RowGrad& grad, Fn fn) {
  std::vector<int64_t> slot(grad.height, -1);
  const auto& rows = grad.rows().rows();
  for (size_t i = 0; i < rows.size(); ++i) slot[rows[i]] = static_cast<int64_t>(i);
  const std::vector<float> zeros(grad.width, 0.f);
  for (int64_t r = 0; r < grad.height; ++r) fn(r, slot[r] < 0 ? zeros.data() : grad.Row(slot[r]));
}

// Calls fn(g, offset, n) for the spans of Param the gradient updates: once over a dense
// gradient; for a SelectedRows gradient once per row, the rows present only (lazy) or every
// row of Param with zeros where the gradient has none (so state decays everywhere).
template <typename Fn>
void ForEachGradSpan(const ExecutionContext& ctx, const Shape& shape, bool lazy, Fn fn) {
  if (!HasSparseGrad(ctx)) {
    fn(DenseGrad(ctx, shape), int64_t{0}, NumElements(shape));
    return;
  }
  const RowGrad grad = SparseGrad(ctx, shape);
  const int64_t w = grad.width;
  auto row = [&](int64_t r, const float* g) { fn(g, r * w, w); };
  if (lazy) {
    ForEachGradRow(grad, row);
  } else {
    ForEachParamRow(grad, row);
  }
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

// Paddle's decayed_adagrad takes dense gradients; a sparse one decays every row's moment.
void DecayedAdagradKernel(const ExecutionContext& ctx) {
  const float lr = ScalarInput(ctx, "LearningRate");
  const float decay = ctx.Attr<float>("decay", 0.95f);
  const float epsilon = ctx.Attr<float>("epsilon", 1e-6f);
  const Shape shape = ctx.Input("Param").shape();
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* m = UpdateInPlace(ctx, "Moment", "MomentOut", shape);
  ForEachGradSpan(ctx, shape, false, [&](const float* g, int64_t off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      DecayedAdagradElement(lr, decay, epsilon, g[i], p + off + i, m + off + i);
    }
  });
}

// A sparse gradient updates every row (zeros where absent), as Paddle's sparse rmsprop does.
void RmspropKernel(const ExecutionContext& ctx) {
  const float lr = ScalarInput(ctx, "LearningRate");
  const float rho = ctx.Attr<float>("decay", 0.9f);
  const float mu = ctx.Attr<float>("momentum", 0.f);
  const float epsilon = ctx.Attr<float>("epsilon", 1e-10f);
  const bool centered = ctx.Attr<bool>("centered", false);
  const Shape shape = ctx.Input("Param").shape();
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* ms = UpdateInPlace(ctx, "MeanSquare", "MeanSquareOut", shape);
  float* mom = UpdateInPlace(ctx, "Moment", "MomentOut", shape);
  float* mg = nullptr;
  if (centered) {
    FLEET_KERNEL_ENFORCE(ctx, ctx.HasInput("MeanGrad") && ctx.HasOutput("MeanGradOut"),
                         "centered rmsprop needs MeanGrad and MeanGradOut");
    mg = UpdateInPlace(ctx, "MeanGrad", "MeanGradOut", shape);
  }
  ForEachGradSpan(ctx, shape, false, [&](const float* g, int64_t off, int64_t n) {
    float* pp = p + off;
    if (centered) {
      for (int64_t i = 0; i < n; ++i) {
        CenteredRmspropElement(lr, rho, mu, epsilon, g[i], pp + i, ms + off + i, mg + off + i,
                               mom + off + i);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        RmspropElement(lr, rho, mu, epsilon, g[i], pp + i, ms + off + i, mom + off + i);
      }
    }
  });
}

// Paddle adds 1e-10 to l1 and l2. A zero gradient leaves a row as it is, so a sparse
// gradient visits only its rows.
void FtrlKernel(const ExecutionContext& ctx) {
  const float lr = ScalarInput(ctx, "LearningRate");
  const float l1 = ctx.Attr<float>("l1", 0.f) + 1e-10f;
  const float l2 = ctx.Attr<float>("l2", 0.f) + 1e-10f;
  const float lr_power = ctx.Attr<float>("lr_power", -0.5f);
  const Shape shape = ctx.Input("Param").shape();
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* n_acc = UpdateInPlace(ctx, "SquaredAccumulator", "SquaredAccumOut", shape);
  float* z_acc = UpdateInPlace(ctx, "LinearAccumulator", "LinearAccumOut", shape);
  ForEachGradSpan(ctx, shape, true, [&](const float* g, int64_t off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      FtrlElement(lr, l1, l2, lr_power, g[i], p + off + i, n_acc + off + i, z_acc + off + i);
    }
  });
}

void AdamaxKernel(const ExecutionContext& ctx) {
  const float beta1 = ctx.Attr<float>("beta1", 0.9f);
  const float beta2 = ctx.Attr<float>("beta2", 0.999f);
  const float epsilon = ctx.Attr<float>("epsilon", 1e-8f);
  const float lr_t = ScalarInput(ctx, "LearningRate") / (1.f - ScalarInput(ctx, "Beta1Pow"));
  const Shape shape = ctx.Input("Param").shape();
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* m = UpdateInPlace(ctx, "Moment", "MomentOut", shape);
  float* u = UpdateInPlace(ctx, "InfNorm", "InfNormOut", shape);
  ForEachGradSpan(ctx, shape, false, [&](const float* g, int64_t off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      AdamaxElement(lr_t, beta1, beta2, epsilon, g[i], p + off + i, m + off + i, u + off + i);
    }
  });
  ScaleScalar(ctx, "Beta1Pow", "Beta1PowOut", beta1);
}

// lamb (You et al., "Large batch optimization for deep learning: training BERT in 76 minutes",
// ICLR 2020, algorithm 2): Adam's bias-corrected direction r = m1_hat / (sqrt(m2_hat) + eps)
// plus weight_decay * p, scaled by the trust ratio ||p|| / ||r|| (1 when either is 0). The
// norms span the whole parameter, so a sparse gradient is made dense first (every row moves).
void LambKernel(const ExecutionContext& ctx) {
  const float lr = ScalarInput(ctx, "LearningRate");
  const float beta1 = ctx.Attr<float>("beta1", 0.9f);
  const float beta2 = ctx.Attr<float>("beta2", 0.999f);
  const float epsilon = ctx.Attr<float>("epsilon", 1e-6f);
  const float weight_decay = ctx.Attr<float>("weight_decay", 0.01f);
  const float bias1 = 1.f - ScalarInput(ctx, "Beta1Pow");
  const float bias2 = 1.f - ScalarInput(ctx, "Beta2Pow");
  const Shape shape = ctx.Input("Param").shape();
  const int64_t numel = NumElements(shape);
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* m1 = UpdateInPlace(ctx, "Moment1", "Moment1Out", shape);
  float* m2 = UpdateInPlace(ctx, "Moment2", "Moment2Out", shape);
  std::vector<float> g(numel, 0.f);
  ForEachGradSpan(ctx, shape, true, [&](const float* src, int64_t off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) g[off + i] += src[i];
  });
  std::vector<float> r(numel);
  double p_sq = 0, r_sq = 0;
  for (int64_t i = 0; i < numel; ++i) {
    m1[i] = beta1 * m1[i] + (1.f - beta1) * g[i];
    m2[i] = beta2 * m2[i] + (1.f - beta2) * g[i] * g[i];
    r[i] = (m1[i] / bias1) / (std::sqrt(m2[i] / bias2) + epsilon) + weight_decay * p[i];
    p_sq += double{p[i]} * p[i];
    r_sq += double{r[i]} * r[i];
  }
  const double ratio = p_sq > 0 && r_sq > 0 ? std::sqrt(p_sq) / std::sqrt(r_sq) : 1.0;
  const float step = static_cast<float>(lr * ratio);
  for (int64_t i = 0; i < numel; ++i) p[i] -= step * r[i];
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
  Register(registry, "decayed_adagrad", {{"Param", "ParamOut"}, {"Moment", "MomentOut"}},
           DecayedAdagradKernel);
  Register(registry, "rmsprop",
           {{"Param", "ParamOut"},
            {"MeanSquare", "MeanSquareOut"},
            {"Moment", "MomentOut"},
            {"MeanGrad", "MeanGradOut"}},
           RmspropKernel);
  Register(registry, "ftrl",
           {{"Param", "ParamOut"},
            {"SquaredAccumulator", "SquaredAccumOut"},
            {"LinearAccumulator", "LinearAccumOut"}},
           FtrlKernel);
  Register(registry, "adamax",
           {{"Param", "ParamOut"},
            {"Moment", "MomentOut"},
            {"InfNorm", "InfNormOut"},
            {"Beta1Pow", "Beta1PowOut"}},
           AdamaxKernel);
  Register(registry, "lamb",
           {{"Param", "ParamOut"},
            {"Moment1", "Moment1Out"},
            {"Moment2", "Moment2Out"},
            {"Beta1Pow", "Beta1PowOut"},
            {"Beta2Pow", "Beta2PowOut"}},
           LambKernel);
}

}  // namespace fleet::operators
