#pragma once
// ExecutionContext: what a kernel sees while it runs one op: its variables (already resolved in
// the scope), its attributes, and the per-run state (random generator).
//
// Kernels size their outputs themselves (Resize, then mutable_data) from the run-time inputs.
// A slot with no variable bound (e.g. a gradient nobody needs) reads as absent: kernels check
// HasOutput before computing optional outputs.

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/place.h"
#include "core/scope.h"
#include "framework/op_spec.h"
#include "framework/runtime.h"

namespace fleet::cuda {
class DeviceContext;  // core/cuda/device_context.h
}  // namespace fleet::cuda

namespace fleet::framework {

// Variables of one slot, resolved in a scope.
struct ResolvedSlot {
  std::string name;
  std::vector<Variable*> vars;
};

// State a run carries across ops: the random generator of dropout and random initialisers
// without a fixed seed, and which thread of the pass runs. One per thread.
struct RunState {
  std::mt19937_64 rng{0x5eed};
  int thread = 0;
  // The executor's distributed resources (runtime.h); null when it has none.
  const RuntimeResources* resources = nullptr;
  // The device of a CUDA executor (its stream, allocator and cuBLAS handle); null on the CPU.
  cuda::DeviceContext* cuda = nullptr;
  Place place;  // where the executor runs kernels
};

class ExecutionContext {
 public:
  ExecutionContext(const OpSpec& op, const std::vector<ResolvedSlot>& inputs,
                   const std::vector<ResolvedSlot>& outputs, RunState* state)
      : op_(op), inputs_(inputs), outputs_(outputs), state_(state) {}

  const OpSpec& op() const { return op_; }
  const std::string& type() const { return op_.type; }

  bool HasInput(const std::string& slot) const { return FindSlot(inputs_, slot) != nullptr; }
  size_t InputSize(const std::string& slot) const;
  const std::string& InputName(const std::string& slot, size_t i = 0) const;
  // Throws InvalidArgument naming the op and slot when missing.
  const Variable& InputVar(const std::string& slot, size_t i = 0) const;
  // The LoDTensor bound to the slot; throws when it holds something else or no data yet.
  const LoDTensor& Input(const std::string& slot, size_t i = 0) const;
  std::vector<const LoDTensor*> MultiInput(const std::string& slot) const;

  bool HasOutput(const std::string& slot) const { return FindSlot(outputs_, slot) != nullptr; }
  size_t OutputSize(const std::string& slot) const;
  const std::string& OutputName(const std::string& slot, size_t i = 0) const;
  Variable* OutputVar(const std::string& slot, size_t i = 0) const;
  LoDTensor* Output(const std::string& slot, size_t i = 0) const;
  std::vector<LoDTensor*> MultiOutput(const std::string& slot) const;

  template <typename T>
  T Attr(const std::string& name) const {
    return op_.attrs.Get<T>(name, op_.type);
  }
  template <typename T>
  T Attr(const std::string& name, T fallback) const {
    return op_.attrs.GetOr<T>(name, fallback, op_.type);
  }

  std::mt19937_64& rng() const { return state_->rng; }
  // Where this kernel runs: CUDA kernels allocate their outputs here.
  Place place() const { return state_->place; }
  // The CUDA device context of a CUDA kernel; Internal when the executor runs on the CPU.
  cuda::DeviceContext& cuda() const;
  int thread() const { return state_->thread; }

  // The process's T (a PS communicator, a collective group) from the executor's resources;
  // Unavailable naming this op and `how_to_set` when the executor has none.
  template <class T>
  T& Resource(const char* how_to_set) const {
    FLEET_ENFORCE(state_->resources != nullptr, Unavailable, "op ", op_.Describe(), " needs a ",
                  T::kResourceName,
                  ", but this executor has no distributed resources: ", how_to_set);
    return state_->resources->Get<T>(absl::StrCat("op ", op_.Describe()), how_to_set);
  }

  // Throws InvalidArgument with the op's description prefixed, for kernel shape checks.
  [[noreturn]] void Fail(const std::string& message) const;

 private:
  static const ResolvedSlot* FindSlot(const std::vector<ResolvedSlot>& slots,
                                      const std::string& name);
  const ResolvedSlot& Slot(const std::vector<ResolvedSlot>& slots, const std::string& name,
                           size_t i, const char* what) const;

  const OpSpec& op_;
  const std::vector<ResolvedSlot>& inputs_;
  const std::vector<ResolvedSlot>& outputs_;
  RunState* state_;
};

// Kernel-side check: FLEET_KERNEL_ENFORCE(ctx, cond, parts...) fails with the op described.
#define FLEET_KERNEL_ENFORCE(ctx, cond, ...)              \
  do {                                                    \
    if (!(cond)) (ctx).Fail(::absl::StrCat(__VA_ARGS__)); \
  } while (0)

}  // namespace fleet::framework
