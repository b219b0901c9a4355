// Collective ops: the kernels that data-parallel programs use to keep ranks equal (see
// fleet/collective/program_pass.py for where the pass puts them). Every kernel reaches the
// process's group through the executor's resources and runs its collective on the group's
// communication thread (collective_group.h), bounded by the group's timeout.
//
//   c_broadcast(X) -> Out                   X from rank `root` on every rank (startup: params)
//   c_allreduce_sum(X) -> Out               element-wise sum over ranks
//   c_allreduce_start(X...) -> Out          packs X into the bucket Out, starts its all-reduce
//   c_allreduce_wait(X) -> Out...           waits for bucket X, unpacks it times `scale`
//   c_allgather_rows(X) -> Out              SelectedRows: every rank's rows, values times `scale`
//   c_gradient_merge_acc(X..., Acc..., Step) -> AccOut..., StepOut   Acc += X, Step += 1

#include <algorithm>
#include <cstring>

#include "distributed/collective_group.h"
#include "distributed/register_distributed_ops.h"
#include "operators/op_helpers.h"

namespace fleet::distributed {
namespace {

using framework::ExecutionContext;
using framework::InferShapeContext;
using framework::OpInfo;
using framework::VarInfo;
using operators::SetCpuKernel;

constexpr char kHowToSet[] =
    "call fleet.init(is_collective=True) and minimize through fleet.distributed_optimizer "
    "before running a collective program (that puts the job's group into the executor's "
    "resources)";

CollectiveGroup& Group(const ExecutionContext& ctx) {
  return ctx.Resource<CollectiveGroup>(kHowToSet);
}

std::string What(const ExecutionContext& ctx, const std::string& var) {
  return absl::StrCat(ctx.type(), " of '", var, "'");
}

// Out is X after the call; copies X into Out first when they are different variables.
LoDTensor* InPlaceOutput(const ExecutionContext& ctx) {
  const LoDTensor& x = ctx.Input("X");
  LoDTensor* out = ctx.Output("Out");
  if (out != &x) {
    out->CopyFrom(x);
    out->set_lod(x.lod());
  }
  return out;
}

void BroadcastKernel(const ExecutionContext& ctx) {
  LoDTensor* t = InPlaceOutput(ctx);
  const int root = ctx.Attr<int32_t>("root", 0);
  void* data = t->mutable_data(t->dtype());
  const size_t bytes = t->nbytes();
  CollectiveGroup& group = Group(ctx);
  group.Run(What(ctx, ctx.InputName("X")), [&](collective::CollectiveBackend& b) {
    b.Broadcast(data, bytes, collective::BroadcastOptions{root, group.timeout()});
  });
}

void AllReduceSumKernel(const ExecutionContext& ctx) {
  LoDTensor* t = InPlaceOutput(ctx);
  void* data = t->mutable_data(t->dtype());
  const size_t count = static_cast<size_t>(t->numel());
  const DType dtype = t->dtype();
  CollectiveGroup& group = Group(ctx);
  group.Run(What(ctx, ctx.InputName("X")), [&](collective::CollectiveBackend& b) {
    b.AllReduce(data, data, count, dtype,
                collective::AllReduceOptions{collective::ReduceOp::kSum, group.timeout()});
  });
}

// ---- fused buckets ---------------------------------------------------------------------------

void InferBucket(InferShapeContext* ctx) {
  int64_t total = 0;
  for (size_t i = 0; i < ctx->InputSize("X"); ++i) {
    const VarInfo& x = ctx->Input("X", i);
    int64_t n = 1;
    for (int64_t d : x.shape) n *= d;
    if (n < 0) {
      total = -1;
      break;
    }
    total += n;
  }
  VarInfo out;
  out.shape = {total};
  out.dtype = DType::kFloat32;
  ctx->SetOutput("Out", out);
}

void AllReduceStartKernel(const ExecutionContext& ctx) {
  std::vector<const LoDTensor*> grads = ctx.MultiInput("X");
  int64_t total = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    FLEET_KERNEL_ENFORCE(ctx, grads[i]->dtype() == DType::kFloat32, "bucket member '",
                         ctx.InputName("X", i), "' is ", DTypeName(grads[i]->dtype()),
                         "; fused buckets hold float32 gradients");
    total += grads[i]->numel();
  }
  LoDTensor* bucket = ctx.Output("Out");
  bucket->Resize({total});
  CollectiveGroup& group = Group(ctx);
  const std::string what = What(ctx, ctx.OutputName("Out"));
  const Variable* key = ctx.OutputVar("Out");
  // A bucket of a failed earlier step may still be in flight on this buffer: finish it before
  // the buffer is refilled.
  group.Drain(key, what);
  float* dst = bucket->mutable_data<float>();
  int64_t offset = 0;
  for (const LoDTensor* g : grads) {
    std::memcpy(dst + offset, g->data<float>(), g->nbytes());
    offset += g->numel();
  }
  group.StartAllReduce(key, dst, static_cast<size_t>(total), DType::kFloat32, what);
}

void AllReduceWaitKernel(const ExecutionContext& ctx) {
  CollectiveGroup& group = Group(ctx);
  const Variable* key = &ctx.InputVar("X");
  group.WaitAllReduce(key, What(ctx, ctx.InputName("X")));
  const LoDTensor& bucket = ctx.Input("X");
  const float* src = bucket.data<float>();
  const float scale = ctx.Attr<float>("scale", 1.f);
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.OutputSize("Out"); ++i) {
    LoDTensor* g = ctx.Output("Out", i);
    const int64_t n = g->numel();
    FLEET_KERNEL_ENFORCE(ctx, offset + n <= bucket.numel(), "bucket '", ctx.InputName("X"),
                         "' holds ", bucket.numel(), " elements, too few for its members");
    float* dst = g->mutable_data<float>();
    for (int64_t j = 0; j < n; ++j) dst[j] = src[offset + j] * scale;
    offset += n;
  }
}

