// Ops that move or relabel elements without arithmetic: concat, split, reshape, cast and
// fill_zeros_like. concat, split and reshape work on every dtype (they copy bytes).

#include <cstring>

#include "operators/grad_helpers.h"
#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

// Normalises a possibly negative axis; returns -1 when out of range.
int NormalizeAxis(int axis, size_t rank) {
  const int r = static_cast<int>(rank);
  const int a = axis < 0 ? axis + r : axis;
  return a >= 0 && a < r ? a : -1;
}

int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

// Slice [from, from + count) along `axis` of a row-major tensor of `shape`, seen as `outer` rows
// of `whole_row` bytes of which the slice is `part_row` bytes at byte `offset`. concat and split
// copy such slices with one memcpy per row, whatever the dtype.
struct AxisSlice {
  AxisSlice(const Shape& shape, DType dtype, int axis, int64_t from, int64_t count) {
    const int64_t inner = Product(shape, axis + 1, shape.size()) * SizeOf(dtype);
    outer = Product(shape, 0, axis);
    whole_row = shape[axis] * inner;
    part_row = count * inner;
    offset = from * inner;
  }
  void Gather(const void* whole, void* part) const {
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(static_cast<char*>(part) + o * part_row,
                  static_cast<const char*>(whole) + o * whole_row + offset, part_row);
    }
  }
  void Scatter(const void* part, void* whole) const {
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(static_cast<char*>(whole) + o * whole_row + offset,
                  static_cast<const char*>(part) + o * part_row, part_row);
    }
  }

  int64_t outer, whole_row, part_row, offset;
};

// ---- concat ---------------------------------------------------------------------------------

void InferConcat(InferShapeContext* ctx) {
  const size_t n = ctx->InputSize("X");
  FLEET_ENFORCE(n > 0, InvalidArgument, "op ", ctx->op().Describe(), ": concat needs inputs");
  VarInfo out = ctx->Input("X", 0);
  const int axis_attr = ctx->Attr<int32_t>("axis", 0);
  const int axis = NormalizeAxis(axis_attr, out.shape.size());
  FLEET_ENFORCE(axis >= 0, InvalidArgument, "op ", ctx->op().Describe(), ": axis=", axis_attr,
                " is out of range for inputs of shape ", ShapeToString(out.shape));
  for (size_t i = 1; i < n; ++i) {
    const Shape& s = ctx->Input("X", i).shape;
    bool fits = s.size() == out.shape.size();
    for (size_t d = 0; fits && d < s.size(); ++d) {
      if (static_cast<int>(d) == axis) continue;
      fits = s[d] == out.shape[d] || s[d] < 0 || out.shape[d] < 0;
    }
    FLEET_ENFORCE(fits, InvalidArgument, "op ", ctx->op().Describe(), ": concat along axis ", axis,
                  ": input ", i, " has shape ", ShapeToString(s), " but input 0 has ",
                  ShapeToString(ctx->Input("X", 0).shape));
    out.shape[axis] = (out.shape[axis] < 0 || s[axis] < 0) ? -1 : out.shape[axis] + s[axis];
  }
  ctx->SetOutput("Out", out);
}

// The lod of concatenating sequences along axis 0: each input's offsets shifted past the
// previous inputs' (at every level the shift is the running last offset). Empty if any input
// has no lod or the levels differ.
LoD ConcatLoD(const std::vector<const LoDTensor*>& inputs) {
  LoD lod = inputs[0]->lod();
  for (size_t i = 1; i < inputs.size(); ++i) {
    const LoD& next = inputs[i]->lod();
    if (next.size() != lod.size()) return {};
    for (size_t l = 0; l < lod.size(); ++l) {
      const size_t shift = lod[l].back();
      for (size_t k = 1; k < next[l].size(); ++k) lod[l].push_back(next[l][k] + shift);
    }
  }
  return lod;
}

