#include "framework/runtime.h"

#include <algorithm>
#include <exception>

namespace fleet::framework {

void RuntimeResources::RemoveStepHook(const StepHook* hook) {
  hooks_.erase(std::remove_if(hooks_.begin(), hooks_.end(),
                              [hook](const auto& h) { return h.get() == hook; }),
               hooks_.end());
}

void RunPrepareThreadScope(const RuntimeResources* resources, int thread, Scope* scope) {
  if (resources == nullptr) return;
  for (const auto& hook : resources->step_hooks()) hook->PrepareThreadScope(thread, scope);
}

void RunPassBegin(const RuntimeResources* resources, const PassInfo& pass) {
  if (resources == nullptr) return;
  for (const auto& hook : resources->step_hooks()) hook->OnPassBegin(pass);
}

bool RunAdmitStep(const RuntimeResources* resources, const StepInfo& info) {
  if (resources == nullptr) return true;
  bool admit = true;
  for (const auto& hook : resources->step_hooks()) admit = hook->AdmitStep(info) && admit;
  return admit;
}

void RunBeforeStep(const RuntimeResources* resources, const StepInfo& info) {
  if (resources == nullptr) return;
  for (const auto& hook : resources->step_hooks()) hook->BeforeStep(info);
}

void RunAfterStep(const RuntimeResources* resources, const StepInfo& info) {
  if (resources == nullptr) return;
  for (const auto& hook : resources->step_hooks()) hook->AfterStep(info);
}

void RunBatchAhead(const RuntimeResources* resources, const StepInfo& next, int distance) {
  if (resources == nullptr) return;
  for (const auto& hook : resources->step_hooks()) {
    if (hook->BatchesAhead() >= distance) hook->OnBatchAhead(next);
  }
}

int MaxBatchesAhead(const RuntimeResources* resources) {
  int ahead = 1;
  if (resources == nullptr) return ahead;
  for (const auto& hook : resources->step_hooks()) ahead = std::max(ahead, hook->BatchesAhead());
  return ahead;
}

void RunThreadEnd(const RuntimeResources* resources, int thread) {
  if (resources == nullptr) return;
  for (const auto& hook : resources->step_hooks()) hook->OnThreadEnd(thread);
}

void RunPassEnd(const RuntimeResources* resources) {
  if (resources == nullptr) return;
  std::exception_ptr first;
  for (const auto& hook : resources->step_hooks()) {
    try {
      hook->OnPassEnd();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace fleet::framework