// ---- sparse gradients ------------------------------------------------------------------------

// Gathers (ids, rows) instead of reducing a dense table: the rows every rank touched, duplicates
// kept (the optimizers sum them). Two all-gathers: the row counts, then rows and values padded to
// the longest.
void AllGatherRowsKernel(const ExecutionContext& ctx) {
  const SelectedRows& x = ctx.InputVar("X").Get<SelectedRows>();
  const Tensor& value = x.value();
  FLEET_KERNEL_ENFORCE(ctx, value.dtype() == DType::kFloat32 || x.rows().empty(), "values are ",
                       DTypeName(value.dtype()), "; expected float32");
  const int64_t count = static_cast<int64_t>(x.rows().size());
  const int64_t width = count > 0 ? value.numel() / count : 0;
  CollectiveGroup& group = Group(ctx);
  const int size = group.size();
  const std::string what = What(ctx, ctx.InputName("X"));
  // Width travels with the count: a rank with no rows does not know it otherwise.
  int64_t mine[2] = {count, width};
  std::vector<int64_t> meta(2 * static_cast<size_t>(size));
  group.Run(what, [&](collective::CollectiveBackend& b) {
    b.AllGather(mine, meta.data(), sizeof(mine), collective::AllGatherOptions{group.timeout()});
  });
  int64_t longest = 0, total = 0, dim = 0;
  for (int r = 0; r < size; ++r) {
    longest = std::max(longest, meta[2 * r]);
    total += meta[2 * r];
    dim = std::max(dim, meta[2 * r + 1]);
  }
  std::vector<int64_t> rows(static_cast<size_t>(longest), 0);
  std::copy(x.rows().begin(), x.rows().end(), rows.begin());
  std::vector<float> values(static_cast<size_t>(longest * dim), 0.f);
  if (count > 0) std::memcpy(values.data(), value.data<float>(), value.nbytes());
  std::vector<int64_t> all_rows(static_cast<size_t>(longest) * size);
  std::vector<float> all_values(static_cast<size_t>(longest * dim) * size);
  if (longest > 0) {
    group.Run(what, [&](collective::CollectiveBackend& b) {
      collective::AllGatherOptions options{group.timeout()};
      b.AllGather(rows.data(), all_rows.data(), rows.size() * sizeof(int64_t), options);
      b.AllGather(values.data(), all_values.data(), values.size() * sizeof(float), options);
    });
  }
  SelectedRows out;
  out.set_height(x.height());
  Tensor* out_value = out.mutable_value();
  out_value->Resize({total, dim});
  float* dst = out_value->mutable_data<float>();
  const float scale = ctx.Attr<float>("scale", 1.f);
  for (int r = 0; r < size; ++r) {
    const int64_t n = meta[2 * r];
    const int64_t* src_rows = all_rows.data() + r * longest;
    const float* src = all_values.data() + r * longest * dim;
    out.mutable_rows()->insert(out.mutable_rows()->end(), src_rows, src_rows + n);
    for (int64_t j = 0; j < n * dim; ++j) *dst++ = src[j] * scale;
  }
  *ctx.OutputVar("Out")->GetMutable<SelectedRows>() = std::move(out);
}

