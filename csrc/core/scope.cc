#include "core/scope.h"

#include <algorithm>

namespace fleet {

Variable* Scope::Var(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto& slot = vars_[name];
  if (slot == nullptr) slot = std::make_unique<Variable>();
  return slot.get();
}

Variable* Scope::FindLocalVar(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second.get();
}

Variable* Scope::FindVar(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_) {
    if (Variable* v = s->FindLocalVar(name)) return v;
  }
  return nullptr;
}

Variable* Scope::GetVar(const std::string& name) const {
  Variable* v = FindVar(name);
  FLEET_ENFORCE(v != nullptr, NotFound, "variable '", name,
                "' is not in the scope (was the startup program run, and is the name right?)");
  return v;
}

bool Scope::EraseLocalVar(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return vars_.erase(name) > 0;
}

Scope* Scope::NewScope() {
  absl::MutexLock lock(&mu_);
  kids_.push_back(std::make_unique<Scope>());
  kids_.back()->parent_ = this;
  return kids_.back().get();
}

void Scope::DropKids() {
  absl::MutexLock lock(&mu_);
  kids_.clear();
}

std::vector<std::string> Scope::LocalVarNames() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  names.reserve(vars_.size());
  for (const auto& [name, var] : vars_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace fleet
