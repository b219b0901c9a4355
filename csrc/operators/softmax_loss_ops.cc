// Softmax and the classification losses: softmax, cross_entropy, softmax_with_cross_entropy,
// sigmoid_cross_entropy_with_logits and log_loss. Op types, slots and attributes follow
// PaddlePaddle fluid's static ops of the same names; the rows of a loss are the tensor's
// elements seen as a [rows, last_dim] matrix, and every output keeps its input's lod.

#include <algorithm>
#include <cmath>
#include <vector>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// cross_entropy reads probabilities; below this they are clipped before the log, so a zero
// probability costs -log(1e-20) = 46 instead of inf (Paddle bounds the same log at 1e20).
constexpr float kMinProb = 1e-20f;

// A tensor of shape [..., width] seen as [rows, width].
struct Rows2D {
  int64_t rows;
  int64_t width;
};

Rows2D AsRows(const ExecutionContext& ctx, const LoDTensor& t, const std::string& slot) {
  FLEET_KERNEL_ENFORCE(ctx, t.rank() >= 1, "input '", ctx.InputName(slot), "' (slot ", slot,
                       ") must have rank >= 1, got ", ShapeToString(t.shape()));
  const int64_t width = t.dim(-1);
  return {width == 0 ? 0 : t.numel() / width, width};
}

// Resizes `out` to `in`'s shape with the last dimension replaced by 1 (one loss per row).
float* ResizeAsLoss(const LoDTensor& in, LoDTensor* out) {
  Shape shape = in.shape();
  shape.back() = 1;
  out->Resize(shape);
  out->set_lod(in.lod());
  return out->mutable_data<float>();
}

// The gradient slot `slot` (e.g. "Loss@GRAD") as float32, checked to hold `numel` elements.
const float* GradData(const ExecutionContext& ctx, const std::string& slot, int64_t numel) {
  const LoDTensor& g = ctx.Input(slot);
  FLEET_KERNEL_ENFORCE(ctx, g.numel() == numel, slot, " has shape ", ShapeToString(g.shape()),
                       " but the forward output has ", numel, " elements");
  return FloatData(ctx, slot);
}

// Hard labels: int64, one per row, each in [0, classes) or equal to ignore_index.
const int64_t* HardLabels(const ExecutionContext& ctx, Rows2D x, int64_t ignore_index) {
  const LoDTensor& label = ctx.Input("Label");
  FLEET_KERNEL_ENFORCE(ctx, label.dtype() == DType::kInt64, "Label '", ctx.InputName("Label"),
                       "' is ", DTypeName(label.dtype()),
                       "; hard labels must be int64 (soft_label=True takes float distributions)");
  FLEET_KERNEL_ENFORCE(ctx, label.numel() == x.rows, "Label has shape ",
                       ShapeToString(label.shape()), ": expected one label for each of the ",
                       x.rows, " rows");
  const int64_t* labels = label.data<int64_t>();
  for (int64_t r = 0; r < x.rows; ++r) {
    const int64_t l = labels[r];
    FLEET_KERNEL_ENFORCE(ctx, (l >= 0 && l < x.width) || l == ignore_index, "label value ", l,
                         " at row ", r, " is outside [0, ", x.width, ") and is not ignore_index (",
                         ignore_index, ")");
  }
  return labels;
}

// Soft labels: float32 distributions of the same shape as the input.
const float* SoftLabels(const ExecutionContext& ctx, Rows2D x) {
  const LoDTensor& label = ctx.Input("Label");
  FLEET_KERNEL_ENFORCE(ctx, label.numel() == x.rows * x.width, "Label has shape ",
                       ShapeToString(label.shape()), "; soft labels need ", x.rows, " rows of ",
                       x.width, " probabilities");
  return FloatData(ctx, "Label");
}

// ---- softmax -------------------------------------------------------------------------------

// Softmax along one axis of a tensor seen as [outer, n, inner] (inner = 1 for the last axis).
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView ViewAlong(const ExecutionContext& ctx, const Shape& shape) {
  const int rank = static_cast<int>(shape.size());
  int axis = ctx.Attr<int32_t>("axis", -1);
  if (axis < 0) axis += rank;
  FLEET_KERNEL_ENFORCE(ctx, axis >= 0 && axis < rank, "axis ", ctx.Attr<int32_t>("axis", -1),
                       " is out of range for shape ", ShapeToString(shape));
  AxisView v;
  for (int i = 0; i < rank; ++i) {
    if (i < axis) v.outer *= shape[i];
    if (i == axis) v.n = shape[i];
    if (i > axis) v.inner *= shape[i];
  }
  return v;
}

void SoftmaxKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const float* in = FloatData(ctx, "X");
  float* out = ResizeLike(x, ctx.Output("Out"));
  const AxisView v = ViewAlong(ctx, x.shape());
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t base = o * v.n * v.inner + i;
      float max = -INFINITY;
      for (int64_t k = 0; k < v.n; ++k) max = std::max(max, in[base + k * v.inner]);
      float sum = 0.f;
      for (int64_t k = 0; k < v.n; ++k) {
        const float e = std::exp(in[base + k * v.inner] - max);
        out[base + k * v.inner] = e;
        sum += e;
      }
      const float inv = 1.f / sum;
      for (int64_t k = 0; k < v.n; ++k) out[base + k * v.inner] *= inv;
    }
  }
}

// dX = Out * (dOut - sum_k(dOut_k * Out_k)) along the axis.
void SoftmaxGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& y_t = ctx.Input("Out");
  const float* y = FloatData(ctx, "Out");
  const float* dy = GradData(ctx, "Out@GRAD", y_t.numel());
  float* dx = ResizeLike(y_t, ctx.Output("X@GRAD"));
  const AxisView v = ViewAlong(ctx, y_t.shape());
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t base = o * v.n * v.inner + i;
      float dot = 0.f;
      for (int64_t k = 0; k < v.n; ++k) dot += dy[base + k * v.inner] * y[base + k * v.inner];
      for (int64_t k = 0; k < v.n; ++k) {
        const int64_t j = base + k * v.inner;
        dx[j] = y[j] * (dy[j] - dot);
      }
    }
  }
}

// ---- cross_entropy -------------------------------------------------------------------------

void CrossEntropyKernel(const ExecutionContext& ctx) {
  const LoDTensor& x_t = ctx.Input("X");
  const Rows2D x = AsRows(ctx, x_t, "X");
  const float* p = FloatData(ctx, "X");
  float* y = ResizeAsLoss(x_t, ctx.Output("Y"));
  if (ctx.Attr<bool>("soft_label", false)) {
    const float* label = SoftLabels(ctx, x);
    for (int64_t r = 0; r < x.rows; ++r) {
      double loss = 0;
      for (int64_t j = 0; j < x.width; ++j) {
        const int64_t k = r * x.width + j;
        loss -= label[k] * std::log(std::max(p[k], kMinProb));
      }
      y[r] = static_cast<float>(loss);
    }
    return;
  }
  const int64_t ignore = ctx.Attr<int64_t>("ignore_index", -100);
  const int64_t* label = HardLabels(ctx, x, ignore);
  for (int64_t r = 0; r < x.rows; ++r) {
    y[r] = label[r] == ignore ? 0.f : -std::log(std::max(p[r * x.width + label[r]], kMinProb));
  }
}

// dX = -dY * label / max(X, kMinProb): finite where X underflowed, so training can recover.
void CrossEntropyGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x_t = ctx.Input("X");
  const Rows2D x = AsRows(ctx, x_t, "X");
  const float* p = FloatData(ctx, "X");
  const float* dy = GradData(ctx, "Y@GRAD", x.rows);
  float* dx = ResizeLike(x_t, ctx.Output("X@GRAD"));
  if (ctx.Attr<bool>("soft_label", false)) {
    const float* label = SoftLabels(ctx, x);
    for (int64_t k = 0; k < x.rows * x.width; ++k) {
      dx[k] = -dy[k / x.width] * label[k] / std::max(p[k], kMinProb);
    }
    return;
  }
  const int64_t ignore = ctx.Attr<int64_t>("ignore_index", -100);
  const int64_t* label = HardLabels(ctx, x, ignore);
  std::fill(dx, dx + x.rows * x.width, 0.f);
  for (int64_t r = 0; r < x.rows; ++r) {
    if (label[r] == ignore) continue;
    const int64_t k = r * x.width + label[r];
    dx[k] = -dy[r] / std::max(p[k], kMinProb);
  }
}

// ---- softmax_with_cross_entropy ------------------------------------------------------------

