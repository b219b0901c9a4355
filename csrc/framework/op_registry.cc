#include "framework/op_registry.h"

#include <algorithm>

namespace fleet::framework {

const VarInfo& InferShapeContext::Input(const std::string& slot, size_t i) const {
  const auto& args = op_.Inputs(slot);
  FLEET_ENFORCE(i < args.size(), InvalidArgument, "op ", op_.Describe(), ": input slot '", slot,
                "' needs at least ", i + 1, " variable(s)");
  auto it = vars_->find(args[i]);
  FLEET_ENFORCE(it != vars_->end(), InvalidArgument, "op ", op_.Describe(), ": input '", args[i],
                "' of slot '", slot, "' is not declared in the block");
  return it->second;
}

void InferShapeContext::SetOutput(const std::string& slot, VarInfo info, size_t i) {
  const auto& args = op_.Outputs(slot);
  FLEET_ENFORCE(i < args.size(), InvalidArgument, "op ", op_.Describe(), ": output slot '", slot,
                "' needs at least ", i + 1, " variable(s)");
  (*vars_)[args[i]] = std::move(info);
}

void InferShapeContext::SetOutputs(const std::string& slot, const std::vector<VarInfo>& infos) {
  for (size_t i = 0; i < infos.size(); ++i) SetOutput(slot, infos[i], i);
}

OpInfo& OpRegistry::Register(const std::string& type) {
  auto& slot = ops_[type];
  FLEET_ENFORCE(slot == nullptr, Internal, "op '", type, "' is registered twice");
  slot = std::make_unique<OpInfo>();
  slot->type = type;
  return *slot;
}

const OpInfo* OpRegistry::Find(const std::string& type) const {
  auto it = ops_.find(type);
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpInfo& OpRegistry::Get(const std::string& type) const {
  const OpInfo* info = Find(type);
  FLEET_ENFORCE(info != nullptr, NotFound, "unknown op type '", type, "' (", ops_.size(),
                " op types are registered; see fleet.registered_ops())");
  return *info;
}

std::vector<std::string> OpRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& [type, info] : ops_) types.push_back(type);
  std::sort(types.begin(), types.end());
  return types;
}

GradMakerFn SingleGradOp(std::vector<std::string> forward_inputs,
                         std::vector<std::string> forward_outputs,
                         std::vector<std::string> output_grads,
                         std::vector<std::string> input_grads) {
  return [=](const OpSpec& fwd) {
    OpSpec grad;
    grad.type = fwd.type + "_grad";
    grad.attrs = fwd.attrs;
    for (const auto& slot : forward_inputs) {
      if (!fwd.Inputs(slot).empty()) grad.inputs[slot] = fwd.Inputs(slot);
    }
    for (const auto& slot : forward_outputs) {
      if (!fwd.Outputs(slot).empty()) grad.inputs[slot] = fwd.Outputs(slot);
    }
    for (const auto& slot : output_grads) {
      std::vector<std::string> names;
      for (const auto& n : fwd.Outputs(slot)) names.push_back(GradName(n));
      if (!names.empty()) grad.inputs[GradName(slot)] = names;
    }
    for (const auto& slot : input_grads) {
      std::vector<std::string> names;
      for (const auto& n : fwd.Inputs(slot)) names.push_back(GradName(n));
      if (!names.empty()) grad.outputs[GradName(slot)] = names;
    }
    return std::vector<OpSpec>{grad};
  };
}

}  // namespace fleet::framework
