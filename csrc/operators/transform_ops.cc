// Ops that rearrange elements: transpose, expand, slice, squeeze, unsqueeze, assign and
// assign_value, with the attributes of PaddlePaddle fluid's ops of the same names. The forward
// kernels move bytes, so they work on every dtype; the gradients are float32.

#include <algorithm>
#include <cstring>

#include "operators/index_map.h"
#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

int NormalizeAxis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  const int64_t a = axis < 0 ? axis + r : axis;
  return a >= 0 && a < r ? static_cast<int>(a) : -1;
}

// Writes the gathered input into Out (fresh memory, so Out may be X).
void GatherInto(const ExecutionContext& ctx, const IndexMap& map) {
  const LoDTensor& x = ctx.Input("X");
  LoDTensor out(Tensor(x.dtype(), map.out_shape));
  map.Gather(x.raw_data(), out.mutable_data(x.dtype()), SizeOf(x.dtype()));
  *ctx.Output("Out") = out;
}

// ---- transpose --------------------------------------------------------------------------------

// `axis` must be a permutation of X's dimensions; `why` says how it is not.
bool CheckPermutation(const std::vector<int64_t>& perm, size_t rank, std::string* why) {
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank;
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < static_cast<int64_t>(rank) && !seen[p];
    if (ok) seen[p] = true;
  }
  if (!ok) {
    *why = absl::StrCat("axis ", ShapeToString(perm), " is not a permutation of X's ", rank,
                        " dimensions");
  }
  return ok;
}

void InferTranspose(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  const auto perm = ctx->Attr<std::vector<int64_t>>("axis");
  std::string why;
  FLEET_ENFORCE(CheckPermutation(perm, info.shape.size(), &why), InvalidArgument, "op ",
                ctx->op().Describe(), ": ", why);
  Shape out(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) out[d] = info.shape[perm[d]];
  info.shape = out;
  info.lod_level = 0;
  ctx->SetOutput("Out", info);
}

void TransposeKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const auto perm = ctx.Attr<std::vector<int64_t>>("axis");
  std::string why;
  if (!CheckPermutation(perm, x.shape().size(), &why)) ctx.Fail(why);
  const std::vector<int64_t> in_strides = RowMajorStrides(x.shape());
  IndexMap map;
  for (int64_t p : perm) {
    map.out_shape.push_back(x.dim(static_cast<int>(p)));
    map.stride.push_back(in_strides[p]);
    map.period.push_back(0);
  }
  GatherInto(ctx, map);
}

// The gradient of a transpose is the transpose by the inverse permutation.
std::vector<OpSpec> TransposeGradMaker(const OpSpec& fwd) {
  const auto perm = fwd.attrs.Get<std::vector<int64_t>>("axis", fwd.type);
  std::vector<int64_t> inverse(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) inverse[perm[d]] = static_cast<int64_t>(d);
  OpSpec grad;
  grad.type = "transpose";
  grad.inputs["X"] = {framework::GradName(fwd.Outputs("Out").at(0))};
  grad.outputs["Out"] = {framework::GradName(fwd.Inputs("X").at(0))};
  grad.attrs.Set("axis", inverse);
  return {grad};
}

// ---- expand -----------------------------------------------------------------------------------

bool ExpandShape(const Shape& x, const std::vector<int64_t>& times, Shape* out, std::string* why) {
  if (times.size() != x.size()) {
    *why = absl::StrCat("expand_times ", ShapeToString(times),
                        " needs one entry per dimension of X ", ShapeToString(x));
    return false;
  }
  out->resize(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    if (times[d] < 1) {
      *why = absl::StrCat("expand_times ", ShapeToString(times), " must be positive");
      return false;
    }
    (*out)[d] = x[d] < 0 ? -1 : x[d] * times[d];
  }
  return true;
}

void InferExpand(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  Shape out;
  std::string why;
  FLEET_ENFORCE(
      ExpandShape(info.shape, ctx->Attr<std::vector<int64_t>>("expand_times"), &out, &why),
      InvalidArgument, "op ", ctx->op().Describe(), ": ", why);
  info.shape = out;
  info.lod_level = 0;
  ctx->SetOutput("Out", info);
}

