// The parameter-server ops, which the PS program pass (fleet/ps/program_pass.py) puts in a
// worker's program:
//
//   pull_sparse(Ids...) -> Out...  lookup_table whose table lives on the servers: the rows of
//                               the batch's ids, Out_i [..., dim] with Ids_i's lod; padding_idx
//                               rows are zero. The pass fuses every lookup of one table into one
//                               op, so a step makes one request per table and server however
//                               many slots share it (CTR-DNN: 26). The Out_i are views of the
//                               one buffer of rows the communicator fills (an async prefetch's
//                               own), so each pull's outputs own fresh memory and no row is
//                               copied after it arrives. With is_test (inference clones) GEO
//                               reads the servers, not the worker's copy.
//   push_sparse(Ids..., Grad...) hands the rows of each Out@GRAD for its ids to the
//                               communicator in one call (padding rows skipped), which pushes,
//                               merges or applies them by mode; the slots' rows are gathered
//                               once into vectors the communicator keeps.
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

void PullSparseKernel(const ExecutionContext& ctx) {
  auto& comm = ctx.Resource<Communicator>(kHowToSet);
  const auto table_id = static_cast<uint32_t>(ctx.Attr<int32_t>("table_id"));
  const int64_t dim = ctx.Attr<int64_t>("dim");
  const int64_t padding_idx = ctx.Attr<int64_t>("padding_idx", kNoPadding);
  const std::vector<const LoDTensor*> ids = ctx.MultiInput("Ids");
  const std::vector<LoDTensor*> outs = ctx.MultiOutput("Out");
  FLEET_KERNEL_ENFORCE(ctx, ids.size() == outs.size(), ids.size(), " Ids for ", outs.size(),
                       " Out");
  for (size_t i = 0; i < ids.size(); ++i) {
    FLEET_KERNEL_ENFORCE(ctx, ids[i]->dtype() == DType::kInt64, "Ids '", ctx.InputName("Ids", i),
                         "' is ", DTypeName(ids[i]->dtype()), ", expected int64");
  }
  // One request for every slot of the table: keys joined.
  std::vector<int64_t> joined;
  absl::Span<const int64_t> keys;
  if (ids.size() == 1) {
    keys = absl::MakeConstSpan(ids[0]->data<int64_t>(), ids[0]->numel());
  } else {
    for (const LoDTensor* t : ids) {
      joined.insert(joined.end(), t->data<int64_t>(), t->data<int64_t>() + t->numel());
    }
    keys = joined;
  }
  const bool is_test = ctx.Attr<bool>("is_test", false);
  std::shared_ptr<Buffer> rows =
      comm.PullSparseRows(ctx.thread(), table_id, keys, static_cast<size_t>(dim), is_test);
  // Each Out is a view of its slots' rows in the buffer the pull filled (rows a step before
  // prefetched included): no copy, and the tensors own the buffer from here on.
  Tensor all;
  all.ResetBuffer(std::move(rows), DType::kFloat32, {static_cast<int64_t>(keys.size()), dim});
  int64_t begin = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t n = ids[i]->numel();
    outs[i]->ShareDataWith(all.Slice(begin, begin + n));
    outs[i]->Resize(operators::EmbeddingOutputShape(ids[i]->shape(), dim));
    outs[i]->set_lod(ids[i]->lod());
    begin += n;
  }
  if (padding_idx == kNoPadding) return;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t* id = ids[i]->data<int64_t>();
    float* out = outs[i]->mutable_data<float>();
    for (int64_t j = 0; j < ids[i]->numel(); ++j) {
      if (id[j] == padding_idx) std::memset(out + j * dim, 0, sizeof(float) * dim);
    }
  }
}

void PushSparseKernel(const ExecutionContext& ctx) {
  auto& comm = ctx.Resource<Communicator>(kHowToSet);
  const auto table_id = static_cast<uint32_t>(ctx.Attr<int32_t>("table_id"));
  const int64_t dim = ctx.Attr<int64_t>("dim");
  const int64_t padding_idx = ctx.Attr<int64_t>("padding_idx", kNoPadding);
  const std::vector<const LoDTensor*> ids = ctx.MultiInput("Ids");
  const std::vector<const LoDTensor*> grads = ctx.MultiInput("Grad");
  FLEET_KERNEL_ENFORCE(ctx, ids.size() == grads.size(), ids.size(), " Ids for ", grads.size(),
                       " Grad");
  size_t total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    FLEET_KERNEL_ENFORCE(
        ctx, grads[i]->numel() == ids[i]->numel() * dim && grads[i]->dtype() == DType::kFloat32,
        "Grad '", ctx.InputName("Grad", i), "' has shape ", ShapeToString(grads[i]->shape()),
        " but ", ids[i]->numel(), " ids of width ", dim, " were pulled");
    total += static_cast<size_t>(ids[i]->numel());
  }
  if (ids.size() == 1 && padding_idx == kNoPadding) {
    const int64_t n = ids[0]->numel();
    comm.PushSparse(ctx.thread(), table_id, absl::MakeConstSpan(ids[0]->data<int64_t>(), n),
                    absl::MakeConstSpan(grads[0]->data<float>(), n * dim));
    return;
  }
  // The slots' rows gathered once into vectors sized up front, which the communicator then
  // keeps (an async queue holds them as they are).
  std::vector<int64_t> kept_ids;
  std::vector<float> kept_grads;
  kept_ids.reserve(total);
  kept_grads.reserve(total * static_cast<size_t>(dim));
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t* id = ids[i]->data<int64_t>();
    const float* g = grads[i]->data<float>();
    const int64_t n = ids[i]->numel();
    if (padding_idx == kNoPadding) {
      kept_ids.insert(kept_ids.end(), id, id + n);
      kept_grads.insert(kept_grads.end(), g, g + n * dim);
      continue;
    }
    for (int64_t j = 0; j < n; ++j) {
      if (id[j] == padding_idx) continue;
      kept_ids.push_back(id[j]);
      kept_grads.insert(kept_grads.end(), g + j * dim, g + (j + 1) * dim);
    }
  }
  comm.PushSparseOwned(ctx.thread(), table_id, std::move(kept_ids), std::move(kept_grads));
}

void SendKernel(const ExecutionContext& ctx) {
  auto& comm = ctx.Resource<Communicator>(kHowToSet);
  std::vector<const LoDTensor*> grads = ctx.MultiInput("X");
  comm.SendDense(ctx.thread(), grads);
}

void InferPullSparse(InferShapeContext* ctx) {
  for (size_t i = 0; i < ctx->InputSize("Ids"); ++i) {
    const VarInfo& ids = ctx->Input("Ids", i);
    FLEET_ENFORCE(ids.dtype == DType::kInt64, InvalidArgument, "op ", ctx->op().Describe(),
                  ": Ids must be int64, got ", DTypeName(ids.dtype));
    VarInfo out;
    out.shape = operators::EmbeddingOutputShape(ids.shape, ctx->Attr<int64_t>("dim"));
    out.dtype = DType::kFloat32;
    out.lod_level = ids.lod_level;
    ctx->SetOutput("Out", out, i);
  }
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
