#pragma once
// Scope: a tree of name -> Variable maps. Lookups fall through to the parent, so trainer threads
// get child scopes for their activations while sharing the parameters of the root.
//
// Thread safety: creating and finding variables and kids is safe from many threads; the
// Variables themselves are not synchronised (the executor decides who writes what).

#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "core/variable.h"

namespace fleet {

class Scope {
 public:
  Scope() = default;
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Returns the variable `name` of this scope, creating it here if this scope lacks it (parents
  // are not searched: a new local variable shadows theirs).
  Variable* Var(const std::string& name);
  // Searches this scope, then its ancestors; nullptr if none has `name`.
  Variable* FindVar(const std::string& name) const;
  Variable* FindLocalVar(const std::string& name) const;
  // Like FindVar but throws NotFound naming the variable.
  Variable* GetVar(const std::string& name) const;
  bool EraseLocalVar(const std::string& name);

  // A child scope owned by this one; lives until DropKids() or this scope's destruction.
  Scope* NewScope();
  void DropKids();
  const Scope* parent() const { return parent_; }
  std::vector<std::string> LocalVarNames() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Variable>> vars_ ABSL_GUARDED_BY(mu_);
  std::list<std::unique_ptr<Scope>> kids_ ABSL_GUARDED_BY(mu_);
  Scope* parent_ = nullptr;
};

}  // namespace fleet
