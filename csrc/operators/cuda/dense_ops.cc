// CUDA kernels of the dense ops of an MLP or CTR-DNN step: feed, fetch, reshape, scale,
// activations, elementwise_add, mean, sum, cast, concat, softmax and the losses. Shapes are
// checked as the CPU kernels check them (same messages where it matters); the arithmetic is in
// elementwise.cu and softmax.cu.

#include <cuda_runtime.h>

#include "operators/cuda/glue.h"
#include "operators/grad_helpers.h"

namespace fleet::operators::cuda {
namespace {

// feed: the fed host tensor (the feed holder is filled by the bindings) copied to the device
// through pinned memory; the copy is queued, so the step goes on at once.
void FeedKernel(const ExecutionContext& ctx) {
  const auto& holder = ctx.InputVar("X").Get<LoDTensorArray>();
  const int col = ctx.Attr<int32_t>("col");
  FLEET_KERNEL_ENFORCE(ctx, col >= 0 && static_cast<size_t>(col) < holder.size(), "feed column ",
                       col, " is missing: ", holder.size(), " tensors were fed");
  const LoDTensor& in = holder[col];
  LoDTensor* out = ctx.Output("Out");
  out->Resize(in.shape());
  void* dst = out->mutable_data(in.dtype(), ctx.place());
  CopyBytes(dst, ctx.place(), in.raw_data(), in.place(), in.nbytes());
  out->set_lod(in.lod());
}

void ScaleKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const float* xs = FloatData(ctx, "X");
  float* out = DeviceOutputLike(ctx, x, ctx.Output("Out"));
  Scale(xs, out, x.numel(), ctx.Attr<float>("scale", 1.f), ctx.Attr<float>("bias", 0.f),
        ctx.Attr<bool>("bias_after_scale", true), StreamOf(ctx));
}

void RegisterActivation(OpRegistry* registry, const std::string& type, Activation act) {
  SetCudaKernel(registry, type, [act](const ExecutionContext& ctx) {
    const LoDTensor& x = ctx.Input("X");
    const float* xs = FloatData(ctx, "X");
    ActivationForward(act, xs, DeviceOutputLike(ctx, x, ctx.Output("Out")), x.numel(),
                      StreamOf(ctx));
  });
  SetCudaKernel(registry, type + "_grad", [act](const ExecutionContext& ctx) {
    if (!ctx.HasOutput("X@GRAD")) return;
    const LoDTensor& out = ctx.Input("Out");
    FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == out.numel(), "Out@GRAD has shape ",
                         ShapeToString(ctx.Input("Out@GRAD").shape()), " but Out has ",
                         ShapeToString(out.shape()));
    const float* ys = FloatData(ctx, "Out");
    const float* dy = FloatData(ctx, "Out@GRAD");
    ActivationBackward(act, ys, dy, DeviceOutputLike(ctx, out, ctx.Output("X@GRAD")), out.numel(),
                       StreamOf(ctx));
  });
}

// X viewed as [pre, n, post] around Y's dimensions (Paddle's axis rule); Y of X's shape gives
// pre = post = 1. Y with an inner 1 (a partial broadcast) is not supported on CUDA yet.
struct AddPlan {
  int64_t pre = 1, n = 1, post = 1;
};

AddPlan PlanAdd(const ExecutionContext& ctx, const Shape& x, const Shape& y) {
  const int rx = static_cast<int>(x.size()), ry = static_cast<int>(y.size());
  const int axis_attr = ctx.Attr<int32_t>("axis", -1);
  const int axis = axis_attr < 0 ? rx - ry : axis_attr;
  // Trailing 1s of Y (Paddle allows [N, 1] against [M, N] when axis says so) are dropped.
  int ry_used = ry;
  while (ry_used > 0 && y[ry_used - 1] == 1 && axis + ry_used > rx) --ry_used;
  FLEET_KERNEL_ENFORCE(ctx, axis >= 0 && axis + ry_used <= rx, "Y's shape ", ShapeToString(y),
                       " does not broadcast to X's shape ", ShapeToString(x),
                       " at axis=", axis_attr);
  AddPlan plan;
  for (int i = 0; i < axis; ++i) plan.pre *= x[i];
  for (int i = 0; i < ry_used; ++i) {
    FLEET_KERNEL_ENFORCE(ctx, y[i] == x[axis + i], "Y's shape ", ShapeToString(y), " and X's ",
                         ShapeToString(x), " at axis=", axis_attr,
                         ": Y's dimensions must equal X's on CUDA (no inner broadcast yet)");
    plan.n *= y[i];
  }
  for (int i = axis + ry_used; i < rx; ++i) plan.post *= x[i];
  return plan;
}

void AddKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const AddPlan p = PlanAdd(ctx, x.shape(), y.shape());
  const float* xs = FloatData(ctx, "X");
  const float* ys = FloatData(ctx, "Y");
  LoDTensor* out = ctx.Output("Out");
  // Out may be Y (rare): compute aside then.
  LoDTensor scratch;
  LoDTensor* target = out == &y ? &scratch : out;
  float* os = DeviceOutputLike(ctx, x, target);
  AddBroadcast(xs, ys, os, p.pre, p.n, p.post, StreamOf(ctx));
  if (target != out) *out = scratch;
}

void AddGradKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& y = ctx.Input("Y");
  const LoDTensor& dout = ctx.Input("Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, dout.shape() == x.shape(), "Out@GRAD has shape ",
                       ShapeToString(dout.shape()), " but X has ", ShapeToString(x.shape()));
  const AddPlan p = PlanAdd(ctx, x.shape(), y.shape());
  if (ctx.HasOutput("X@GRAD")) {
    // dX = dOut: a view of the gradient, as reshape_grad does (written once per step).
    LoDTensor* dx = ctx.Output("X@GRAD");
    dx->ShareDataWith(dout);
    dx->set_lod(x.lod());
  }
  if (ctx.HasOutput("Y@GRAD")) {
    LoDTensor* dy = ctx.Output("Y@GRAD");
    float* dys = DeviceOutput<float>(ctx, dy, y.shape());
    if (p.pre == 1 && p.post == 1) {
      CopyBytes(dys, ctx.place(), FloatData(ctx, "Out@GRAD"), ctx.place(), y.nbytes());
    } else {
      SumToBroadcast(FloatData(ctx, "Out@GRAD"), dys, p.pre, p.n, p.post, StreamOf(ctx));
    }
  }
}

void MeanKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  FLEET_KERNEL_ENFORCE(ctx, x.numel() > 0, "mean of an empty tensor ", ShapeToString(x.shape()));
  const float* xs = FloatData(ctx, "X");
  Mean(xs, DeviceOutput<float>(ctx, ctx.Output("Out"), {1}), x.numel(), StreamOf(ctx));
}

void MeanGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  MeanGrad(FloatData(ctx, "Out@GRAD"), DeviceOutputLike(ctx, x, ctx.Output("X@GRAD")), x.numel(),
           StreamOf(ctx));
}

