// lookup_table: rows of an embedding table W [V, D] gathered for int64 ids, as Paddle fluid's
// op of the same name. This is the hot path of CTR models (CTR-DNN runs 26 lookups per batch),
// so the forward pass is one bounds check and one memcpy per id.
//
// Ids of shape [..., 1] give Out [..., D]; any other shape (e.g. [N]) gives Out [Ids..., D]
// (lookup_table_v2's rule). Out keeps Ids' lod. Rows of `padding_idx` (-1: none) are zero and
// get no gradient. `is_distributed` is accepted and ignored in a single process; the parameter
// server pass replaces distributed lookups with pull_sparse.

#include <cstring>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

constexpr int64_t kNoPadding = -1;

struct Lookup {
  const int64_t* ids;
  int64_t num_ids;
  int64_t vocab;
  int64_t width;
  int64_t padding_idx;
};

// Reads Ids and W's shape, checking dtypes and that every id other than padding_idx lies in
// [0, V); the error names the id, its position and V.
Lookup PrepareLookup(const ExecutionContext& ctx, const Shape& w_shape) {
  FLEET_KERNEL_ENFORCE(ctx, w_shape.size() == 2, "W '", ctx.InputName("W"),
                       "' must be a [vocab, dim] matrix, got shape ", ShapeToString(w_shape));
  const LoDTensor& ids = ctx.Input("Ids");
  FLEET_KERNEL_ENFORCE(ctx, ids.dtype() == DType::kInt64, "Ids '", ctx.InputName("Ids"), "' is ",
                       DTypeName(ids.dtype()), ", expected int64");
  Lookup l{ids.data<int64_t>(), ids.numel(), w_shape[0], w_shape[1],
           ctx.Attr<int64_t>("padding_idx", kNoPadding)};
  for (int64_t i = 0; i < l.num_ids; ++i) {
    const int64_t id = l.ids[i];
    // One unsigned compare covers id < 0 too; the padding test is rare and comes second.
    if (static_cast<uint64_t>(id) >= static_cast<uint64_t>(l.vocab) && id != l.padding_idx) {
      ctx.Fail(absl::StrCat("id ", id, " at position ", i, " of Ids '", ctx.InputName("Ids"),
                            "' is outside the table: expected 0 <= id < ", l.vocab,
                            " (W has shape ", ShapeToString(w_shape), ")"));
    }
  }
  return l;
}

void LookupTableKernel(const ExecutionContext& ctx) {
  const LoDTensor& w_t = ctx.Input("W");
  const Lookup l = PrepareLookup(ctx, w_t.shape());
  const float* w = FloatData(ctx, "W");
  const LoDTensor& ids_t = ctx.Input("Ids");
  LoDTensor* out_t = ctx.Output("Out");
  out_t->Resize(EmbeddingOutputShape(ids_t.shape(), l.width));
  out_t->set_lod(ids_t.lod());
  float* out = out_t->mutable_data<float>();
  const size_t row_bytes = sizeof(float) * l.width;
  for (int64_t i = 0; i < l.num_ids; ++i) {
    const int64_t id = l.ids[i];
    if (id == l.padding_idx) {
      std::memset(out + i * l.width, 0, row_bytes);
    } else {
      std::memcpy(out + i * l.width, w + id * l.width, row_bytes);
    }
  }
}

