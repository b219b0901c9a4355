#pragma once
// A program of kernel-less ops that only name what they read and write: for the tests of how
// the data-parallel engine cuts programs (compute segments, barrier tasks).

#include <string>
#include <utility>
#include <vector>

#include "framework/executor.h"

namespace fleet::trainer {

// One op per pair (its inputs "X", its outputs "Out"), typed op0, op1, ... in order.
inline framework::PreparedProgram OpListProgram(
    const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>& ops) {
  framework::PreparedProgram program;
  for (const auto& [in, out] : ops) {
    framework::PreparedOp op;
    op.spec.type = "op" + std::to_string(program.ops.size());
    op.spec.inputs["X"] = in;
    op.spec.outputs["Out"] = out;
    program.ops.push_back(std::move(op));
  }
  return program;
}

}  // namespace fleet::trainer
