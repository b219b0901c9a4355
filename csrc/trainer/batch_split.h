#pragma once
// How a fed batch is cut into the replicas' shares, as Paddle's ParallelExecutor cuts it
// (LoDTensor::SplitLoDTensor): samples are the rows of a tensor without lod, else its top-level
// sequences; each share takes ceil(samples / replicas) consecutive samples and the last one the
// rest. So 5 samples on 2 replicas are 3 + 2, and 5 samples on 4 replicas are 2 + 2 + 1, three
// shares for four replicas, which is an error: every replica must get a share.

#include <string>
#include <vector>

#include "core/lod_tensor.h"

namespace fleet::trainer {

// The shares of `batch`, viewing its memory (no copy); each share's lod is rebased to start at
// 0. Throws InvalidArgument naming `name`, the number of samples and the replicas when the
// batch gives fewer than `replicas` shares.
std::vector<LoDTensor> SplitBatch(const LoDTensor& batch, int replicas, const std::string& name);

}  // namespace fleet::trainer
