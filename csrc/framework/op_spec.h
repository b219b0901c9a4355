#pragma once
// OpSpec: the C++ form of an OpDesc (type, named input/output slots, attributes), used by the
// registry, autodiff and the executor. Conversion to and from framework.proto lives here.

#include <map>
#include <string>
#include <vector>

#include "fleet/framework/framework.pb.h"
#include "framework/attribute.h"

namespace fleet::framework {

namespace proto = ::fleet::framework::proto;

// Slot name -> variable names, in order. std::map keeps printing and serialising stable.
using VarNameMap = std::map<std::string, std::vector<std::string>>;

// Attribute under which Python records the user's file:line that created an op.
inline constexpr char kOpCallsiteAttr[] = "op_callsite";

struct OpSpec {
  std::string type;
  VarNameMap inputs;
  VarNameMap outputs;
  AttributeMap attrs;

  // Arguments of a slot; empty when the slot is absent.
  const std::vector<std::string>& Inputs(const std::string& slot) const;
  const std::vector<std::string>& Outputs(const std::string& slot) const;
  // "mul(X=[a], Y=[w]) -> (Out=[b]) at train.py:42", for error messages.
  std::string Describe() const;
};

// The conventions of autodiff: the gradient of variable v is "v@GRAD", and the slot that carries
// the gradient of slot S is "S@GRAD".
inline std::string GradName(const std::string& name) { return name + "@GRAD"; }

OpSpec OpSpecFromProto(const proto::OpDesc& desc);
proto::OpDesc OpSpecToProto(const OpSpec& spec);

}  // namespace fleet::framework
