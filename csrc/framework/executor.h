#pragma once
// Executor: prepare a block once (kernels looked up, attributes decoded), bind it to a scope
// once (variables created and resolved), then run it many times.
//
// Prepare and Bind are separate because trainer threads share one prepared program and each
// bind it to their own child scope. Run is not thread-safe for one BoundProgram; distinct
// BoundPrograms may run in parallel (Hogwild updates of shared parameters are by design).

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/scope.h"
#include "framework/execution_context.h"
#include "framework/op_registry.h"

namespace fleet::framework {

// Op roles, as Python sets them in the "op_role" attribute; used to split run time.
enum class OpRole : int { kForward = 0, kBackward = 1, kOptimize = 2, kOther = 3 };
inline constexpr char kOpRoleAttr[] = "op_role";

struct PreparedOp {
  OpSpec spec;
  const KernelFn* kernel = nullptr;
  OpRole role = OpRole::kForward;
};

struct PreparedVar {
  std::string name;
  bool persistable = false;
  VarKind kind = VarKind::kLoDTensor;
};

struct PreparedProgram {
  std::vector<PreparedOp> ops;
  std::vector<PreparedVar> vars;
};

// A prepared program whose slots are resolved in one scope.
struct BoundProgram {
  const PreparedProgram* program = nullptr;
  Scope* scope = nullptr;
  std::vector<std::vector<ResolvedSlot>> inputs;   // per op
  std::vector<std::vector<ResolvedSlot>> outputs;  // per op
};

// Wall time spent per op role, accumulated over runs.
struct RunStats {
  std::array<int64_t, 4> nanos_by_role{};
  int64_t runs = 0;
};

class Executor {
 public:
  explicit Executor(const OpRegistry* registry, Place place = CPUPlace())
      : registry_(registry), place_(place) {}

  // Throws NotFound for an unknown op type or a block id outside the program, InvalidArgument
  // for an op with no kernel on this executor's place.
  std::unique_ptr<PreparedProgram> Prepare(const proto::ProgramDesc& program, int block_id) const;

  // Creates the block's variables: persistable ones in the scope's root-most ancestor that has
  // them (or in `scope` itself if none has), the rest locally in `scope`.
  BoundProgram Bind(const PreparedProgram& program, Scope* scope) const;

  // Runs every op in order. Kernel errors are rethrown with the op described. `stats` may be null.
  void Run(const BoundProgram& bound, RunState* state, RunStats* stats = nullptr) const;

  const OpRegistry& registry() const { return *registry_; }

 private:
  const OpRegistry* registry_;
  Place place_;
};

}  // namespace fleet::framework