// Writes the softmax of one row into `s` and returns log(sum(exp(x - max))) + max, the
// log-partition, so that log_softmax_j = x_j - lse without taking the log of a rounded zero.
float SoftmaxRow(const float* x, int64_t width, float* s) {
  float max = -INFINITY;
  for (int64_t j = 0; j < width; ++j) max = std::max(max, x[j]);
  float sum = 0.f;
  for (int64_t j = 0; j < width; ++j) {
    s[j] = std::exp(x[j] - max);
    sum += s[j];
  }
  const float inv = 1.f / sum;
  for (int64_t j = 0; j < width; ++j) s[j] *= inv;
  return max + std::log(sum);
}

void CheckLastAxis(const ExecutionContext& ctx, const LoDTensor& logits) {
  const int axis = ctx.Attr<int32_t>("axis", -1);
  FLEET_KERNEL_ENFORCE(ctx, axis == -1 || axis == logits.rank() - 1, "axis ", axis,
                       " is not supported: softmax_with_cross_entropy works on the last axis");
}

void SoftmaxWithCrossEntropyKernel(const ExecutionContext& ctx) {
  const LoDTensor& logits_t = ctx.Input("Logits");
  CheckLastAxis(ctx, logits_t);
  const Rows2D x = AsRows(ctx, logits_t, "Logits");
  const float* logits = FloatData(ctx, "Logits");
  // Softmax is optional so that a caller who only needs the loss pays no output tensor.
  std::vector<float> scratch;
  float* softmax = nullptr;
  if (ctx.HasOutput("Softmax")) {
    softmax = ResizeLike(logits_t, ctx.Output("Softmax"));
  } else {
    scratch.resize(x.rows * x.width);
    softmax = scratch.data();
  }
  float* loss = ResizeAsLoss(logits_t, ctx.Output("Loss"));
  const bool soft = ctx.Attr<bool>("soft_label", false);
  const int64_t ignore = ctx.Attr<int64_t>("ignore_index", -100);
  const float* soft_label = soft ? SoftLabels(ctx, x) : nullptr;
  const int64_t* hard_label = soft ? nullptr : HardLabels(ctx, x, ignore);
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* row = logits + r * x.width;
    const float lse = SoftmaxRow(row, x.width, softmax + r * x.width);
    if (soft) {
      double l = 0;
      for (int64_t j = 0; j < x.width; ++j) l -= soft_label[r * x.width + j] * (row[j] - lse);
      loss[r] = static_cast<float>(l);
    } else {
      loss[r] = hard_label[r] == ignore ? 0.f : lse - row[hard_label[r]];
    }
  }
}

// dLogits_j = dLoss * (softmax_j * sum(label) - label_j); with one-hot (or normalised) labels
// this is Paddle's dLoss * (softmax - label). Softmax is recomputed when it was not kept.
void SoftmaxWithCrossEntropyGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("Logits@GRAD")) return;
  const LoDTensor& logits_t = ctx.Input("Logits");
  const Rows2D x = AsRows(ctx, logits_t, "Logits");
  const float* dloss = GradData(ctx, "Loss@GRAD", x.rows);
  float* dx = ResizeLike(logits_t, ctx.Output("Logits@GRAD"));
  if (ctx.HasInput("Softmax")) {
    FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Softmax").numel() == x.rows * x.width,
                         "Softmax has shape ", ShapeToString(ctx.Input("Softmax").shape()),
                         " but Logits has ", ShapeToString(logits_t.shape()));
    std::copy_n(FloatData(ctx, "Softmax"), x.rows * x.width, dx);
  } else {
    const float* logits = FloatData(ctx, "Logits");
    for (int64_t r = 0; r < x.rows; ++r) {
      SoftmaxRow(logits + r * x.width, x.width, dx + r * x.width);
    }
  }
  if (ctx.Attr<bool>("soft_label", false)) {
    const float* label = SoftLabels(ctx, x);
    for (int64_t r = 0; r < x.rows; ++r) {
      float* g = dx + r * x.width;
      const float* l = label + r * x.width;
      float total = 0.f;
      for (int64_t j = 0; j < x.width; ++j) total += l[j];
      for (int64_t j = 0; j < x.width; ++j) g[j] = dloss[r] * (g[j] * total - l[j]);
    }
    return;
  }
  const int64_t ignore = ctx.Attr<int64_t>("ignore_index", -100);
  const int64_t* label = HardLabels(ctx, x, ignore);
  for (int64_t r = 0; r < x.rows; ++r) {
    float* g = dx + r * x.width;
    if (label[r] == ignore) {
      std::fill(g, g + x.width, 0.f);
      continue;
    }
    g[label[r]] -= 1.f;
    for (int64_t j = 0; j < x.width; ++j) g[j] *= dloss[r];
  }
}

