#include "operators/grad_helpers.h"

#include "absl/strings/match.h"

namespace fleet::operators {
namespace {

bool IsGradOf(const std::string& grad, const std::string& var) {
  const std::string base = framework::GradName(var);
  return grad == base || absl::StartsWith(grad, base + "@RENAME@");
}

}  // namespace

std::vector<size_t> GradTargets(const framework::OpSpec& op, const std::string& slot,
                                const std::string& grad_slot) {
  const auto& vars = op.Inputs(slot);
  const auto& grads = op.Outputs(grad_slot);
  std::vector<size_t> targets;
  targets.reserve(grads.size());
  if (grads.size() == vars.size()) {
    for (size_t i = 0; i < grads.size(); ++i) targets.push_back(i);
    return targets;
  }
  size_t cursor = 0;
  for (const auto& grad : grads) {
    while (cursor < vars.size() && !IsGradOf(grad, vars[cursor])) ++cursor;
    FLEET_ENFORCE(cursor < vars.size(), InvalidArgument, "op ", op.Describe(), ": output '", grad,
                  "' of slot ", grad_slot, " is not the gradient of any variable of slot ", slot,
                  " (expected '<name>@GRAD', in the order of ", slot, ")");
    targets.push_back(cursor++);
  }
  return targets;
}

framework::InferShapeFn GradsLikeInputs(std::vector<std::string> slots) {
  return [slots](framework::InferShapeContext* ctx) {
    for (const auto& slot : slots) {
      const std::string grad_slot = framework::GradName(slot);
      if (!ctx->HasOutput(grad_slot) || !ctx->HasInput(slot)) continue;
      std::vector<size_t> targets = GradTargets(ctx->op(), slot, grad_slot);
      for (size_t i = 0; i < targets.size(); ++i) {
        ctx->SetOutput(grad_slot, ctx->Input(slot, targets[i]), i);
      }
    }
  };
}

}  // namespace fleet::operators