// The map from Out's elements to X's: each dimension wraps at X's size.
IndexMap ExpandMap(const ExecutionContext& ctx, const Shape& x) {
  IndexMap map;
  std::string why;
  if (!ExpandShape(x, ctx.Attr<std::vector<int64_t>>("expand_times"), &map.out_shape, &why)) {
    ctx.Fail(why);
  }
  map.stride = RowMajorStrides(x);
  map.period = x;
  return map;
}

void ExpandKernel(const ExecutionContext& ctx) {
  GatherInto(ctx, ExpandMap(ctx, ctx.Input("X").shape()));
}

// dX sums Out@GRAD over the tiles.
void ExpandGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  const IndexMap map = ExpandMap(ctx, x.shape());
  const LoDTensor& dout = ctx.Input("Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, dout.shape() == map.out_shape, "Out@GRAD has shape ",
                       ShapeToString(dout.shape()), ", expected ", ShapeToString(map.out_shape));
  const float* g = FloatData(ctx, "Out@GRAD");
  LoDTensor* dx_t = ctx.Output("X@GRAD");
  dx_t->Resize(x.shape());
  dx_t->set_lod({});
  float* dx = dx_t->mutable_data<float>();
  std::fill(dx, dx + x.numel(), 0.f);
  map.ForEach([&](int64_t o, int64_t off) { dx[off] += g[o]; });
}

// ---- slice ------------------------------------------------------------------------------------

// The window of `axes`/`starts`/`ends` in X: negative bounds count from the end, bounds past a
// dimension are clamped to it (Paddle's rule). Sets per-dimension begin and size.
bool SliceWindow(const OpSpec& op, const Shape& x, std::vector<int64_t>* begin, Shape* size,
                 std::string* why) {
  const auto axes = op.attrs.Get<std::vector<int64_t>>("axes", op.type);
  const auto starts = op.attrs.Get<std::vector<int64_t>>("starts", op.type);
  const auto ends = op.attrs.Get<std::vector<int64_t>>("ends", op.type);
  if (axes.size() != starts.size() || axes.size() != ends.size()) {
    *why = absl::StrCat("axes ", ShapeToString(axes), ", starts ", ShapeToString(starts),
                        " and ends ", ShapeToString(ends), " must have the same length");
    return false;
  }
  begin->assign(x.size(), 0);
  *size = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int axis = NormalizeAxis(axes[i], x.size());
    if (axis < 0) {
      *why = absl::StrCat("axis ", axes[i], " is out of range for X of shape ", ShapeToString(x));
      return false;
    }
    const int64_t dim = x[axis];
    if (dim < 0) {
      (*size)[axis] = -1;
      continue;
    }
    auto clamp = [dim](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t{0}, dim); };
    const int64_t s = clamp(starts[i]);
    const int64_t e = clamp(ends[i]);
    (*begin)[axis] = s;
    (*size)[axis] = std::max<int64_t>(e - s, 0);
  }
  return true;
}

void InferSlice(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("Input");
  std::vector<int64_t> begin;
  Shape size;
  std::string why;
  FLEET_ENFORCE(SliceWindow(ctx->op(), info.shape, &begin, &size, &why), InvalidArgument, "op ",
                ctx->op().Describe(), ": ", why);
  if (!size.empty() && !info.shape.empty() && size[0] != info.shape[0]) info.lod_level = 0;
  info.shape = size;
  ctx->SetOutput("Out", info);
}

IndexMap SliceMap(const ExecutionContext& ctx, const Shape& x) {
  IndexMap map;
  std::vector<int64_t> begin;
  std::string why;
  if (!SliceWindow(ctx.op(), x, &begin, &map.out_shape, &why)) ctx.Fail(why);
  map.stride = RowMajorStrides(x);
  map.period.assign(x.size(), 0);
  for (size_t d = 0; d < x.size(); ++d) map.base += begin[d] * map.stride[d];
  return map;
}

void SliceKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("Input");
  const IndexMap map = SliceMap(ctx, x.shape());
  LoDTensor out(Tensor(x.dtype(), map.out_shape));
  map.Gather(x.raw_data(), out.mutable_data(x.dtype()), SizeOf(x.dtype()));
  if (x.rank() > 0 && map.out_shape[0] == x.dim(0)) out.set_lod(x.lod());
  *ctx.Output("Out") = out;
}

