// lookup_sparse_rows: the local stand-in for pull_sparse in an inference model exported from a
// parameter-server job (fleet.save_inference_model). A server table is keyed by raw int64 ids of
// any value, so the exported table is a sorted key column plus its rows, and a lookup is a
// binary search, not an index into [0, V):
//
//   lookup_sparse_rows(Ids..., Keys, W) -> Out...
//     Keys [n] int64, strictly increasing; W [n, dim] float32 (row i is the value of Keys[i]).
//     Out_i has Ids_i's shape with the trailing 1 replaced by dim (pull_sparse's rule) and lod.
//     An id not in Keys reads as zeros, as a key held back by the servers' count filter does;
//     rows of `padding_idx` (-1: none) are zero. Forward only: inference has no gradient.
//
// Several Ids/Out pairs share one table, because the PS pass fuses every lookup of a table into
// one pull_sparse and the export replaces it one for one.

#include <algorithm>
#include <cstring>

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

constexpr int64_t kNoPadding = -1;

void LookupSparseRowsKernel(const ExecutionContext& ctx) {
  const LoDTensor& keys_t = ctx.Input("Keys");
  const LoDTensor& w_t = ctx.Input("W");
  FLEET_KERNEL_ENFORCE(ctx, keys_t.dtype() == DType::kInt64, "Keys '", ctx.InputName("Keys"),
                       "' is ", DTypeName(keys_t.dtype()), ", expected int64");
  FLEET_KERNEL_ENFORCE(ctx, w_t.shape().size() == 2 && w_t.shape()[0] == keys_t.numel(), "W '",
                       ctx.InputName("W"), "' must be [", keys_t.numel(),
                       ", dim] (one row per key), got shape ", ShapeToString(w_t.shape()));
  const int64_t* keys = keys_t.data<int64_t>();
  const int64_t n = keys_t.numel();
  const int64_t dim = w_t.shape()[1];
  const float* w = FloatData(ctx, "W");
  const int64_t padding_idx = ctx.Attr<int64_t>("padding_idx", kNoPadding);
  const std::vector<const LoDTensor*> ids = ctx.MultiInput("Ids");
  const std::vector<LoDTensor*> outs = ctx.MultiOutput("Out");
  FLEET_KERNEL_ENFORCE(ctx, ids.size() == outs.size(), ids.size(), " Ids for ", outs.size(),
                       " Out");
  const size_t row_bytes = sizeof(float) * dim;
  for (size_t i = 0; i < ids.size(); ++i) {
    FLEET_KERNEL_ENFORCE(ctx, ids[i]->dtype() == DType::kInt64, "Ids '", ctx.InputName("Ids", i),
                         "' is ", DTypeName(ids[i]->dtype()), ", expected int64");
    outs[i]->Resize(EmbeddingOutputShape(ids[i]->shape(), dim));
    outs[i]->set_lod(ids[i]->lod());
    float* out = outs[i]->mutable_data<float>();
    const int64_t* id = ids[i]->data<int64_t>();
    for (int64_t j = 0; j < ids[i]->numel(); ++j) {
      const int64_t* at = std::lower_bound(keys, keys + n, id[j]);
      if (at == keys + n || *at != id[j] || id[j] == padding_idx) {
        std::memset(out + j * dim, 0, row_bytes);
      } else {
        std::memcpy(out + j * dim, w + (at - keys) * dim, row_bytes);
      }
    }
  }
}

void InferLookupSparseRows(InferShapeContext* ctx) {
  const VarInfo& w = ctx->Input("W");
  FLEET_ENFORCE(w.shape.size() == 2, InvalidArgument, "op ", ctx->op().Describe(),
                ": W must be a [keys, dim] matrix, got shape ", ShapeToString(w.shape));
  for (size_t i = 0; i < ctx->InputSize("Ids"); ++i) {
    const VarInfo& ids = ctx->Input("Ids", i);
    FLEET_ENFORCE(ids.dtype == DType::kInt64, InvalidArgument, "op ", ctx->op().Describe(),
                  ": Ids must be int64, got ", DTypeName(ids.dtype));
    VarInfo out;
    out.shape = EmbeddingOutputShape(ids.shape, w.shape[1]);
    out.dtype = DType::kFloat32;
    out.lod_level = ids.lod_level;
    ctx->SetOutput("Out", out, i);
  }
}

}  // namespace

void RegisterKeyedLookupOps(OpRegistry* registry) {
  OpInfo& op = registry->Register("lookup_sparse_rows");
  op.infer_shape = InferLookupSparseRows;
  SetCpuKernel(&op, LookupSparseRowsKernel);
}

}  // namespace fleet::operators