void ConcatKernel(const ExecutionContext& ctx) {
  std::vector<const LoDTensor*> inputs = ctx.MultiInput("X");
  FLEET_KERNEL_ENFORCE(ctx, !inputs.empty(), "concat needs inputs");
  const Shape& first = inputs[0]->shape();
  const int axis_attr = ctx.Attr<int32_t>("axis", 0);
  const int axis = NormalizeAxis(axis_attr, first.size());
  FLEET_KERNEL_ENFORCE(ctx, axis >= 0, "axis=", axis_attr, " is out of range for inputs of shape ",
                       ShapeToString(first));
  Shape out_shape = first;
  out_shape[axis] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Shape s = inputs[i]->shape();
    FLEET_KERNEL_ENFORCE(ctx, s.size() == first.size() && inputs[i]->dtype() == inputs[0]->dtype(),
                         "input ", i, " is ", DTypeName(inputs[i]->dtype()), " ", ShapeToString(s),
                         " but input 0 is ", DTypeName(inputs[0]->dtype()), " ",
                         ShapeToString(first));
    out_shape[axis] += s[axis];
    s[axis] = first[axis];
    FLEET_KERNEL_ENFORCE(ctx, s == first, "concat along axis ", axis, ": input ", i, " has shape ",
                         ShapeToString(inputs[i]->shape()), " but input 0 has ",
                         ShapeToString(first));
  }
  LoD lod = axis == 0 ? ConcatLoD(inputs) : inputs[0]->lod();
  // The output may be one of the inputs: then write fresh memory and swap it in at the end.
  LoDTensor* out = ctx.Output("Out");
  LoDTensor scratch;
  LoDTensor* target = out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (&ctx.InputVar("X", i) == ctx.OutputVar("Out")) target = &scratch;
  }
  target->Resize(out_shape);
  void* dst = target->mutable_data(inputs[0]->dtype());
  int64_t from = 0;
  for (const LoDTensor* in : inputs) {
    AxisSlice(out_shape, in->dtype(), axis, from, in->dim(axis)).Scatter(in->raw_data(), dst);
    from += in->dim(axis);
  }
  target->set_lod(std::move(lod));
  if (target != out) *out = scratch;
}

// Slices Out@GRAD back into the gradients of the inputs that want one.
void ConcatGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  std::vector<const LoDTensor*> inputs = ctx.MultiInput("X");
  const LoDTensor& dout = ctx.Input("Out@GRAD");
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis", 0), dout.shape().size());
  FLEET_KERNEL_ENFORCE(ctx, axis >= 0, "axis is out of range for Out@GRAD of shape ",
                       ShapeToString(dout.shape()));
  std::vector<int64_t> starts;
  int64_t total = 0;
  for (const LoDTensor* in : inputs) {
    starts.push_back(total);
    total += in->dim(axis);
  }
  FLEET_KERNEL_ENFORCE(ctx, total == dout.dim(axis), "Out@GRAD has shape ",
                       ShapeToString(dout.shape()), " but the inputs add up to ", total,
                       " along axis ", axis);
  std::vector<size_t> targets = GradTargets(ctx.op(), "X", "X@GRAD");
  for (size_t j = 0; j < targets.size(); ++j) {
    const LoDTensor& in = *inputs[targets[j]];
    Shape expected = dout.shape();
    expected[axis] = in.dim(axis);
    FLEET_KERNEL_ENFORCE(ctx, expected == in.shape(), "Out@GRAD has shape ",
                         ShapeToString(dout.shape()), ", which does not fit input ", targets[j],
                         " of shape ", ShapeToString(in.shape()));
    LoDTensor* dx = ctx.Output("X@GRAD", j);
    dx->Resize(in.shape());
    dx->set_lod(in.lod());
    void* dst = dx->mutable_data(dout.dtype());
    AxisSlice(dout.shape(), dout.dtype(), axis, starts[targets[j]], in.dim(axis))
        .Gather(dout.raw_data(), dst);
  }
}

// ---- split ----------------------------------------------------------------------------------

