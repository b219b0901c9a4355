// sparse_weight_decay: weight decay of an embedding table whose gradient is sparse (a
// SelectedRows from an is_sparse lookup_table). The penalty's gradient is added to the rows the
// gradient holds and to no other row, as fluid 1.x's regularizer did for SelectedRows gradients
// (extract_rows + lookup_table of the parameter + scale): rows the batch did not read are not
// decayed, so the gradient stays sparse. (Paddle 2.x's static graph instead sums the dense
// penalty into a dense gradient, decaying every row every step.)
//
// Out holds each row of Grad once (duplicates summed, first-seen order) with
//   l2: grad_row + coeff * Param[row]        l1: grad_row + coeff * sign(Param[row])
// so a row read several times in the batch is decayed once per step.

#include <string>

#include "core/selected_rows.h"
#include "operators/op_helpers.h"
#include "operators/register_ops.h"

namespace fleet::operators {
namespace {

void SparseWeightDecayKernel(const ExecutionContext& ctx) {
  const SelectedRows& grad = ctx.InputVar("Grad").Get<SelectedRows>();
  const LoDTensor& param = ctx.Input("Param");
  const std::string kind = ctx.Attr<std::string>("kind", "l2");
  const float coeff = ctx.Attr<float>("coeff", 0.0f);
  FLEET_KERNEL_ENFORCE(ctx, kind == "l2" || kind == "l1", "kind '", kind,
                       "' is unknown: 'l2' or 'l1'");
  FLEET_KERNEL_ENFORCE(ctx, param.shape().size() == 2, "Param '", ctx.InputName("Param"),
                       "' must be a [rows, width] table, got shape ", ShapeToString(param.shape()));
  const int64_t height = param.shape()[0];
  const int64_t width = param.shape()[1];
  FLEET_KERNEL_ENFORCE(ctx, grad.height() == height, "Grad '", ctx.InputName("Grad"),
                       "' has height ", grad.height(), " but Param has ", height, " rows");
  const float* w = FloatData(ctx, "Param");
  SelectedRows merged;
  if (!grad.rows().empty()) {
    FLEET_KERNEL_ENFORCE(ctx, grad.value().numel() == grad.num_rows() * width, "Grad '",
                         ctx.InputName("Grad"), "' values have shape ",
                         ShapeToString(grad.value().shape()), ", expected ", grad.num_rows(),
                         " rows of ", width);
    merged = MergeDuplicateRows(grad);
  } else {
    merged.mutable_value()->Resize({0, width});
    merged.mutable_value()->mutable_data<float>();
  }
  merged.set_height(height);
  const auto& rows = merged.rows();
  float* out = merged.mutable_value()->mutable_data<float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    FLEET_KERNEL_ENFORCE(ctx, rows[i] >= 0 && rows[i] < height, "Grad '", ctx.InputName("Grad"),
                         "' row ", rows[i], " is outside [0, ", height, ")");
    const float* p = w + rows[i] * width;
    float* g = out + i * width;
    if (kind == "l2") {
      for (int64_t j = 0; j < width; ++j) g[j] += coeff * p[j];
    } else {
      for (int64_t j = 0; j < width; ++j) {
        g[j] += coeff * static_cast<float>((p[j] > 0.0f) - (p[j] < 0.0f));
      }
    }
  }
  *ctx.OutputVar("Out")->GetMutable<SelectedRows>() = std::move(merged);
}

void InferSparseWeightDecay(InferShapeContext* ctx) {
  VarInfo out = ctx->Input("Param");
  out.lod_level = 0;
  out.kind = framework::VarKind::kSelectedRows;
  ctx->SetOutput("Out", out);
}

}  // namespace

void RegisterSparseDecayOps(OpRegistry* registry) {
  OpInfo& op = registry->Register("sparse_weight_decay");
  op.infer_shape = InferSparseWeightDecay;
  SetCpuKernel(&op, SparseWeightDecayKernel);
}

}  // namespace fleet::operators
