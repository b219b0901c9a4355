#include "operators/op_helpers.h"

namespace fleet::operators {

framework::InferShapeFn SameAs(std::string in, std::string out) {
  return [in, out](InferShapeContext* ctx) { ctx->SetOutput(out, ctx->Input(in)); };
}

float* ResizeLike(const LoDTensor& in, LoDTensor* out) {
  out->Resize(in.shape());
  out->set_lod(in.lod());
  return out->mutable_data<float>();
}

const float* FloatData(const ExecutionContext& ctx, const std::string& slot, size_t i) {
  const LoDTensor& t = ctx.Input(slot, i);
  FLEET_KERNEL_ENFORCE(ctx, t.dtype() == DType::kFloat32, "input '", ctx.InputName(slot, i),
                       "' (slot ", slot, ") is ", DTypeName(t.dtype()), ", expected float32");
  return t.data<float>();
}

}  // namespace fleet::operators
