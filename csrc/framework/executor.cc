#include "framework/executor.h"

#include <chrono>

#include "core/device_memory.h"
#include "fleet/build_config.h"
#ifdef FLEET_WITH_CUDA
#include "core/cuda/device_context.h"
#endif

namespace fleet::framework {
namespace {

// Rethrows the active fleet::Error as the same type with the op's description in front, unless
// the kernel already described the op (ExecutionContext::Fail does).
[[noreturn]] void RethrowWithOp(const OpSpec& op) {
  try {
    throw;
  } catch (const Error& e) {
    std::string what = e.what();
    std::string message =
        what.rfind("op ", 0) == 0 ? what : absl::StrCat("op ", op.Describe(), ": ", what);
    try {
      throw;
    } catch (const InvalidArgument&) {
      throw InvalidArgument(message);
    } catch (const NotFound&) {
      throw NotFound(message);
    } catch (const Unavailable&) {
      throw Unavailable(message);
    } catch (const Timeout&) {
      throw Timeout(message);
    } catch (const OutOfMemory&) {
      throw OutOfMemory(message);
    } catch (const Error&) {
      throw Internal(message);
    }
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(absl::StrCat("op ", op.Describe(), ": out of memory"));
  } catch (const std::exception& e) {
    throw Internal(absl::StrCat("op ", op.Describe(), ": ", e.what()));
  }
}

Variable* CreateVar(Scope* scope, const PreparedVar& var, Executor::MissingPersistable missing) {
  if (var.persistable) {
    if (Variable* existing = scope->FindVar(var.name)) return existing;
    FLEET_ENFORCE(missing == Executor::MissingPersistable::kCreate, NotFound,
                  "persistable variable '", var.name,
                  "' is not in the root scope; run the startup program on that scope first "
                  "(trainer threads never create their own copy of a persistable variable)");
  }
  Variable* v = scope->Var(var.name);
  if (!v->IsInitialized()) {
    switch (var.kind) {
      case VarKind::kLoDTensor:
        v->GetMutable<LoDTensor>();
        break;
      case VarKind::kSelectedRows:
        v->GetMutable<SelectedRows>();
        break;
      case VarKind::kLoDTensorArray:
        v->GetMutable<LoDTensorArray>();
        break;
    }
  }
  return v;
}

std::vector<ResolvedSlot> Resolve(const VarNameMap& slots, Scope* scope, bool create) {
  std::vector<ResolvedSlot> out;
  out.reserve(slots.size());
  for (const auto& [slot, names] : slots) {
    ResolvedSlot resolved{slot, {}};
    for (const auto& name : names) {
      Variable* v = scope->FindVar(name);
      if (v == nullptr && create) v = scope->Var(name);
      FLEET_ENFORCE(v != nullptr, NotFound, "variable '", name, "' of slot '", slot,
                    "' is neither declared in the block nor in the scope");
      resolved.vars.push_back(v);
    }
    out.push_back(std::move(resolved));
  }
  return out;
}

// Copies the tensors of `slots` held elsewhere than `place` to `place`, in their variables.
void MoveTo(const std::vector<ResolvedSlot>& slots, Place place) {
  for (const auto& slot : slots) {
    for (Variable* var : slot.vars) {
      if (var->IsType<LoDTensor>()) {
        const LoDTensor& tensor = var->Get<LoDTensor>();
        if (tensor.initialized() && !(tensor.place() == place)) {
          *var->GetMutable<LoDTensor>() = CopyToPlace(tensor, place);
        }
      } else if (var->IsType<SelectedRows>()) {
        const SelectedRows& rows = var->Get<SelectedRows>();
        if (rows.value().initialized() && !(rows.value().place() == place)) {
          *var->GetMutable<SelectedRows>() = CopyToPlace(rows, place);
        }
      }
    }
  }
}

}  // namespace

std::unique_ptr<PreparedProgram> Executor::Prepare(const proto::ProgramDesc& program,
                                                   int block_id) const {
  FLEET_ENFORCE(block_id >= 0 && block_id < program.blocks_size(), NotFound, "block ", block_id,
                " is not in the program (it has ", program.blocks_size(), " blocks)");
  const auto& block = program.blocks(block_id);
  auto prepared = std::make_unique<PreparedProgram>();
  for (const auto& var : block.vars()) {
    prepared->vars.push_back(
        {var.name(), var.persistable(), static_cast<VarKind>(static_cast<int>(var.type()))});
  }
  for (const auto& desc : block.ops()) {
    PreparedOp op;
    op.spec = OpSpecFromProto(desc);
    const OpInfo& info = registry_->Get(op.spec.type);
    auto kernel = info.kernels.find(place_.device);
    op.kernel_place = place_;
    if (kernel == info.kernels.end() && place_.device != DeviceType::kCPU) {
      kernel = info.kernels.find(DeviceType::kCPU);
      op.kernel_place = CPUPlace();
    }
    FLEET_ENFORCE(kernel != info.kernels.end(), InvalidArgument, "op '", op.spec.type,
                  "' has no kernel for ", place_.ToString());
    op.kernel = &kernel->second;
    int role = op.spec.attrs.GetOr<int32_t>(kOpRoleAttr, 0, op.spec.type);
    op.role = static_cast<OpRole>(role >= 0 && role <= 3 ? role : 3);
    prepared->ops.push_back(std::move(op));
  }
  return prepared;
}

void Executor::set_resources(std::shared_ptr<RuntimeResources> resources) {
  FLEET_ENFORCE(resources != nullptr, InvalidArgument, "Executor resources must not be null");
  resources_ = std::move(resources);
}

BoundProgram Executor::Bind(const PreparedProgram& program, Scope* scope,
                            MissingPersistable missing) const {
  BoundProgram bound;
  bound.program = &program;
  bound.scope = scope;
  for (const auto& var : program.vars) CreateVar(scope, var, missing);
  for (const auto& op : program.ops) {
    try {
      bound.inputs.push_back(Resolve(op.spec.inputs, scope, /*create=*/false));
      bound.outputs.push_back(Resolve(op.spec.outputs, scope, /*create=*/true));
    } catch (const Error&) {
      RethrowWithOp(op.spec);
    }
  }
  return bound;
}

void Executor::Run(const BoundProgram& bound, RunState* state, RunStats* stats) const {
  state->resources = resources_.get();
  state->place = place_;
  const bool on_device = place_.device != DeviceType::kCPU;
#ifdef FLEET_WITH_CUDA
  if (on_device) state->cuda = &cuda::DeviceContext::Get(place_.device_id);
#endif
  const auto& ops = bound.program->ops;
  using Clock = std::chrono::steady_clock;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PreparedOp& op = ops[i];
    ExecutionContext ctx(op.spec, bound.inputs[i], bound.outputs[i], state);
    auto start = stats ? Clock::now() : Clock::time_point{};
    try {
      if (on_device) MoveTo(bound.inputs[i], op.kernel_place);
      (*op.kernel)(ctx);
      if (on_device && !(op.kernel_place == place_)) MoveTo(bound.outputs[i], place_);
    } catch (...) {
      RethrowWithOp(op.spec);
    }
    if (stats) {
      stats->nanos_by_role[static_cast<int>(op.role)] +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    }
  }
  if (stats) ++stats->runs;
}

}  // namespace fleet::framework
