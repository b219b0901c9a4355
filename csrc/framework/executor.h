#pragma once
// Executor: prepare a block once (kernels looked up, attributes decoded), bind it to a scope
// once (variables created and resolved), then run it many times.
//
// Prepare and Bind are separate because trainer threads share one prepared program and each
// bind it to their own child scope. Run is not thread-safe for one BoundProgram; distinct
// BoundPrograms may run in parallel (Hogwild updates of shared parameters are by design).
//
// Who writes the root scope's parameters while trainer threads run: the threads themselves
// (optimizer ops, Hogwild: element-wise float stores into tensors whose shape and buffer never
// change during a pass), and the distributed resources' own threads (a communicator's receive
// thread copies fresh values into the same buffers the same way). Nobody may resize, reallocate
// or replace a root-scope parameter during a pass; a kernel that would (an op writing a
// persistable output of another shape) fails instead. Everything else a thread writes lives in
// its own child scope.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/scope.h"
#include "framework/execution_context.h"
#include "framework/op_registry.h"
#include "framework/runtime.h"

namespace fleet::framework {

// Op roles, as Python sets them in the "op_role" attribute; used to split run time.
enum class OpRole : int { kForward = 0, kBackward = 1, kOptimize = 2, kOther = 3 };
inline constexpr char kOpRoleAttr[] = "op_role";

struct PreparedOp {
  OpSpec spec;
  const KernelFn* kernel = nullptr;
  OpRole role = OpRole::kForward;
  // Where the kernel runs: the executor's place, or the CPU for an op that has no kernel for a
  // CUDA executor's device (its inputs are copied to the host first, see Executor::Run).
  Place kernel_place;
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
      : registry_(registry), place_(place), resources_(std::make_shared<RuntimeResources>()) {}

  // Throws NotFound for an unknown op type or a block id outside the program, InvalidArgument
  // for an op with no kernel on this executor's place. On a CUDA place an op with only a CPU
  // kernel runs that kernel (initialisers, metrics): see Run.
  std::unique_ptr<PreparedProgram> Prepare(const proto::ProgramDesc& program, int block_id) const;

  // How Bind treats a persistable variable that no scope up the chain holds yet.
  enum class MissingPersistable {
    kCreate,  // create it in `scope` (Executor.run on the root scope: the startup program)
    kFail,    // NotFound naming it (trainer threads: a per-thread copy would silently diverge)
  };
  // Creates the block's variables: persistable ones found in `scope` or an ancestor are shared,
  // missing ones are handled by `missing`; the rest are created locally in `scope`.
  BoundProgram Bind(const PreparedProgram& program, Scope* scope,
                    MissingPersistable missing = MissingPersistable::kCreate) const;

  // Runs every op in order. Kernel errors are rethrown with the op described. `stats` may be null.
  //
  // On a CUDA place every CUDA kernel is queued on the device's one stream and Run returns
  // without waiting for it (no host synchronisation inside a step). Before each op, inputs held
  // on another place than the kernel's are copied there in their variables (a parameter set
  // from NumPy moves to the device once; host-to-device copies are asynchronous through pinned
  // memory). A CPU-only op waits for the device to copy its inputs back, and its outputs are
  // copied to the device after it, so that initialisers run the CPU kernel (the same numbers as
  // on the CPU) and leave the parameters on the device.
  void Run(const BoundProgram& bound, RunState* state, RunStats* stats = nullptr) const;

  const Place& place() const { return place_; }

  const OpRegistry& registry() const { return *registry_; }

  // The distributed resources kernels and step hooks of this executor's runs see (runtime.h).
  // Never null. Change them only between runs.
  const std::shared_ptr<RuntimeResources>& resources() const { return resources_; }
  void set_resources(std::shared_ptr<RuntimeResources> resources);

 private:
  const OpRegistry* registry_;
  Place place_;
  std::shared_ptr<RuntimeResources> resources_;
};

}  // namespace fleet::framework
