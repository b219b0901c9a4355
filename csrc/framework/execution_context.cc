#include "framework/execution_context.h"

namespace fleet::framework {

const ResolvedSlot* ExecutionContext::FindSlot(const std::vector<ResolvedSlot>& slots,
                                               const std::string& name) {
  for (const auto& slot : slots) {
    if (slot.name == name) return slot.vars.empty() ? nullptr : &slot;
  }
  return nullptr;
}

const ResolvedSlot& ExecutionContext::Slot(const std::vector<ResolvedSlot>& slots,
                                           const std::string& name, size_t i,
                                           const char* what) const {
  const ResolvedSlot* slot = FindSlot(slots, name);
  if (slot == nullptr || i >= slot->vars.size()) {
    Fail(absl::StrCat(what, " slot '", name, "' has no variable at position ", i));
  }
  return *slot;
}

size_t ExecutionContext::InputSize(const std::string& slot) const {
  const ResolvedSlot* s = FindSlot(inputs_, slot);
  return s == nullptr ? 0 : s->vars.size();
}

size_t ExecutionContext::OutputSize(const std::string& slot) const {
  const ResolvedSlot* s = FindSlot(outputs_, slot);
  return s == nullptr ? 0 : s->vars.size();
}

const std::string& ExecutionContext::InputName(const std::string& slot, size_t i) const {
  Slot(inputs_, slot, i, "input");
  return op_.Inputs(slot)[i];
}

const std::string& ExecutionContext::OutputName(const std::string& slot, size_t i) const {
  Slot(outputs_, slot, i, "output");
  return op_.Outputs(slot)[i];
}

const Variable& ExecutionContext::InputVar(const std::string& slot, size_t i) const {
  return *Slot(inputs_, slot, i, "input").vars[i];
}

const LoDTensor& ExecutionContext::Input(const std::string& slot, size_t i) const {
  const Variable& var = InputVar(slot, i);
  if (!var.IsType<LoDTensor>()) {
    Fail(absl::StrCat("input '", op_.Inputs(slot)[i], "' (slot ", slot, ") holds ", var.KindName(),
                      ", expected a LoDTensor"));
  }
  const LoDTensor& t = var.Get<LoDTensor>();
  if (!t.initialized()) {
    Fail(absl::StrCat("input '", op_.Inputs(slot)[i], "' (slot ", slot,
                      ") has no data: it is read before any op or feed wrote it"));
  }
  return t;
}

std::vector<const LoDTensor*> ExecutionContext::MultiInput(const std::string& slot) const {
  std::vector<const LoDTensor*> out;
  for (size_t i = 0; i < InputSize(slot); ++i) out.push_back(&Input(slot, i));
  return out;
}

Variable* ExecutionContext::OutputVar(const std::string& slot, size_t i) const {
  return Slot(outputs_, slot, i, "output").vars[i];
}

LoDTensor* ExecutionContext::Output(const std::string& slot, size_t i) const {
  return OutputVar(slot, i)->GetMutable<LoDTensor>();
}

std::vector<LoDTensor*> ExecutionContext::MultiOutput(const std::string& slot) const {
  std::vector<LoDTensor*> out;
  for (size_t i = 0; i < OutputSize(slot); ++i) out.push_back(Output(slot, i));
  return out;
}

void ExecutionContext::Fail(const std::string& message) const {
  throw InvalidArgument(absl::StrCat("op ", op_.Describe(), ": ", message));
}

cuda::DeviceContext& ExecutionContext::cuda() const {
  FLEET_ENFORCE(state_->cuda != nullptr, Internal, "op ", op_.Describe(),
                ": a CUDA kernel ran on an executor without a CUDA device");
  return *state_->cuda;
}

}  // namespace fleet::framework