// dInput is zero outside the window and Out@GRAD inside it.
void SliceGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("Input@GRAD")) return;
  const LoDTensor& x = ctx.Input("Input");
  const IndexMap map = SliceMap(ctx, x.shape());
  const LoDTensor& dout = ctx.Input("Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, dout.shape() == map.out_shape, "Out@GRAD has shape ",
                       ShapeToString(dout.shape()), ", expected ", ShapeToString(map.out_shape));
  const float* g = FloatData(ctx, "Out@GRAD");
  float* dx = ResizeLike(x, ctx.Output("Input@GRAD"));
  std::fill(dx, dx + x.numel(), 0.f);
  map.ForEach([&](int64_t o, int64_t off) { dx[off] = g[o]; });
}

// ---- squeeze / unsqueeze ----------------------------------------------------------------------

// squeeze drops the listed dimensions of size 1 (all of them when `axes` is empty); a listed
// dimension of another size is an error. -1 (compile time) is taken to be 1 when listed.
bool SqueezeShape(const Shape& x, const std::vector<int64_t>& axes, Shape* out, std::string* why) {
  std::vector<bool> drop(x.size(), false);
  for (int64_t a : axes) {
    const int axis = NormalizeAxis(a, x.size());
    if (axis < 0 || (x[axis] != 1 && x[axis] != -1)) {
      *why = absl::StrCat("axes ", ShapeToString(axes), " must name dimensions of size 1 of X ",
                          ShapeToString(x));
      return false;
    }
    drop[axis] = true;
  }
  out->clear();
  for (size_t d = 0; d < x.size(); ++d) {
    if (!(axes.empty() ? x[d] == 1 : drop[d])) out->push_back(x[d]);
  }
  return true;
}

// unsqueeze inserts dimensions of size 1 at `axes`, taken in order, each an index into the
// shape grown so far (Paddle's rule).
bool UnsqueezeShape(const Shape& x, const std::vector<int64_t>& axes, Shape* out,
                    std::string* why) {
  *out = x;
  for (int64_t a : axes) {
    const int64_t rank = static_cast<int64_t>(out->size()) + 1;
    const int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank) {
      *why =
          absl::StrCat("axes ", ShapeToString(axes), " are out of range for X ", ShapeToString(x));
      return false;
    }
    out->insert(out->begin() + axis, 1);
  }
  return true;
}

using ShapeRule = bool (*)(const Shape&, const std::vector<int64_t>&, Shape*, std::string*);

template <ShapeRule Rule>
void InferRelabel(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  Shape out;
  std::string why;
  FLEET_ENFORCE(Rule(info.shape, ctx->Attr<std::vector<int64_t>>("axes"), &out, &why),
                InvalidArgument, "op ", ctx->op().Describe(), ": ", why);
  if (out.empty() || info.shape.empty() || out[0] != info.shape[0]) info.lod_level = 0;
  info.shape = out;
  ctx->SetOutput("Out", info);
}

// Out is a view of X's memory with the new shape, as reshape's is.
template <ShapeRule Rule>
void RelabelKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  Shape shape;
  std::string why;
  if (!Rule(x.shape(), ctx.Attr<std::vector<int64_t>>("axes"), &shape, &why)) ctx.Fail(why);
  LoD lod = !shape.empty() && x.rank() > 0 && shape[0] == x.dim(0) ? x.lod() : LoD{};
  LoDTensor* out = ctx.Output("Out");
  out->ShareDataWith(x);
  out->Resize(std::move(shape));
  out->set_lod(std::move(lod));
}

// Both gradients are Out@GRAD seen with X's shape: reshape_grad's kernel.
std::vector<OpSpec> RelabelGradMaker(const OpSpec& fwd) {
  OpSpec grad;
  grad.type = "reshape_grad";
  grad.inputs["X"] = fwd.Inputs("X");
  grad.inputs["Out@GRAD"] = {framework::GradName(fwd.Outputs("Out").at(0))};
  grad.outputs["X@GRAD"] = {framework::GradName(fwd.Inputs("X").at(0))};
  return {grad};
}

// ---- assign / assign_value --------------------------------------------------------------------

// Out = a copy of X (shape, dtype and lod), into Out's existing variable when it has one.
void AssignKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  if (ctx.OutputVar("Out") == &ctx.InputVar("X")) return;
  LoDTensor* out = ctx.Output("Out");
  out->CopyFrom(x);
  out->set_lod(x.lod());
}