// Sizes of the outputs along `axis` for a dimension of `dim` (-1: unknown, compile time).
// Returns false with `why` set when the attributes do not fit.
bool SplitSizes(const OpSpec& op, int64_t dim, size_t outputs, std::vector<int64_t>* sizes,
                std::string* why) {
  const int num = op.attrs.GetOr<int32_t>("num", 0, op.type);
  std::vector<int64_t> sections = op.attrs.GetOr<std::vector<int64_t>>("sections", {}, op.type);
  if (num > 0) {
    if (static_cast<size_t>(num) != outputs || (dim >= 0 && dim % num != 0)) {
      *why = absl::StrCat("num=", num, " must equal the number of outputs (", outputs,
                          ") and divide the split dimension (", dim, ")");
      return false;
    }
    sizes->assign(num, dim < 0 ? -1 : dim / num);
    return true;
  }
  if (sections.size() != outputs || outputs == 0) {
    *why = absl::StrCat("sections ", ShapeToString(sections), " must have one entry per output (",
                        outputs, "), or num must be set");
    return false;
  }
  int64_t known = 0;
  int unknown = -1;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] == -1 && unknown < 0) {
      unknown = static_cast<int>(i);
    } else if (sections[i] < 0) {
      *why = absl::StrCat("sections ", ShapeToString(sections),
                          " may hold one -1, no other negative size");
      return false;
    } else {
      known += sections[i];
    }
  }
  if (dim >= 0 && (unknown < 0 ? known != dim : known > dim)) {
    *why = absl::StrCat("sections ", ShapeToString(sections),
                        " do not add up to the split dimension ", dim);
    return false;
  }
  *sizes = sections;
  if (unknown >= 0) (*sizes)[unknown] = dim < 0 ? -1 : dim - known;
  return true;
}

void InferSplit(InferShapeContext* ctx) {
  const VarInfo& x = ctx->Input("X");
  const int axis_attr = ctx->Attr<int32_t>("axis", 0);
  const int axis = NormalizeAxis(axis_attr, x.shape.size());
  FLEET_ENFORCE(axis >= 0, InvalidArgument, "op ", ctx->op().Describe(), ": axis=", axis_attr,
                " is out of range for X of shape ", ShapeToString(x.shape));
  std::vector<int64_t> sizes;
  std::string why;
  FLEET_ENFORCE(SplitSizes(ctx->op(), x.shape[axis], ctx->op().Outputs("Out").size(), &sizes, &why),
                InvalidArgument, "op ", ctx->op().Describe(), ": ", why);
  std::vector<VarInfo> outs(sizes.size(), x);
  for (size_t i = 0; i < sizes.size(); ++i) {
    outs[i].shape[axis] = sizes[i];
    if (axis == 0) outs[i].lod_level = 0;
  }
  ctx->SetOutputs("Out", outs);
}

void SplitKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const int axis_attr = ctx.Attr<int32_t>("axis", 0);
  const int axis = NormalizeAxis(axis_attr, x.shape().size());
  FLEET_KERNEL_ENFORCE(ctx, axis >= 0, "axis=", axis_attr, " is out of range for X of shape ",
                       ShapeToString(x.shape()));
  std::vector<int64_t> sizes;
  std::string why;
  if (!SplitSizes(ctx.op(), x.dim(axis), ctx.OutputSize("Out"), &sizes, &why)) ctx.Fail(why);
  // An output may be X itself: then read from a copy, since writing it reuses X's memory.
  LoDTensor source = x;
  for (size_t i = 0; i < ctx.OutputSize("Out"); ++i) {
    if (ctx.OutputVar("Out", i) == &ctx.InputVar("X")) source.CopyFrom(x);
  }
  int64_t from = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape shape = source.shape();
    shape[axis] = sizes[i];
    LoDTensor* out = ctx.Output("Out", i);
    out->Resize(shape);
    out->set_lod(axis == 0 ? LoD{} : source.lod());
    void* dst = out->mutable_data(source.dtype());
    AxisSlice(source.shape(), source.dtype(), axis, from, sizes[i]).Gather(source.raw_data(), dst);
    from += sizes[i];
  }
}

// The gradient of split is the concat of the outputs' gradients (autodiff fills missing ones
// with zeros).
std::vector<OpSpec> SplitGradMaker(const OpSpec& fwd) {
  OpSpec grad;
  grad.type = "concat";
  for (const auto& name : fwd.Outputs("Out")) {
    grad.inputs["X"].push_back(framework::GradName(name));
  }
  grad.outputs["Out"] = {framework::GradName(fwd.Inputs("X").at(0))};
  grad.attrs.Set("axis", fwd.attrs.GetOr<int32_t>("axis", 0, fwd.type));
  return {grad};
}

// ---- reshape --------------------------------------------------------------------------------