// ---- sigmoid_cross_entropy_with_logits -----------------------------------------------------

// Elements whose label equals ignore_index contribute nothing; with `normalize` the result is
// divided by the number of the others (at least 1e-5, as Paddle does).
struct SigmoidCeSetup {
  const float* x;
  const float* label;
  int64_t n;
  float ignore;
  float scale;
};

SigmoidCeSetup SetupSigmoidCe(const ExecutionContext& ctx) {
  const LoDTensor& x_t = ctx.Input("X");
  const LoDTensor& label_t = ctx.Input("Label");
  FLEET_KERNEL_ENFORCE(ctx, label_t.numel() == x_t.numel(), "Label has shape ",
                       ShapeToString(label_t.shape()), " but X has ", ShapeToString(x_t.shape()),
                       "; they must match");
  SigmoidCeSetup s{FloatData(ctx, "X"), FloatData(ctx, "Label"), x_t.numel(),
                   static_cast<float>(ctx.Attr<int64_t>("ignore_index", -100)), 1.f};
  if (ctx.Attr<bool>("normalize", false)) {
    int64_t kept = 0;
    for (int64_t i = 0; i < s.n; ++i) kept += s.label[i] != s.ignore;
    s.scale = 1.f / std::max(static_cast<float>(kept), 1e-5f);
  }
  return s;
}

void SigmoidCrossEntropyKernel(const ExecutionContext& ctx) {
  const SigmoidCeSetup s = SetupSigmoidCe(ctx);
  float* out = ResizeLike(ctx.Input("X"), ctx.Output("Out"));
  for (int64_t i = 0; i < s.n; ++i) {
    const float x = s.x[i];
    const float z = s.label[i];
    // max(x, 0) - x z + log(1 + exp(-|x|)): never exponentiates a positive number.
    out[i] = z == s.ignore
                 ? 0.f
                 : s.scale * (std::max(x, 0.f) - x * z + std::log1p(std::exp(-std::fabs(x))));
  }
}

void SigmoidCrossEntropyGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const SigmoidCeSetup s = SetupSigmoidCe(ctx);
  const float* dout = GradData(ctx, "Out@GRAD", s.n);
  float* dx = ResizeLike(ctx.Input("X"), ctx.Output("X@GRAD"));
  for (int64_t i = 0; i < s.n; ++i) {
    const float sigmoid = 1.f / (1.f + std::exp(-s.x[i]));
    dx[i] = s.label[i] == s.ignore ? 0.f : s.scale * dout[i] * (sigmoid - s.label[i]);
  }
}

// ---- log_loss ------------------------------------------------------------------------------

void CheckLogLossInputs(const ExecutionContext& ctx) {
  const LoDTensor& p = ctx.Input("Predicted");
  const LoDTensor& l = ctx.Input("Labels");
  FLEET_KERNEL_ENFORCE(ctx, p.numel() == l.numel(), "Labels has shape ", ShapeToString(l.shape()),
                       " but Predicted has ", ShapeToString(p.shape()), "; they must match");
}

void LogLossKernel(const ExecutionContext& ctx) {
  CheckLogLossInputs(ctx);
  const LoDTensor& p_t = ctx.Input("Predicted");
  const float* p = FloatData(ctx, "Predicted");
  const float* l = FloatData(ctx, "Labels");
  const float eps = ctx.Attr<float>("epsilon", 1e-4f);
  float* loss = ResizeLike(p_t, ctx.Output("Loss"));
  for (int64_t i = 0; i < p_t.numel(); ++i) {
    loss[i] = -l[i] * std::log(p[i] + eps) - (1.f - l[i]) * std::log(1.f - p[i] + eps);
  }
}

void LogLossGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("Predicted@GRAD")) return;
  CheckLogLossInputs(ctx);
  const LoDTensor& p_t = ctx.Input("Predicted");
  const float* p = FloatData(ctx, "Predicted");
  const float* l = FloatData(ctx, "Labels");
  const float* dloss = GradData(ctx, "Loss@GRAD", p_t.numel());
  const float eps = ctx.Attr<float>("epsilon", 1e-4f);
  float* dp = ResizeLike(p_t, ctx.Output("Predicted@GRAD"));
  for (int64_t i = 0; i < p_t.numel(); ++i) {
    dp[i] = dloss[i] * (-l[i] / (p[i] + eps) + (1.f - l[i]) / (1.f - p[i] + eps));
  }
}

