// CUDA kernels of lookup_table (with its SelectedRows gradient), sequence_pool and the
// optimizers sgd, momentum and adam (dense, and sparse: lazy adam and sgd row by row, the others
// through a dense gradient so that every row's state decays as on the CPU). The rows of a sparse
// gradient stay on the device (core/selected_rows.h): no step waits for the host.

#include "operators/cuda/glue.h"

namespace fleet::operators::cuda {
namespace {

constexpr int64_t kNoPadding = -1;

struct LookupShape {
  int64_t num_ids = 0, vocab = 0, width = 0, padding = kNoPadding;
};

// Ids are not range-checked on the device (that would need a wait for the host); an id outside
// the table reads or writes outside it, as in Paddle's CUDA kernel. The CPU executor checks.
LookupShape CheckLookup(const ExecutionContext& ctx, const Shape& w) {
  FLEET_KERNEL_ENFORCE(ctx, w.size() == 2, "W '", ctx.InputName("W"),
                       "' must be a [vocab, dim] matrix, got shape ", ShapeToString(w));
  const LoDTensor& ids = ctx.Input("Ids");
  FLEET_KERNEL_ENFORCE(ctx, ids.dtype() == DType::kInt64, "Ids '", ctx.InputName("Ids"), "' is ",
                       DTypeName(ids.dtype()), ", expected int64");
  return {ids.numel(), w[0], w[1], ctx.Attr<int64_t>("padding_idx", kNoPadding)};
}

void LookupKernel(const ExecutionContext& ctx) {
  const LoDTensor& w = ctx.Input("W");
  const LookupShape l = CheckLookup(ctx, w.shape());
  const LoDTensor& ids = ctx.Input("Ids");
  LoDTensor* out = ctx.Output("Out");
  float* os = DeviceOutput<float>(ctx, out, EmbeddingOutputShape(ids.shape(), l.width));
  out->set_lod(ids.lod());
  EmbeddingLookup(FloatData(ctx, "W"), ids.data<int64_t>(), os, l.num_ids, l.width, l.padding,
                  StreamOf(ctx));
}

void LookupGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("W@GRAD")) return;
  const LookupShape l = CheckLookup(ctx, ctx.Input("W").shape());
  const LoDTensor& dout = ctx.Input("Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, dout.numel() == l.num_ids * l.width, "Out@GRAD has shape ",
                       ShapeToString(dout.shape()), " but ", l.num_ids, " ids of width ", l.width,
                       " were looked up");
  const int64_t* ids = ctx.Input("Ids").data<int64_t>();
  if (!ctx.Attr<bool>("is_sparse", false)) {
    LoDTensor* dw = ctx.Output("W@GRAD");
    dw->set_lod({});
    float* dws = DeviceOutput<float>(ctx, dw, {l.vocab, l.width});
    ZeroBytes(dws, ctx.place(), dw->nbytes());
    EmbeddingDenseGrad(ids, FloatData(ctx, "Out@GRAD"), dws, l.num_ids, l.width, l.padding,
                       StreamOf(ctx));
    return;
  }
  // Rows: the ids (padding ids as -1, which every consumer skips); values: a view of Out@GRAD.
  auto* grad = ctx.OutputVar("W@GRAD")->GetMutable<SelectedRows>();
  grad->set_height(l.vocab);
  grad->mutable_rows()->clear();
  Tensor* value = grad->mutable_value();
  value->ShareDataWith(dout);
  value->Resize({l.num_ids, l.width});
  Tensor* rows = grad->mutable_device_rows();
  if (l.padding == kNoPadding) {
    rows->ShareDataWith(ctx.Input("Ids"));
    rows->Resize({l.num_ids});
  } else {
    rows->Resize({l.num_ids});
    SparseGradRows(ids, rows->mutable_data<int64_t>(ctx.place()), l.num_ids, l.padding,
                   StreamOf(ctx));
  }
}

