// The parameter-server ops, which the PS program pass (fleet/ps/program_pass.py) puts in a
// worker's program:
//
//   pull_sparse(Ids) -> Out     lookup_table whose table lives on the servers: the rows of the
//                               batch's ids (unique ids fetched once), Out [..., dim] with Ids'
//                               lod; padding_idx rows are zero. With is_test (inference
//                               clones) GEO reads the servers, not the worker's copy.
//   push_sparse(Ids, Grad)      hands the rows of Out@GRAD for the ids to the communicator
//                               (padding rows skipped), which pushes, merges or applies them by
//                               mode.
//   send(X...)                  hands the dense gradients (in the communicator's order) to the
//                               communicator.
//
// All three reach the process's communicator through the executor's RuntimeResources.

#include <cstring>

#include "distributed/communicator.h"
#include "distributed/register_distributed_ops.h"
#include "framework/execution_context.h"
#include "operators/op_helpers.h"

namespace fleet::distributed {
namespace {

using framework::ExecutionContext;
using framework::InferShapeContext;
using framework::VarInfo;

constexpr char kHowToSet[] =
    "call fleet.init_worker() after fleet.distributed_optimizer(...).minimize() in a "
    "parameter-server job";
constexpr int64_t kNoPadding = -1;

Shape OutputShape(const Shape& ids, int64_t width) {
  Shape out = ids;
  if (out.size() >= 2 && out.back() == 1) out.pop_back();
  out.push_back(width);
  return out;
}

void PullSparseKernel(const ExecutionContext& ctx) {
  auto& comm = ctx.Resource<Communicator>(kHowToSet);
  const LoDTensor& ids_t = ctx.Input("Ids");
  FLEET_KERNEL_ENFORCE(ctx, ids_t.dtype() == DType::kInt64, "Ids '", ctx.InputName("Ids"),
                       "' is ", DTypeName(ids_t.dtype()), ", expected int64");
  const auto table_id = static_cast<uint32_t>(ctx.Attr<int32_t>("table_id"));
  const int64_t dim = ctx.Attr<int64_t>("dim");
  const int64_t padding_idx = ctx.Attr<int64_t>("padding_idx", kNoPadding);
  LoDTensor* out_t = ctx.Output("Out");
  out_t->Resize(OutputShape(ids_t.shape(), dim));
  out_t->set_lod(ids_t.lod());
  float* out = out_t->mutable_data<float>();
  const int64_t* ids = ids_t.data<int64_t>();
  const int64_t n = ids_t.numel();
  comm.PullSparse(table_id, absl::MakeConstSpan(ids, n), absl::MakeSpan(out, n * dim),
                  ctx.Attr<bool>("is_test", false));
  if (padding_idx == kNoPadding) return;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] == padding_idx) std::memset(out + i * dim, 0, sizeof(float) * dim);
  }
}

void PushSparseKernel(const ExecutionContext& ctx) {
  auto& comm = ctx.Resource<Communicator>(kHowToSet);
  const LoDTensor& ids_t = ctx.Input("Ids");
  const LoDTensor& grad_t = ctx.Input("Grad");
  const auto table_id = static_cast<uint32_t>(ctx.Attr<int32_t>("table_id"));
  const int64_t dim = ctx.Attr<int64_t>("dim");
  const int64_t padding_idx = ctx.Attr<int64_t>("padding_idx", kNoPadding);
  const int64_t n = ids_t.numel();
  FLEET_KERNEL_ENFORCE(ctx, grad_t.numel() == n * dim && grad_t.dtype() == DType::kFloat32,
                       "Grad '", ctx.InputName("Grad"), "' has shape ",
                       ShapeToString(grad_t.shape()), " but ", n, " ids of width ", dim,
                       " were pulled");
  const int64_t* ids = ids_t.data<int64_t>();
  const float* grads = grad_t.data<float>();
  if (padding_idx == kNoPadding) {
    comm.PushSparse(ctx.thread(), table_id, absl::MakeConstSpan(ids, n),
                    absl::MakeConstSpan(grads, n * dim));
    return;
  }
  std::vector<int64_t> kept_ids;
  std::vector<float> kept_grads;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] == padding_idx) continue;
    kept_ids.push_back(ids[i]);
    kept_grads.insert(kept_grads.end(), grads + i * dim, grads + (i + 1) * dim);
  }
  comm.PushSparse(ctx.thread(), table_id, kept_ids, kept_grads);
}

void SendKernel(const ExecutionContext& ctx) {
  auto& comm = ctx.Resource<Communicator>(kHowToSet);
  std::vector<const LoDTensor*> grads = ctx.MultiInput("X");
  comm.SendDense(ctx.thread(), grads);
}

void InferPullSparse(InferShapeContext* ctx) {
  const VarInfo& ids = ctx->Input("Ids");
  FLEET_ENFORCE(ids.dtype == DType::kInt64, InvalidArgument, "op ", ctx->op().Describe(),
                ": Ids must be int64, got ", DTypeName(ids.dtype));
  VarInfo out;
  out.shape = OutputShape(ids.shape, ctx->Attr<int64_t>("dim"));
  out.dtype = DType::kFloat32;
  out.lod_level = ids.lod_level;
  ctx->SetOutput("Out", out);
}

}  // namespace

void RegisterPsOps(framework::OpRegistry* registry) {
  framework::OpInfo& pull = registry->Register("pull_sparse");
  pull.infer_shape = InferPullSparse;
  operators::SetCpuKernel(&pull, PullSparseKernel);
  framework::OpInfo& push = registry->Register("push_sparse");
  operators::SetCpuKernel(&push, PushSparseKernel);
  framework::OpInfo& send = registry->Register("send");
  operators::SetCpuKernel(&send, SendKernel);
}

}  // namespace fleet::distributed