// ---- compile-time shapes -------------------------------------------------------------------

// Output info of a per-row loss: the input's shape with the last dimension 1, float32.
VarInfo LossInfo(const InferShapeContext& ctx, const std::string& slot) {
  VarInfo info = ctx.Input(slot);
  FLEET_ENFORCE(!info.shape.empty(), InvalidArgument, "op ", ctx.op().Describe(), ": input slot ",
                slot, " must have rank >= 1");
  info.shape.back() = 1;
  info.dtype = DType::kFloat32;
  return info;
}

// Label's last dimension must be 1 (hard) or the class count (soft) when both are known.
void CheckLabelShape(const InferShapeContext& ctx, const std::string& x_slot) {
  const Shape& x = ctx.Input(x_slot).shape;
  const Shape& label = ctx.Input("Label").shape;
  if (x.empty() || label.empty() || label.size() != x.size()) return;
  const bool soft = ctx.Attr<bool>("soft_label", false);
  const int64_t want = soft ? x.back() : 1;
  FLEET_ENFORCE(want < 0 || label.back() < 0 || label.back() == want, InvalidArgument, "op ",
                ctx.op().Describe(), ": Label has shape ", ShapeToString(label), " but ",
                soft ? "soft labels need the class count " : "hard labels need last dimension ",
                want, " (", x_slot, " has shape ", ShapeToString(x), ")");
}

void RegisterWithGrad(OpRegistry* registry, const std::string& type, framework::InferShapeFn fwd,
                      framework::GradMakerFn maker, framework::KernelFn kernel,
                      const std::string& grad_like, const std::string& grad_out,
                      framework::KernelFn grad_kernel) {
  OpInfo& op = registry->Register(type);
  op.infer_shape = std::move(fwd);
  op.grad_maker = std::move(maker);
  SetCpuKernel(&op, std::move(kernel));
  OpInfo& grad = registry->Register(type + "_grad");
  grad.infer_shape = SameAs(grad_like, grad_out);
  SetCpuKernel(&grad, std::move(grad_kernel));
}

}  // namespace

void RegisterSoftmaxLossOps(OpRegistry* registry) {
  using framework::SingleGradOp;
  RegisterWithGrad(registry, "softmax", SameAs("X", "Out"),
                   SingleGradOp({}, {"Out"}, {"Out"}, {"X"}), SoftmaxKernel, "Out", "X@GRAD",
                   SoftmaxGradKernel);
  RegisterWithGrad(
      registry, "cross_entropy",
      [](InferShapeContext* ctx) {
        CheckLabelShape(*ctx, "X");
        ctx->SetOutput("Y", LossInfo(*ctx, "X"));
      },
      SingleGradOp({"X", "Label"}, {}, {"Y"}, {"X"}), CrossEntropyKernel, "X", "X@GRAD",
      CrossEntropyGradKernel);
  RegisterWithGrad(
      registry, "softmax_with_cross_entropy",
      [](InferShapeContext* ctx) {
        CheckLabelShape(*ctx, "Logits");
        if (ctx->HasOutput("Softmax")) ctx->SetOutput("Softmax", ctx->Input("Logits"));
        ctx->SetOutput("Loss", LossInfo(*ctx, "Logits"));
      },
      // Logits rides along so the gradient can recompute Softmax when it was not kept.
      SingleGradOp({"Logits", "Label"}, {"Softmax"}, {"Loss"}, {"Logits"}),
      SoftmaxWithCrossEntropyKernel, "Logits", "Logits@GRAD", SoftmaxWithCrossEntropyGradKernel);
  RegisterWithGrad(registry, "sigmoid_cross_entropy_with_logits", SameAs("X", "Out"),
                   SingleGradOp({"X", "Label"}, {}, {"Out"}, {"X"}), SigmoidCrossEntropyKernel, "X",
                   "X@GRAD", SigmoidCrossEntropyGradKernel);
  RegisterWithGrad(registry, "log_loss", SameAs("Predicted", "Loss"),
                   SingleGradOp({"Predicted", "Labels"}, {}, {"Loss"}, {"Predicted"}),
                   LogLossKernel, "Predicted", "Predicted@GRAD", LogLossGradKernel);
}

}  // namespace fleet::operators