Pool PoolOf(const ExecutionContext& ctx) {
  const std::string type = ctx.Attr<std::string>("pooltype", "AVERAGE");
  if (type == "SUM") return Pool::kSum;
  if (type == "AVERAGE") return Pool::kAverage;
  if (type == "SQRT") return Pool::kSqrt;
  ctx.Fail(
      absl::StrCat("pooltype ", type, " is not supported on CUDA yet (SUM, AVERAGE and SQRT are)"));
}

void SequencePoolKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const Pool pool = PoolOf(ctx);
  FLEET_KERNEL_ENFORCE(ctx, x.lod_level() >= 1 && x.rank() >= 1, "X '", ctx.InputName("X"),
                       "' needs a lod and rank >= 1, got ", ShapeToString(x.shape()), " lod ",
                       LoDToString(x.lod()));
  x.ValidateLoD(ctx.op().Describe());
  FLEET_KERNEL_ENFORCE(ctx, ctx.Attr<float>("pad_value", 0.f) == 0.f,
                       "pad_value other than 0 is not supported on CUDA yet");
  const int64_t num_seq = static_cast<int64_t>(x.lod().back().size()) - 1;
  const int64_t width = x.dim(0) == 0 ? 0 : x.numel() / x.dim(0);
  Shape shape = x.shape();
  shape[0] = num_seq;
  LoD lod = x.lod();
  lod.pop_back();
  LoDTensor* out = ctx.Output("Out");
  float* os = DeviceOutput<float>(ctx, out, shape);
  out->set_lod(std::move(lod));
  const Tensor offsets = DeviceOffsets(ctx, x, x.lod_level() - 1);
  SequencePool(pool, FloatData(ctx, "X"), offsets.data<int64_t>(), os, num_seq, width,
               StreamOf(ctx));
}

void SequencePoolGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  const Pool pool = PoolOf(ctx);
  const int64_t num_seq = static_cast<int64_t>(x.lod().back().size()) - 1;
  const int64_t width = x.dim(0) == 0 ? 0 : x.numel() / x.dim(0);
  FLEET_KERNEL_ENFORCE(ctx, ctx.Input("Out@GRAD").numel() == num_seq * width, "Out@GRAD has shape ",
                       ShapeToString(ctx.Input("Out@GRAD").shape()), ", expected ", num_seq,
                       " sequences of ", width);
  float* dx = DeviceOutputLike(ctx, x, ctx.Output("X@GRAD"));
  // Rows outside every sequence (none in a valid lod) would keep stale values: zero first
  // only when the lod does not cover X.
  if (static_cast<int64_t>(x.lod().back().back()) != x.dim(0)) {
    ZeroBytes(dx, ctx.place(), x.nbytes());
  }
  const Tensor offsets = DeviceOffsets(ctx, x, x.lod_level() - 1);
  SequencePoolGrad(pool, FloatData(ctx, "Out@GRAD"), offsets.data<int64_t>(), dx, num_seq, width,
                   StreamOf(ctx));
}

// ---- optimizers -----------------------------------------------------------------------------

// The output slot's tensor holding the input's values, on the device, for an in-place update
// (a no-op when both slots name one variable), as the CPU kernels' UpdateInPlace.
float* UpdateInPlace(const ExecutionContext& ctx, const std::string& in, const std::string& out,
                     const Shape& shape) {
  const LoDTensor& src = ctx.Input(in);
  FLEET_KERNEL_ENFORCE(ctx, src.dtype() == DType::kFloat32 && src.shape() == shape, in, " '",
                       ctx.InputName(in), "' is ", DTypeName(src.dtype()), " ",
                       ShapeToString(src.shape()), ", expected float32 ", ShapeToString(shape));
  Variable* out_var = ctx.OutputVar(out);
  if (out_var != &ctx.InputVar(in)) out_var->GetMutable<LoDTensor>()->CopyFrom(src);
  return out_var->GetMutable<LoDTensor>()->data<float>();
}

