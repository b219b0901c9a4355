#pragma once
// The compute program of a data-parallel step cut into segments, so that a gradient can be
// reduced while the replicas still run the backward ops after it (the reduction of the last
// layers' gradients overlaps the backward pass of the first layers).
//
// A cut follows the last op of the compute program that reads or writes a reduced gradient:
// once every replica has run the segment ending there, no op of this step touches that gradient
// in any replica again, and its owner may read every replica's value and write the reduced one.

#include <memory>
#include <string>
#include <vector>

#include "framework/executor.h"

namespace fleet::trainer {

struct ComputeSegments {
  // The ops of the compute program in order, cut into consecutive segments: at least one, and
  // none empty unless the program has no ops. They declare no variables: bind each one after
  // the whole program is bound to the same scope.
  std::vector<std::unique_ptr<framework::PreparedProgram>> segments;
  // Per gradient (in the order given): the index of the segment after which no op touches it.
  // A gradient no op touches is final after the last segment.
  std::vector<size_t> final_after;
};

// Cuts `compute` after the last access of each of `gradients`.
ComputeSegments CutAfterLastAccess(const framework::PreparedProgram& compute,
                                   const std::vector<std::string>& gradients);

}  // namespace fleet::trainer