// W@GRAD as SelectedRows: the ids in order (padding ids skipped, duplicates kept for the
// consumer to merge) with the matching rows of Out@GRAD; height V.
void SparseGrad(const ExecutionContext& ctx, const Lookup& l, const float* dout) {
  auto* grad = ctx.OutputVar("W@GRAD")->GetMutable<SelectedRows>();
  grad->set_height(l.vocab);
  auto* rows = grad->mutable_rows();
  rows->clear();
  rows->reserve(l.num_ids);
  for (int64_t i = 0; i < l.num_ids; ++i) {
    if (l.ids[i] != l.padding_idx) rows->push_back(l.ids[i]);
  }
  Tensor* value = grad->mutable_value();
  value->Resize({static_cast<int64_t>(rows->size()), l.width});
  float* dst = value->mutable_data<float>();
  if (static_cast<int64_t>(rows->size()) == l.num_ids) {
    std::memcpy(dst, dout, sizeof(float) * l.num_ids * l.width);
    return;
  }
  for (int64_t i = 0; i < l.num_ids; ++i) {
    if (l.ids[i] == l.padding_idx) continue;
    std::memcpy(dst, dout + i * l.width, sizeof(float) * l.width);
    dst += l.width;
  }
}

// W@GRAD as a dense [V, D] tensor: zero, then each id's Out@GRAD row added to its row.
void DenseGrad(const ExecutionContext& ctx, const Lookup& l, const float* dout) {
  LoDTensor* grad = ctx.Output("W@GRAD");
  grad->Resize({l.vocab, l.width});
  grad->set_lod({});
  float* dw = grad->mutable_data<float>();
  std::memset(dw, 0, sizeof(float) * l.vocab * l.width);
  for (int64_t i = 0; i < l.num_ids; ++i) {
    if (l.ids[i] == l.padding_idx) continue;
    float* row = dw + l.ids[i] * l.width;
    const float* g = dout + i * l.width;
    for (int64_t j = 0; j < l.width; ++j) row[j] += g[j];
  }
}

void LookupTableGradKernel(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("W@GRAD")) return;
  const Lookup l = PrepareLookup(ctx, ctx.Input("W").shape());
  const LoDTensor& dout_t = ctx.Input("Out@GRAD");
  FLEET_KERNEL_ENFORCE(ctx, dout_t.numel() == l.num_ids * l.width, "Out@GRAD has shape ",
                       ShapeToString(dout_t.shape()), " but ", l.num_ids, " ids of width ", l.width,
                       " were looked up");
  const float* dout = FloatData(ctx, "Out@GRAD");
  if (ctx.Attr<bool>("is_sparse", false)) {
    SparseGrad(ctx, l, dout);
  } else {
    DenseGrad(ctx, l, dout);
  }
}

void InferLookupTable(InferShapeContext* ctx) {
  const VarInfo& w = ctx->Input("W");
  const VarInfo& ids = ctx->Input("Ids");
  FLEET_ENFORCE(w.shape.size() == 2, InvalidArgument, "op ", ctx->op().Describe(),
                ": W must be a [vocab, dim] matrix, got shape ", ShapeToString(w.shape));
  FLEET_ENFORCE(ids.dtype == DType::kInt64, InvalidArgument, "op ", ctx->op().Describe(),
                ": Ids must be int64, got ", DTypeName(ids.dtype));
  VarInfo out;
  out.shape = EmbeddingOutputShape(ids.shape, w.shape[1]);
  out.dtype = w.dtype;
  out.lod_level = ids.lod_level;
  ctx->SetOutput("Out", out);
}

void InferLookupTableGrad(InferShapeContext* ctx) {
  VarInfo grad = ctx->Input("W");
  grad.lod_level = 0;
  if (ctx->Attr<bool>("is_sparse", false)) grad.kind = framework::VarKind::kSelectedRows;
  ctx->SetOutput("W@GRAD", grad);
}

}  // namespace

void RegisterEmbeddingOps(OpRegistry* registry) {
  OpInfo& op = registry->Register("lookup_table");
  op.infer_shape = InferLookupTable;
  op.grad_maker = framework::SingleGradOp({"W", "Ids"}, {}, {"Out"}, {"W"});
  SetCpuKernel(&op, LookupTableKernel);
  OpInfo& grad = registry->Register("lookup_table_grad");
  grad.infer_shape = InferLookupTableGrad;
  SetCpuKernel(&grad, LookupTableGradKernel);
}

}  // namespace fleet::operators