const float* Scalar(const ExecutionContext& ctx, const std::string& slot) {
  const LoDTensor& t = ctx.Input(slot);
  FLEET_KERNEL_ENFORCE(ctx, t.dtype() == DType::kFloat32 && t.numel() == 1, slot, " '",
                       ctx.InputName(slot), "' must be one float32, got ", DTypeName(t.dtype()),
                       " ", ShapeToString(t.shape()));
  return t.data<float>();
}

bool SparseGrad(const ExecutionContext& ctx) { return ctx.InputVar("Grad").IsType<SelectedRows>(); }

struct RowsView {
  const int64_t* rows = nullptr;
  const float* value = nullptr;
  int64_t num_rows = 0, width = 0;
};

RowsView CheckRows(const ExecutionContext& ctx, const Shape& param) {
  const SelectedRows& g = ctx.InputVar("Grad").Get<SelectedRows>();
  FLEET_KERNEL_ENFORCE(ctx, !param.empty() && g.height() == param[0], "Grad '",
                       ctx.InputName("Grad"), "' has height ", g.height(), " but Param has shape ",
                       ShapeToString(param));
  RowsView v;
  v.width = param[0] == 0 ? 0 : NumElements(param) / param[0];
  v.num_rows = g.num_rows();
  if (v.num_rows == 0) return v;
  FLEET_KERNEL_ENFORCE(ctx, g.value().numel() == v.num_rows * v.width, "Grad '",
                       ctx.InputName("Grad"), "' values have shape ",
                       ShapeToString(g.value().shape()), ", expected ", v.num_rows, " rows of ",
                       v.width);
  FLEET_KERNEL_ENFORCE(ctx, g.device_rows().initialized(), "Grad '", ctx.InputName("Grad"),
                       "' has no rows on the device");
  v.rows = g.device_rows().data<int64_t>();
  v.value = g.value().data<float>();
  return v;
}

// A sparse gradient made dense (duplicates added), for the updates that touch every row.
Tensor DenseFromRows(const ExecutionContext& ctx, const Shape& param) {
  const RowsView v = CheckRows(ctx, param);
  Tensor dense = DeviceScratch<float>(ctx, NumElements(param));
  ZeroBytes(dense.data<float>(), ctx.place(), dense.nbytes());
  if (v.num_rows > 0) {
    // Sgd of rate -1 adds each row: dense[row] -= -1 * value.
    static const float kMinusOne = -1.f;
    Tensor rate = DeviceScratch<float>(ctx, 1);
    CopyBytes(rate.data<float>(), ctx.place(), &kMinusOne, CPUPlace(), sizeof(float));
    SparseSgd(rate.data<float>(), v.rows, v.value, dense.data<float>(), v.num_rows, v.width,
              StreamOf(ctx));
  }
  return dense;
}

const float* DenseGrad(const ExecutionContext& ctx, const Shape& param) {
  const LoDTensor& g = ctx.Input("Grad");
  FLEET_KERNEL_ENFORCE(ctx, g.dtype() == DType::kFloat32 && g.numel() == NumElements(param),
                       "Grad '", ctx.InputName("Grad"), "' is ", DTypeName(g.dtype()), " ",
                       ShapeToString(g.shape()), ", expected float32 like Param ",
                       ShapeToString(param));
  return g.data<float>();
}

void SgdKernel(const ExecutionContext& ctx) {
  const Shape shape = ctx.Input("Param").shape();
  const float* lr = Scalar(ctx, "LearningRate");
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  if (SparseGrad(ctx)) {
    const RowsView v = CheckRows(ctx, shape);
    SparseSgd(lr, v.rows, v.value, p, v.num_rows, v.width, StreamOf(ctx));
  } else {
    SgdDense(lr, DenseGrad(ctx, shape), p, NumElements(shape), StreamOf(ctx));
  }
}