// sum of SelectedRows inputs: rows and values one after the other (duplicates stay), as the
// CPU kernel; the rows stay on the device.
void SumRows(const ExecutionContext& ctx) {
  const size_t n = ctx.InputSize("X");
  const auto& first = ctx.InputVar("X", 0).Get<SelectedRows>();
  int64_t total = 0, width = -1;
  for (size_t i = 0; i < n; ++i) {
    const auto& in = ctx.InputVar("X", i).Get<SelectedRows>();
    FLEET_KERNEL_ENFORCE(ctx, in.height() == first.height(), "SelectedRows input '",
                         ctx.InputName("X", i), "' has height ", in.height(), " but input '",
                         ctx.InputName("X", 0), "' has height ", first.height());
    if (in.num_rows() == 0) continue;
    FLEET_KERNEL_ENFORCE(ctx, in.value().rank() == 2 && (width < 0 || in.value().dim(1) == width),
                         "SelectedRows input '", ctx.InputName("X", i), "' has value shape ",
                         ShapeToString(in.value().shape()), ", earlier inputs have width ", width);
    width = in.value().dim(1);
    total += in.num_rows();
  }
  SelectedRows result;
  result.set_height(first.height());
  Tensor* value = result.mutable_value();
  value->Resize({total, std::max<int64_t>(width, 0)});
  char* dst = static_cast<char*>(value->mutable_data(DType::kFloat32, ctx.place()));
  Tensor* rows = result.mutable_device_rows();
  rows->Resize({total});
  char* dst_rows = static_cast<char*>(rows->mutable_data(DType::kInt64, ctx.place()));
  for (size_t i = 0; i < n; ++i) {
    const auto& in = ctx.InputVar("X", i).Get<SelectedRows>();
    if (in.num_rows() == 0) continue;
    CopyBytes(dst, ctx.place(), in.value().raw_data(), ctx.place(), in.value().nbytes());
    dst += in.value().nbytes();
    CopyBytes(dst_rows, ctx.place(), in.device_rows().raw_data(), ctx.place(),
              in.device_rows().nbytes());
    dst_rows += in.device_rows().nbytes();
  }
  *ctx.OutputVar("Out")->GetMutable<SelectedRows>() = std::move(result);
}

void SumKernel(const ExecutionContext& ctx) {
  const size_t n = ctx.InputSize("X");
  FLEET_KERNEL_ENFORCE(ctx, n > 0, "sum needs at least one input");
  size_t rows = 0;
  for (size_t i = 0; i < n; ++i) rows += ctx.InputVar("X", i).IsType<SelectedRows>() ? 1 : 0;
  if (rows == n) return SumRows(ctx);
  FLEET_KERNEL_ENFORCE(ctx, rows == 0,
                       "sum of SelectedRows and dense inputs is not supported on CUDA yet");
  const LoDTensor& first = ctx.Input("X", 0);
  for (size_t i = 1; i < n; ++i) {
    const LoDTensor& in = ctx.Input("X", i);
    FLEET_KERNEL_ENFORCE(ctx, in.shape() == first.shape() && in.dtype() == DType::kFloat32,
                         "input '", ctx.InputName("X", i), "' is ", DTypeName(in.dtype()), " ",
                         ShapeToString(in.shape()), " but the first input is ",
                         DTypeName(first.dtype()), " ", ShapeToString(first.shape()));
  }
  // Into fresh memory: the output may be one of the inputs (in-place accumulation).
  LoDTensor result;
  float* out = DeviceOutputLike(ctx, first, &result);
  CopyBytes(out, ctx.place(), FloatData(ctx, "X", 0), ctx.place(), first.nbytes());
  for (size_t i = 1; i < n; ++i)
    AddInPlace(FloatData(ctx, "X", i), out, first.numel(), StreamOf(ctx));
  *ctx.Output("Out") = std::move(result);
}

void CastKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const DType to = DTypeFromInt(ctx.Attr<int32_t>("out_dtype"),
                                absl::StrCat("op ", ctx.op().Describe(), ": attribute out_dtype"));
  FLEET_KERNEL_ENFORCE(ctx, x.dtype() != DType::kBool && to != DType::kBool,
                       "cast of bool tensors is not supported on CUDA yet");
  LoDTensor out(Tensor(to, x.shape()));  // fresh memory: Out may be X
  void* dst = out.mutable_data(to, ctx.place());
  Cast(x.raw_data(), static_cast<int>(x.dtype()), dst, static_cast<int>(to), x.numel(),
       StreamOf(ctx));
  out.set_lod(x.lod());
  *ctx.Output("Out") = std::move(out);
}

// Concat and its gradient as strided 2-D copies: along axis a, input i is a [pre, w_i * post]
// block of the [pre, W * post] output.
struct AxisBlocks {
  int64_t pre = 1, post = 1;
  int axis = 0;
};

AxisBlocks BlocksAlong(const Shape& shape, int axis_attr) {
  AxisBlocks b;
  const int rank = static_cast<int>(shape.size());
  b.axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  for (int i = 0; i < b.axis; ++i) b.pre *= shape[i];
  for (int i = b.axis + 1; i < rank; ++i) b.post *= shape[i];
  return b;
}

