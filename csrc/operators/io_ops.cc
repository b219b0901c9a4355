// feed and fetch: how the executor moves NumPy data in and out of a program. The feed holder
// ("feed") and fetch holder ("fetch") are LoDTensorArray variables filled by the bindings;
// attribute `col` picks the entry.

#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

void FeedKernel(const ExecutionContext& ctx) {
  const auto& holder = ctx.InputVar("X").Get<LoDTensorArray>();
  int col = ctx.Attr<int32_t>("col");
  FLEET_KERNEL_ENFORCE(ctx, col >= 0 && static_cast<size_t>(col) < holder.size(), "feed column ",
                       col, " is missing: ", holder.size(), " tensors were fed");
  LoDTensor* out = ctx.Output("Out");
  // Zero copy: the fed tensor is only read by the program.
  out->ShareDataWith(holder[col]);
  out->set_lod(holder[col].lod());
}

void FetchKernel(const ExecutionContext& ctx) {
  const LoDTensor& in = ctx.Input("X");
  int col = ctx.Attr<int32_t>("col");
  auto* holder = ctx.OutputVar("Out")->GetMutable<LoDTensorArray>();
  if (holder->size() <= static_cast<size_t>(col)) holder->resize(col + 1);
  // Shared, not copied: the bindings copy into NumPy before the next run can overwrite it.
  (*holder)[col].ShareDataWith(in);
  (*holder)[col].set_lod(in.lod());
}

}  // namespace

void RegisterIoOps(OpRegistry* registry) {
  SetCpuKernel(&registry->Register("feed"), FeedKernel);
  SetCpuKernel(&registry->Register("fetch"), FetchKernel);
}

}  // namespace fleet::operators