void MomentumKernel(const ExecutionContext& ctx) {
  const Shape shape = ctx.Input("Param").shape();
  const float* lr = Scalar(ctx, "LearningRate");
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* v = UpdateInPlace(ctx, "Velocity", "VelocityOut", shape);
  Tensor dense;
  const float* g = nullptr;
  if (SparseGrad(ctx)) {
    dense = DenseFromRows(ctx, shape);
    g = dense.data<float>();
  } else {
    g = DenseGrad(ctx, shape);
  }
  MomentumDense(lr, ctx.Attr<float>("mu"), ctx.Attr<bool>("use_nesterov", false), g, p, v,
                NumElements(shape), StreamOf(ctx));
}

float* PowOut(const ExecutionContext& ctx, const std::string& in, const std::string& out) {
  if (!ctx.HasOutput(out)) return nullptr;
  Variable* out_var = ctx.OutputVar(out);
  if (out_var == &ctx.InputVar(in)) return out_var->GetMutable<LoDTensor>()->data<float>();
  return DeviceOutput<float>(ctx, out_var->GetMutable<LoDTensor>(), {1});
}

void AdamKernel(const ExecutionContext& ctx) {
  AdamConfig config;
  config.beta1 = ctx.Attr<float>("beta1", 0.9f);
  config.beta2 = ctx.Attr<float>("beta2", 0.999f);
  config.epsilon = ctx.Attr<float>("epsilon", 1e-8f);
  const Shape shape = ctx.Input("Param").shape();
  const float* lr = Scalar(ctx, "LearningRate");
  const float* b1p = Scalar(ctx, "Beta1Pow");
  const float* b2p = Scalar(ctx, "Beta2Pow");
  float* p = UpdateInPlace(ctx, "Param", "ParamOut", shape);
  float* m1 = UpdateInPlace(ctx, "Moment1", "Moment1Out", shape);
  float* m2 = UpdateInPlace(ctx, "Moment2", "Moment2Out", shape);
  float* b1p_out = PowOut(ctx, "Beta1Pow", "Beta1PowOut");
  float* b2p_out = PowOut(ctx, "Beta2Pow", "Beta2PowOut");
  const int64_t n = NumElements(shape);
  if (!SparseGrad(ctx)) {
    AdamDense(config, lr, b1p, b2p, DenseGrad(ctx, shape), p, m1, m2, b1p_out, b2p_out, n,
              StreamOf(ctx));
    return;
  }
  if (!ctx.Attr<bool>("lazy_mode", false)) {
    const Tensor dense = DenseFromRows(ctx, shape);
    AdamDense(config, lr, b1p, b2p, dense.data<float>(), p, m1, m2, b1p_out, b2p_out, n,
              StreamOf(ctx));
    return;
  }
  const RowsView v = CheckRows(ctx, shape);
  const int64_t height = shape[0];
  Tensor scratch = DeviceScratch<float>(ctx, n);
  Tensor claimed = DeviceScratch<int32_t>(ctx, height);
  ZeroBytes(scratch.data<float>(), ctx.place(), scratch.nbytes());
  ZeroBytes(claimed.data<int32_t>(), ctx.place(), claimed.nbytes());
  AdamLazyRows(config, lr, b1p, b2p, v.rows, v.value, v.num_rows, v.width, p, m1, m2,
               scratch.data<float>(), claimed.data<int32_t>(), b1p_out, b2p_out, StreamOf(ctx));
}

}  // namespace

void RegisterCudaSparseKernels(OpRegistry* registry) {
  SetCudaKernel(registry, "lookup_table", LookupKernel);
  SetCudaKernel(registry, "lookup_table_grad", LookupGradKernel);
  SetCudaKernel(registry, "sequence_pool", SequencePoolKernel);
  SetCudaKernel(registry, "sequence_pool_grad", SequencePoolGradKernel);
}

void RegisterCudaOptimizerKernels(OpRegistry* registry) {
  SetCudaKernel(registry, "sgd", SgdKernel);
  SetCudaKernel(registry, "momentum", MomentumKernel);
  SetCudaKernel(registry, "adam", AdamKernel);
}

}  // namespace fleet::operators::cuda