void Copy2D(const ExecutionContext& ctx, void* dst, size_t dst_pitch, const void* src,
            size_t src_pitch, size_t width_bytes, int64_t rows) {
  if (width_bytes == 0 || rows == 0) return;
  CheckCuda(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, rows,
                              cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(StreamOf(ctx))),
            "cudaMemcpy2DAsync");
}

void ConcatKernel(const ExecutionContext& ctx) {
  std::vector<const LoDTensor*> inputs = ctx.MultiInput("X");
  FLEET_KERNEL_ENFORCE(ctx, !inputs.empty(), "concat needs inputs");
  const Shape& first = inputs[0]->shape();
  const int rank = static_cast<int>(first.size());
  const int axis_attr = ctx.Attr<int32_t>("axis", 0);
  const AxisBlocks b = BlocksAlong(first, axis_attr);
  FLEET_KERNEL_ENFORCE(ctx, b.axis >= 0 && b.axis < rank, "axis=", axis_attr,
                       " is out of range for inputs of shape ", ShapeToString(first));
  FLEET_KERNEL_ENFORCE(ctx, b.axis > 0 || inputs[0]->lod().empty(),
                       "concat along axis 0 of LoD inputs is not supported on CUDA yet");
  Shape out_shape = first;
  out_shape[b.axis] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Shape s = inputs[i]->shape();
    FLEET_KERNEL_ENFORCE(ctx, s.size() == first.size() && inputs[i]->dtype() == inputs[0]->dtype(),
                         "input ", i, " is ", DTypeName(inputs[i]->dtype()), " ", ShapeToString(s),
                         " but input 0 is ", DTypeName(inputs[0]->dtype()), " ",
                         ShapeToString(first));
    out_shape[b.axis] += s[b.axis];
    s[b.axis] = first[b.axis];
    FLEET_KERNEL_ENFORCE(ctx, s == first, "concat along axis ", b.axis, ": input ", i,
                         " has shape ", ShapeToString(inputs[i]->shape()), " but input 0 has ",
                         ShapeToString(first));
  }
  const size_t es = SizeOf(inputs[0]->dtype());
  LoD lod = inputs[0]->lod();
  LoDTensor* out = ctx.Output("Out");
  out->Resize(out_shape);
  char* dst = static_cast<char*>(out->mutable_data(inputs[0]->dtype(), ctx.place()));
  out->set_lod(std::move(lod));
  const size_t out_pitch = out_shape[b.axis] * b.post * es;
  for (const LoDTensor* in : inputs) {
    const size_t w = in->dim(b.axis) * b.post * es;
    Copy2D(ctx, dst, out_pitch, in->raw_data(), w, w, b.pre);
    dst += w;
  }
}

void ConcatGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  std::vector<const LoDTensor*> inputs = ctx.MultiInput("X");
  const LoDTensor& dout = ctx.Input("Out@GRAD");
  const AxisBlocks b = BlocksAlong(dout.shape(), ctx.Attr<int32_t>("axis", 0));
  const size_t es = SizeOf(dout.dtype());
  const size_t pitch = dout.dim(b.axis) * b.post * es;
  std::vector<size_t> offsets;  // byte offset of each input's block in a row of Out@GRAD
  size_t offset = 0;
  for (const LoDTensor* in : inputs) {
    offsets.push_back(offset);
    offset += in->dim(b.axis) * b.post * es;
  }
  FLEET_KERNEL_ENFORCE(ctx, offset == pitch, "Out@GRAD has shape ", ShapeToString(dout.shape()),
                       " but the inputs add up to ", offset / (b.post * es), " along axis ",
                       b.axis);
  const char* src = static_cast<const char*>(dout.raw_data());
  // Autodiff drops unneeded gradients from X@GRAD: match each to its input.
  const std::vector<size_t> targets = GradTargets(ctx.op(), "X", "X@GRAD");
  for (size_t j = 0; j < targets.size(); ++j) {
    const LoDTensor& in = *inputs[targets[j]];
    const size_t w = in.dim(b.axis) * b.post * es;
    LoDTensor* dx = ctx.Output("X@GRAD", j);
    dx->Resize(in.shape());
    void* dst = dx->mutable_data(dout.dtype(), ctx.place());
    dx->set_lod(in.lod());
    Copy2D(ctx, dst, w, src + offsets[targets[j]], pitch, w, b.pre);
  }
}

void SoftmaxKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const int64_t width = x.rank() == 0 ? 1 : x.dim(-1);
  FLEET_KERNEL_ENFORCE(
      ctx, ctx.Attr<int32_t>("axis", -1) == -1 || ctx.Attr<int32_t>("axis", -1) == x.rank() - 1,
      "softmax on CUDA works on the last axis only");
  const float* xs = FloatData(ctx, "X");
  Softmax(xs, DeviceOutputLike(ctx, x, ctx.Output("Out")), width == 0 ? 0 : x.numel() / width,
          width, StreamOf(ctx));
}

void SoftmaxGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& y = ctx.Input("Out");
  const int64_t width = y.rank() == 0 ? 1 : y.dim(-1);
  SoftmaxGrad(FloatData(ctx, "Out"), FloatData(ctx, "Out@GRAD"),
              DeviceOutputLike(ctx, y, ctx.Output("X@GRAD")), width == 0 ? 0 : y.numel() / width,
              width, StreamOf(ctx));
}

struct XentShape {
  int64_t rows = 0, width = 0;
};

XentShape CheckHardLabels(const ExecutionContext& ctx, const LoDTensor& logits) {
  FLEET_KERNEL_ENFORCE(ctx, !ctx.Attr<bool>("soft_label", false),
                       "soft labels are not supported on CUDA yet");
  const int axis = ctx.Attr<int32_t>("axis", -1);
  FLEET_KERNEL_ENFORCE(ctx, axis == -1 || axis == logits.rank() - 1, "axis ", axis,
                       " is not supported: softmax_with_cross_entropy works on the last axis");
  FLEET_KERNEL_ENFORCE(ctx, logits.rank() >= 1, "Logits must have rank >= 1, got ",
                       ShapeToString(logits.shape()));
  XentShape s;
  s.width = logits.dim(-1);
  s.rows = s.width == 0 ? 0 : logits.numel() / s.width;
  const LoDTensor& label = ctx.Input("Label");
  FLEET_KERNEL_ENFORCE(ctx, label.dtype() == DType::kInt64 && label.numel() == s.rows,
                       "Label must be int64 with one label per row (", s.rows, "), got ",
                       DTypeName(label.dtype()), " ", ShapeToString(label.shape()));
  return s;
}

Shape LossShape(const LoDTensor& logits) {
  Shape shape = logits.shape();
  shape.back() = 1;
  return shape;
}

void SoftmaxXentKernel(const ExecutionContext& ctx) {
  const LoDTensor& logits = ctx.Input("Logits");
  const XentShape s = CheckHardLabels(ctx, logits);
  Tensor scratch;
  float* softmax = nullptr;
  if (ctx.HasOutput("Softmax")) {
    softmax = DeviceOutputLike(ctx, logits, ctx.Output("Softmax"));
  } else {
    scratch = DeviceScratch<float>(ctx, s.rows * s.width);
    softmax = scratch.data<float>();
  }
  LoDTensor* loss_t = ctx.Output("Loss");
  float* loss = DeviceOutput<float>(ctx, loss_t, LossShape(logits));
  loss_t->set_lod(logits.lod());
  SoftmaxCrossEntropyHard(FloatData(ctx, "Logits"), ctx.Input("Label").data<int64_t>(), softmax,
                          loss, s.rows, s.width, ctx.Attr<int64_t>("ignore_index", -100),
                          StreamOf(ctx));
}

void SoftmaxXentGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("Logits@GRAD")) return;
  const LoDTensor& logits = ctx.Input("Logits");
  const XentShape s = CheckHardLabels(ctx, logits);
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Loss@GRAD").numel() == s.rows, "Loss@GRAD has shape ",
                       ShapeToString(ctx.Input("Loss@GRAD").shape()), ", expected ", s.rows,
                       " rows");
  float* dx = DeviceOutputLike(ctx, logits, ctx.Output("Logits@GRAD"));
  const float* softmax = nullptr;
  if (ctx.HasInput("Softmax")) {
    softmax = FloatData(ctx, "Softmax");
  } else {
    Softmax(FloatData(ctx, "Logits"), dx, s.rows, s.width, StreamOf(ctx));
    softmax = dx;  // the gradient kernel reads and writes element i only
  }
  SoftmaxCrossEntropyHardGrad(softmax, ctx.Input("Label").data<int64_t>(),
                              FloatData(ctx, "Loss@GRAD"), dx, s.rows, s.width,
                              ctx.Attr<int64_t>("ignore_index", -100), StreamOf(ctx));
}

void SigmoidXentKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& label = ctx.Input("Label");
  FLEET_KERNEL_ENFORCE(ctx, label.shape() == x.shape(), "Label has shape ",
                       ShapeToString(label.shape()), " but X has ", ShapeToString(x.shape()));
  Tensor count;
  if (ctx.Attr<bool>("normalize", false)) count = DeviceScratch<float>(ctx, 1);
  SigmoidCrossEntropy(FloatData(ctx, "X"), FloatData(ctx, "Label"),
                      DeviceOutputLike(ctx, x, ctx.Output("Out")), x.numel(),
                      static_cast<float>(ctx.Attr<int64_t>("ignore_index", -100)),
                      count.initialized() ? count.data<float>() : nullptr, StreamOf(ctx));
}

void SigmoidXentGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  Tensor count;
  if (ctx.Attr<bool>("normalize", false)) count = DeviceScratch<float>(ctx, 1);
  SigmoidCrossEntropyGrad(FloatData(ctx, "X"), FloatData(ctx, "Label"), FloatData(ctx, "Out@GRAD"),
                          DeviceOutputLike(ctx, x, ctx.Output("X@GRAD")), x.numel(),
                          static_cast<float>(ctx.Attr<int64_t>("ignore_index", -100)),
                          count.initialized() ? count.data<float>() : nullptr, StreamOf(ctx));
}

}  // namespace

void RegisterCudaDenseKernels(OpRegistry* registry) {
  SetCudaKernel(registry, "feed", FeedKernel);
  // fetch shares the tensor into the fetch holder; the bindings copy it to the host.
  for (const char* type : {"fetch", "reshape", "reshape_grad"}) ShareCpuKernel(registry, type);
  SetCudaKernel(registry, "scale", ScaleKernel);
  RegisterActivation(registry, "relu", Activation::kRelu);
  RegisterActivation(registry, "sigmoid", Activation::kSigmoid);
  RegisterActivation(registry, "tanh", Activation::kTanh);
  SetCudaKernel(registry, "elementwise_add", AddKernel);
  SetCudaKernel(registry, "elementwise_add_grad", AddGradKernel);
  SetCudaKernel(registry, "mean", MeanKernel);
  SetCudaKernel(registry, "mean_grad", MeanGradKernel);
  SetCudaKernel(registry, "sum", SumKernel);
  SetCudaKernel(registry, "cast", CastKernel);
  SetCudaKernel(registry, "concat", ConcatKernel);
  SetCudaKernel(registry, "concat_grad", ConcatGradKernel);
  SetCudaKernel(registry, "softmax", SoftmaxKernel);
  SetCudaKernel(registry, "softmax_grad", SoftmaxGradKernel);
  SetCudaKernel(registry, "softmax_with_cross_entropy", SoftmaxXentKernel);
  SetCudaKernel(registry, "softmax_with_cross_entropy_grad", SoftmaxXentGradKernel);
  SetCudaKernel(registry, "sigmoid_cross_entropy_with_logits", SigmoidXentKernel);
  SetCudaKernel(registry, "sigmoid_cross_entropy_with_logits_grad", SigmoidXentGradKernel);
}

}  // namespace fleet::operators::cuda
