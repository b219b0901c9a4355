#include "distributed/collective_runtime.h"

#include <vector>

#include "distributed/even_steps.h"
#include "distributed/gradient_merge.h"

namespace fleet::distributed {
namespace {

template <class Hook>
void RemoveHooksOf(framework::RuntimeResources& resources) {
  std::vector<const framework::StepHook*> found;
  for (const auto& hook : resources.step_hooks()) {
    if (dynamic_cast<const Hook*>(hook.get()) != nullptr) found.push_back(hook.get());
  }
  for (const auto* hook : found) resources.RemoveStepHook(hook);
}

}  // namespace

void AttachCollectiveGroup(framework::RuntimeResources& resources,
                           std::shared_ptr<CollectiveGroup> group,
                           std::function<void(std::string)> warn) {
  RemoveHooksOf<OneThreadPerRankHook>(resources);
  RemoveHooksOf<EvenStepsHook>(resources);
  resources.Set<CollectiveGroup>(group);
  resources.AddStepHook(std::make_shared<OneThreadPerRankHook>());
  resources.AddStepHook(std::make_shared<EvenStepsHook>(std::move(group), std::move(warn)));
}

void DetachCollectiveGroup(framework::RuntimeResources& resources) {
  resources.Remove<CollectiveGroup>();
  RemoveHooksOf<OneThreadPerRankHook>(resources);
  RemoveHooksOf<EvenStepsHook>(resources);
  RemoveHooksOf<GradientMergeHook>(resources);
}

}  // namespace fleet::distributed