// Out's shape for attribute `attr` (0 copies X's dimension at that index, one -1 is inferred).
// X may hold -1 (compile time); the inferred dimension is then known only when every unknown
// dimension of X is copied by a 0, which is how a -1 batch dimension passes through.
bool ReshapeTo(const Shape& x, const std::vector<int64_t>& attr, Shape* out, std::string* why) {
  out->assign(attr.begin(), attr.end());
  int unknown = -1;
  std::vector<bool> copied(x.size(), false);
  for (size_t i = 0; i < attr.size(); ++i) {
    if (attr[i] == 0) {
      if (i >= x.size()) {
        *why = absl::StrCat("shape ", ShapeToString(attr), " copies dimension ", i,
                            " (0) but X of shape ", ShapeToString(x), " has only ", x.size());
        return false;
      }
      (*out)[i] = x[i];
      copied[i] = true;
    } else if (attr[i] == -1 && unknown < 0) {
      unknown = static_cast<int>(i);
    } else if (attr[i] < 0) {
      *why = absl::StrCat("shape ", ShapeToString(attr),
                          " may hold one -1 and no other negative size");
      return false;
    }
  }
  // Sizes of X and Out outside the copied dimensions; -1 when unknown.
  int64_t x_rest = 1, out_rest = 1;
  for (size_t i = 0; i < x.size(); ++i) {
    if (copied[i]) continue;
    x_rest = (x[i] < 0 || x_rest < 0) ? -1 : x_rest * x[i];
  }
  for (size_t i = 0; i < out->size(); ++i) {
    if (!copied[i] && static_cast<int>(i) != unknown) out_rest *= (*out)[i];
  }
  if (unknown >= 0) {
    if (x_rest >= 0 && (out_rest == 0 || x_rest % out_rest != 0)) {
      *why = absl::StrCat("cannot infer the -1 of shape ", ShapeToString(attr), " for X of shape ",
                          ShapeToString(x));
      return false;
    }
    (*out)[unknown] = x_rest < 0 ? -1 : x_rest / out_rest;
  } else if (x_rest >= 0 && x_rest != out_rest) {
    *why = absl::StrCat("shape ", ShapeToString(attr), " holds ", out_rest,
                        " elements besides the copied dimensions, X of shape ", ShapeToString(x),
                        " holds ", x_rest);
    return false;
  }
  return true;
}

void InferReshape(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  Shape out;
  std::string why;
  FLEET_ENFORCE(ReshapeTo(info.shape, ctx->Attr<std::vector<int64_t>>("shape"), &out, &why),
                InvalidArgument, "op ", ctx->op().Describe(), ": ", why);
  if (out.empty() || info.shape.empty() || out[0] != info.shape[0]) info.lod_level = 0;
  info.shape = out;
  ctx->SetOutput("Out", info);
}

// Out is a view of X's memory with another shape (no copy), as Paddle's reshape2. Consequence:
// an op that later writes Out in place writes X too; programs do not do that to a reshape's
// output. X's lod is kept when the first dimension is.
void ReshapeKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  Shape shape;
  std::string why;
  if (!ReshapeTo(x.shape(), ctx.Attr<std::vector<int64_t>>("shape"), &shape, &why)) {
    ctx.Fail(why);
  }
  LoD lod = !shape.empty() && x.rank() > 0 && shape[0] == x.dim(0) ? x.lod() : LoD{};
  LoDTensor* out = ctx.Output("Out");
  out->ShareDataWith(x);
  out->Resize(std::move(shape));
  out->set_lod(std::move(lod));
}

// X@GRAD is a view of Out@GRAD with X's shape. The gradient tensors are written once per step
// by their producers and only read afterwards, so sharing is safe; X is an input of the grad op
// only for its shape and lod.
void ReshapeGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  const LoDTensor& x = ctx.Input("X");
  const LoDTensor& dout = ctx.Input("Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, dout.numel() == x.numel(), "Out@GRAD has shape ",
                       ShapeToString(dout.shape()), " but X has ", ShapeToString(x.shape()));
  LoD lod = x.lod();
  Shape shape = x.shape();
  LoDTensor* dx = ctx.Output("X@GRAD");
  dx->ShareDataWith(dout);
  dx->Resize(std::move(shape));
  dx->set_lod(std::move(lod));
}

// ---- cast -----------------------------------------------------------------------------------

