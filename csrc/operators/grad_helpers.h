#pragma once
// Pieces shared by gradient ops whose slots hold several variables (concat, sum, ...).

#include <string>
#include <vector>

#include "framework/op_registry.h"

namespace fleet::operators {

// For each variable of `grad_slot` (e.g. "X@GRAD") of a grad op, the position in the op's
// input `slot` (e.g. "X") of the forward variable it is the gradient of.
//
// Positions alone do not say it: autodiff drops the gradients nobody needs from a slot and
// renames the gradient of a variable used twice to "v@GRAD@RENAME@k". So the names are matched
// in order ("v@GRAD" or "v@GRAD@RENAME@..." belongs to "v"); when the two slots have the same
// length the match is positional. Throws InvalidArgument naming the op and the unmatched name.
std::vector<size_t> GradTargets(const framework::OpSpec& op, const std::string& slot,
                                const std::string& grad_slot);

// Infer-shape function of a grad op: every variable of "S@GRAD" gets the shape, dtype and lod
// level of the forward input of slot S it belongs to, for each S in `slots`. Absent gradient
// slots are skipped.
framework::InferShapeFn GradsLikeInputs(std::vector<std::string> slots);

}  // namespace fleet::operators
