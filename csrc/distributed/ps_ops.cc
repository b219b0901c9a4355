// The parameter-server ops, which the PS program pass (fleet/ps/program_pass.py) puts in a
// worker's program:
//
//   pull_sparse(Ids...) -> Out...  lookup_table whose table lives on the servers: the rows of
//                               the batch's ids, Out_i [..., dim] with Ids_i's lod; padding_idx
//                               rows are zero. The pass fuses every lookup of one table into one
//                               op, so a step makes one request per table and server however
//                               many slots share it (CTR-DNN: 26). With is_test (inference
//                               clones) GEO reads the servers, not the worker's copy.
//   push_sparse(Ids..., Grad...) hands the rows of each Out@GRAD for its ids to the
//                               communicator in one call (padding rows skipped), which pushes,
//                               merges or applies them by mode.
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
    outs[i]->Resize(operators::EmbeddingOutputShape(ids[i]->shape(), dim));
    outs[i]->set_lod(ids[i]->lod());
    outs[i]->mutable_data<float>();
  }
  const bool is_test = ctx.Attr<bool>("is_test", false);
  if (ids.size() == 1) {
    const int64_t n = ids[0]->numel();
    comm.PullSparse(ctx.thread(), table_id, absl::MakeConstSpan(ids[0]->data<int64_t>(), n),
                    absl::MakeSpan(outs[0]->mutable_data<float>(), n * dim), is_test);
  } else {
    // One request for every slot of the table: keys joined, rows scattered back.
    std::vector<int64_t> keys;
    for (const LoDTensor* t : ids)
      keys.insert(keys.end(), t->data<int64_t>(), t->data<int64_t>() + t->numel());
    std::vector<float> rows(keys.size() * dim);
    comm.PullSparse(ctx.thread(), table_id, keys, absl::MakeSpan(rows), is_test);
    size_t offset = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const size_t floats = static_cast<size_t>(ids[i]->numel() * dim);
      std::memcpy(outs[i]->mutable_data<float>(), rows.data() + offset, floats * sizeof(float));
      offset += floats;
    }
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
  for (size_t i = 0; i < ids.size(); ++i) {
    FLEET_KERNEL_ENFORCE(
        ctx, grads[i]->numel() == ids[i]->numel() * dim && grads[i]->dtype() == DType::kFloat32,
        "Grad '", ctx.InputName("Grad", i), "' has shape ", ShapeToString(grads[i]->shape()),
        " but ", ids[i]->numel(), " ids of width ", dim, " were pulled");
  }
  if (ids.size() == 1 && padding_idx == kNoPadding) {
    const int64_t n = ids[0]->numel();
    comm.PushSparse(ctx.thread(), table_id, absl::MakeConstSpan(ids[0]->data<int64_t>(), n),
                    absl::MakeConstSpan(grads[0]->data<float>(), n * dim));
    return;
  }
  std::vector<int64_t> kept_ids;
  std::vector<float> kept_grads;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t* id = ids[i]->data<int64_t>();
    const float* g = grads[i]->data<float>();
    for (int64_t j = 0; j < ids[i]->numel(); ++j) {
      if (id[j] == padding_idx && padding_idx != kNoPadding) continue;
      kept_ids.push_back(id[j]);
      kept_grads.insert(kept_grads.end(), g + j * dim, g + (j + 1) * dim);
    }
  }
  comm.PushSparse(ctx.thread(), table_id, kept_ids, kept_grads);
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
