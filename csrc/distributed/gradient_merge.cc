#include "distributed/gradient_merge.h"

#include "core/errors.h"

namespace fleet::distributed {

GradientMergeHook::GradientMergeHook(const framework::OpRegistry* registry,
                                     const framework::proto::ProgramDesc& program,
                                     GradientMergeOptions options,
                                     std::shared_ptr<CollectiveGroup> group)
    : executor_(registry), options_(std::move(options)) {
  FLEET_ENFORCE(options_.k_steps >= 1, InvalidArgument,
                "gradient merge: k_steps must be >= 1, "
                "got ",
                options_.k_steps);
  FLEET_ENFORCE(!options_.step_var.empty(), InvalidArgument,
                "gradient merge: the step counter variable is not named");
  apply_ = executor_.Prepare(program, options_.apply_block);
  // The apply block's all-reduces need the group; this executor's own resources hold just that
  // (not the caller's, which hold this hook: a cycle).
  if (group) executor_.resources()->Set<CollectiveGroup>(std::move(group));
}

std::string GradientMergeHook::Name() const {
  return absl::StrCat("gradient merge (every ", options_.k_steps, " steps of '", options_.step_var,
                      "')");
}

void GradientMergeHook::AfterStep(const framework::StepInfo& info) {
  const Variable* var = info.scope->FindVar(options_.step_var);
  if (var == nullptr || !var->IsType<LoDTensor>()) return;  // another program ran
  const LoDTensor& counter = var->Get<LoDTensor>();
  if (!counter.initialized() || counter.dtype() != DType::kInt64) return;
  const int64_t step = counter.data<int64_t>()[0];
  if (step == last_step_) return;  // this run did not accumulate
  last_step_ = step;
  if (step % options_.k_steps != 0) return;
  // Bound on every apply: scopes come and go (a trainer's per-thread scopes), and k steps of
  // compute dwarf creating a handful of variables.
  framework::BoundProgram bound = executor_.Bind(*apply_, info.scope);
  state_.thread = info.thread;
  executor_.Run(bound, &state_);
  ++applied_;
}

}  // namespace fleet::distributed