std::vector<OpSpec> AssignGradMaker(const OpSpec& fwd) {
  OpSpec grad;
  grad.type = "assign";
  grad.inputs["X"] = {framework::GradName(fwd.Outputs("Out").at(0))};
  grad.outputs["Out"] = {framework::GradName(fwd.Inputs("X").at(0))};
  return {grad};
}

DType ValueDType(const OpSpec& op) {
  return DTypeFromInt(op.attrs.GetOr<int32_t>("dtype", static_cast<int>(DType::kFloat32), op.type),
                      absl::StrCat("op ", op.Describe(), ": attribute dtype"));
}

void InferAssignValue(InferShapeContext* ctx) {
  VarInfo info;
  info.shape = ctx->Attr<std::vector<int64_t>>("shape");
  info.dtype = ValueDType(ctx->op());
  ctx->SetOutput("Out", info);
}

// Out = the constant held in the attributes: fp32_values for floats, int64_values for
// integers and bool (Python writes NumPy arrays this way).
void AssignValueKernel(const ExecutionContext& ctx) {
  const DType dtype = ValueDType(ctx.op());
  Shape shape = ctx.Attr<std::vector<int64_t>>("shape");
  const bool is_float = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  const auto floats = ctx.Attr<std::vector<float>>("fp32_values", {});
  const auto ints = ctx.Attr<std::vector<int64_t>>("int64_values", {});
  const size_t count = is_float ? floats.size() : ints.size();
  FLEET_KERNEL_ENFORCE(ctx, static_cast<int64_t>(count) == NumElements(shape), "shape ",
                       ShapeToString(shape), " needs ", NumElements(shape), " values, got ", count);
  LoDTensor* out = ctx.Output("Out");
  out->Resize(std::move(shape));
  out->set_lod({});
  void* data = out->mutable_data(dtype);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* dst = static_cast<T*>(data);
    for (size_t i = 0; i < count; ++i) {
      dst[i] = is_float ? static_cast<T>(floats[i]) : static_cast<T>(ints[i]);
    }
  });
}

}  // namespace

void RegisterTransformOps(OpRegistry* registry) {
  OpInfo& transpose = registry->Register("transpose");
  transpose.infer_shape = InferTranspose;
  transpose.grad_maker = TransposeGradMaker;
  SetCpuKernel(&transpose, TransposeKernel);

  OpInfo& expand = registry->Register("expand");
  expand.infer_shape = InferExpand;
  expand.grad_maker = framework::SingleGradOp({"X"}, {}, {"Out"}, {"X"});
  SetCpuKernel(&expand, ExpandKernel);
  OpInfo& expand_grad = registry->Register("expand_grad");
  expand_grad.infer_shape = SameAs("X", "X@GRAD");
  SetCpuKernel(&expand_grad, ExpandGradKernel);

  OpInfo& slice = registry->Register("slice");
  slice.infer_shape = InferSlice;
  slice.grad_maker = framework::SingleGradOp({"Input"}, {}, {"Out"}, {"Input"});
  SetCpuKernel(&slice, SliceKernel);
  OpInfo& slice_grad = registry->Register("slice_grad");
  slice_grad.infer_shape = SameAs("Input", "Input@GRAD");
  SetCpuKernel(&slice_grad, SliceGradKernel);

  OpInfo& squeeze = registry->Register("squeeze");
  squeeze.infer_shape = InferRelabel<SqueezeShape>;
  squeeze.grad_maker = RelabelGradMaker;
  SetCpuKernel(&squeeze, RelabelKernel<SqueezeShape>);

  OpInfo& unsqueeze = registry->Register("unsqueeze");
  unsqueeze.infer_shape = InferRelabel<UnsqueezeShape>;
  unsqueeze.grad_maker = RelabelGradMaker;
  SetCpuKernel(&unsqueeze, RelabelKernel<UnsqueezeShape>);

  OpInfo& assign = registry->Register("assign");
  assign.infer_shape = SameAs("X", "Out");
  assign.grad_maker = AssignGradMaker;
  SetCpuKernel(&assign, AssignKernel);

  OpInfo& assign_value = registry->Register("assign_value");
  assign_value.infer_shape = InferAssignValue;
  SetCpuKernel(&assign_value, AssignValueKernel);
}

}  // namespace fleet::operators
