#pragma once
// The op registry: what each op means, held as data. One OpInfo per op type carries its
// compile-time shape inference, its gradient maker and its kernels per device.
//
// Op families register themselves through explicit Register<Family>Ops(OpRegistry*) calls (see
// operators/register_ops.h); there are no static registrars. A registry is built once and then
// only read, so it may be shared by any number of executors and threads.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/dtype.h"
#include "core/place.h"
#include "core/tensor.h"
#include "framework/op_spec.h"

namespace fleet::framework {

class ExecutionContext;

enum class VarKind : int { kLoDTensor = 0, kSelectedRows = 1, kLoDTensorArray = 2 };

// What compile time knows of a variable; -1 in shape marks a run-time dimension.
struct VarInfo {
  Shape shape;
  DType dtype = DType::kFloat32;
  int lod_level = 0;
  VarKind kind = VarKind::kLoDTensor;
};

// The view of an op's variables during compile-time shape inference.
class InferShapeContext {
 public:
  InferShapeContext(const OpSpec& op, absl::flat_hash_map<std::string, VarInfo>* vars)
      : op_(op), vars_(vars) {}

  const OpSpec& op() const { return op_; }
  bool HasInput(const std::string& slot) const { return !op_.Inputs(slot).empty(); }
  bool HasOutput(const std::string& slot) const { return !op_.Outputs(slot).empty(); }
  size_t InputSize(const std::string& slot) const { return op_.Inputs(slot).size(); }
  // Throws InvalidArgument naming the op and slot when absent or unknown.
  const VarInfo& Input(const std::string& slot, size_t i = 0) const;
  void SetOutput(const std::string& slot, VarInfo info, size_t i = 0);
  // Sets every output of `slot` (for ops like split with many outputs).
  void SetOutputs(const std::string& slot, const std::vector<VarInfo>& infos);

  template <typename T>
  T Attr(const std::string& name) const {
    return op_.attrs.Get<T>(name, op_.type);
  }
  template <typename T>
  T Attr(const std::string& name, T fallback) const {
    return op_.attrs.GetOr<T>(name, fallback, op_.type);
  }

 private:
  const OpSpec& op_;
  absl::flat_hash_map<std::string, VarInfo>* vars_;
};

using InferShapeFn = std::function<void(InferShapeContext*)>;
// Returns the ops that compute the gradients of `forward`'s inputs from those of its outputs.
// Slots follow the convention of op_spec.h; autodiff later drops outputs nobody needs.
using GradMakerFn = std::function<std::vector<OpSpec>(const OpSpec& forward)>;
using KernelFn = std::function<void(const ExecutionContext&)>;

struct OpInfo {
  std::string type;
  InferShapeFn infer_shape;  // null: outputs keep the shapes Python declared
  GradMakerFn grad_maker;    // null: the op has no gradient
  std::map<DeviceType, KernelFn> kernels;
};

class OpRegistry {
 public:
  OpRegistry() = default;
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

  // Adds a new op type; throws Internal if `type` is already registered.
  OpInfo& Register(const std::string& type);
  // Throws NotFound naming `type` when unknown.
  const OpInfo& Get(const std::string& type) const;
  const OpInfo* Find(const std::string& type) const;
  std::vector<std::string> Types() const;

 private:
  absl::flat_hash_map<std::string, std::unique_ptr<OpInfo>> ops_;
};

// The common gradient maker: one op "<type>_grad" whose inputs are the forward slots
// `forward_inputs` and `forward_outputs` (same names) plus "S@GRAD" for each slot S in
// `output_grads`, and whose outputs are "S@GRAD" for each slot S in `input_grads`.
GradMakerFn SingleGradOp(std::vector<std::string> forward_inputs,
                         std::vector<std::string> forward_outputs,
                         std::vector<std::string> output_grads,
                         std::vector<std::string> input_grads);

}  // namespace fleet::framework