void InferCast(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  const std::string what = absl::StrCat("op ", ctx->op().Describe(), ": attribute ");
  DTypeFromInt(ctx->Attr<int32_t>("in_dtype", static_cast<int>(info.dtype)), what + "in_dtype");
  info.dtype = DTypeFromInt(ctx->Attr<int32_t>("out_dtype"), what + "out_dtype");
  ctx->SetOutput("Out", info);
}

// Converts to out_dtype from whatever X holds (in_dtype documents the program; like Paddle, the
// kernel follows the data). To bool: x != 0.
void CastKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  const DType to = DTypeFromInt(ctx.Attr<int32_t>("out_dtype"),
                                absl::StrCat("op ", ctx.op().Describe(), ": attribute out_dtype"));
  LoDTensor out(Tensor(to, x.shape()));  // fresh memory: Out may be X
  void* dst = out.mutable_data(to);
  VisitDType(x.dtype(), [&](auto from_zero) {
    using From = decltype(from_zero);
    const From* src = x.data<From>();
    VisitDType(to, [&](auto to_zero) {
      using To = decltype(to_zero);
      To* d = static_cast<To*>(dst);
      for (int64_t i = 0; i < x.numel(); ++i) {
        if constexpr (std::is_same_v<To, bool>) {
          d[i] = src[i] != From{0};
        } else {
          d[i] = static_cast<To>(src[i]);
        }
      }
    });
  });
  out.set_lod(x.lod());
  *ctx.Output("Out") = out;
}

bool IsFloat(int dtype) {
  return dtype == static_cast<int>(DType::kFloat32) || dtype == static_cast<int>(DType::kFloat64);
}

// The gradient casts Out@GRAD back to in_dtype; casts from or to integers have none.
std::vector<OpSpec> CastGradMaker(const OpSpec& fwd) {
  const int in = fwd.attrs.GetOr<int32_t>("in_dtype", 0, fwd.type);
  const int out = fwd.attrs.Get<int32_t>("out_dtype", fwd.type);
  if (!IsFloat(in) || !IsFloat(out)) return {};
  OpSpec grad;
  grad.type = "cast";
  grad.inputs["X"] = {framework::GradName(fwd.Outputs("Out").at(0))};
  grad.outputs["Out"] = {framework::GradName(fwd.Inputs("X").at(0))};
  grad.attrs.Set("in_dtype", out);
  grad.attrs.Set("out_dtype", in);
  return {grad};
}

// ---- fill_zeros_like ------------------------------------------------------------------------

void FillZerosLikeKernel(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  LoDTensor* out = ctx.Output("Out");
  LoD lod = x.lod();
  out->Resize(x.shape());
  out->set_dtype(x.dtype());
  out->SetZero();
  out->set_lod(std::move(lod));
}

}  // namespace

void RegisterShapeOps(OpRegistry* registry) {
  OpInfo& concat = registry->Register("concat");
  concat.infer_shape = InferConcat;
  concat.grad_maker = framework::SingleGradOp({"X"}, {}, {"Out"}, {"X"});
  SetCpuKernel(&concat, ConcatKernel);
  OpInfo& concat_grad = registry->Register("concat_grad");
  concat_grad.infer_shape = GradsLikeInputs({"X"});
  SetCpuKernel(&concat_grad, ConcatGradKernel);

  OpInfo& split = registry->Register("split");
  split.infer_shape = InferSplit;
  split.grad_maker = SplitGradMaker;
  SetCpuKernel(&split, SplitKernel);

  OpInfo& reshape = registry->Register("reshape");
  reshape.infer_shape = InferReshape;
  reshape.grad_maker = framework::SingleGradOp({"X"}, {}, {"Out"}, {"X"});
  SetCpuKernel(&reshape, ReshapeKernel);
  OpInfo& reshape_grad = registry->Register("reshape_grad");
  reshape_grad.infer_shape = GradsLikeInputs({"X"});
  SetCpuKernel(&reshape_grad, ReshapeGradKernel);

  OpInfo& cast = registry->Register("cast");
  cast.infer_shape = InferCast;
  cast.grad_maker = CastGradMaker;
  SetCpuKernel(&cast, CastKernel);

  OpInfo& zeros = registry->Register("fill_zeros_like");
  zeros.infer_shape = SameAs("X", "Out");
  SetCpuKernel(&zeros, FillZerosLikeKernel);
}

}  // namespace fleet::operators