void InferSelectedRows(InferShapeContext* ctx) {
  VarInfo info = ctx->Input("X");
  info.kind = framework::VarKind::kSelectedRows;
  ctx->SetOutput("Out", info);
}

// ---- gradient merge --------------------------------------------------------------------------

void GradientMergeAccKernel(const ExecutionContext& ctx) {
  FLEET_KERNEL_ENFORCE(ctx,
                       ctx.InputSize("X") == ctx.InputSize("Acc") &&
                           ctx.OutputSize("AccOut") == ctx.InputSize("Acc"),
                       "X, Acc and AccOut must have as many variables each");
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    FLEET_KERNEL_ENFORCE(ctx, ctx.InputVar("X", i).IsType<LoDTensor>(), "gradient '",
                         ctx.InputName("X", i),
                         "' is not dense; gradient merge accumulates "
                         "dense gradients (the pass makes embedding gradients dense)");
    const LoDTensor& g = ctx.Input("X", i);
    const LoDTensor& acc_in = ctx.Input("Acc", i);
    LoDTensor* acc = ctx.Output("AccOut", i);
    FLEET_KERNEL_ENFORCE(ctx, acc_in.numel() == g.numel(), "accumulator '", ctx.InputName("Acc", i),
                         "' has ", acc_in.numel(), " elements, gradient '", ctx.InputName("X", i),
                         "' ", g.numel());
    if (acc != &acc_in) acc->CopyFrom(acc_in);
    float* a = acc->mutable_data<float>();
    const float* x = g.data<float>();
    for (int64_t j = 0, n = g.numel(); j < n; ++j) a[j] += x[j];
  }
  const LoDTensor& step_in = ctx.Input("Step");
  LoDTensor* step = ctx.Output("StepOut");
  if (step != &step_in) step->CopyFrom(step_in);
  FLEET_KERNEL_ENFORCE(ctx, step->dtype() == DType::kInt64 && step->numel() == 1,
                       "Step must be one int64");
  step->mutable_data<int64_t>()[0] += 1;
}

void Register(framework::OpRegistry* registry, const std::string& type,
              framework::InferShapeFn infer, framework::KernelFn kernel) {
  OpInfo& op = registry->Register(type);
  op.infer_shape = std::move(infer);
  SetCpuKernel(&op, std::move(kernel));
}

}  // namespace

void RegisterCollectiveOps(framework::OpRegistry* registry) {
  Register(registry, "c_broadcast", operators::SameAs("X", "Out"), BroadcastKernel);
  Register(registry, "c_allreduce_sum", operators::SameAs("X", "Out"), AllReduceSumKernel);
  Register(registry, "c_allreduce_start", InferBucket, AllReduceStartKernel);
  Register(registry, "c_allreduce_wait", nullptr, AllReduceWaitKernel);
  Register(registry, "c_allgather_rows", InferSelectedRows, AllGatherRowsKernel);
  Register(registry, "c_gradient_merge_acc", nullptr, GradientMergeAccKernel);
}

}  // namespace fleet::distributed
