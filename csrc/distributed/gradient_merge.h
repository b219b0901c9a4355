#pragma once
// GradientMergeHook: the "apply" half of gradient merge (Paddle's batch merge), as a step hook.
//
// The collective pass splits the training program in two: block 0 runs forward, backward and
// c_gradient_merge_acc (every gradient added into a persistable accumulator, a step counter
// incremented); another block holds what runs once per k micro-batches: the accumulators'
// all-reduce, the optimizer ops reading them, and their reset to zero. This hook runs that block
// after a step whose counter reached a multiple of k, so k micro-batches of batch B give exactly
// one optimizer step on a batch of k * B, with one all-reduce.
//
// The hook keys on the counter, not on being called: runs of other programs on the same executor
// (startup, a test program) leave the counter alone and never trigger an update.
//
// Thread safety: one trainer thread per rank (OneThreadPerRankHook), so AfterStep never runs
// concurrently with itself.

#include <cstdint>
#include <memory>
#include <string>

#include "distributed/collective_group.h"
#include "framework/executor.h"

namespace fleet::distributed {

struct GradientMergeOptions {
  int apply_block = 1;   // the block of `program` run every k steps
  std::string step_var;  // the int64 counter c_gradient_merge_acc increments
  int k_steps = 1;
};

class GradientMergeHook : public framework::StepHook {
 public:
  // Prepares `options.apply_block` of `program` now (errors surface here). `group` may be null in
  // a program without collective ops.
  GradientMergeHook(const framework::OpRegistry* registry,
                    const framework::proto::ProgramDesc& program, GradientMergeOptions options,
                    std::shared_ptr<CollectiveGroup> group);

  void AfterStep(const framework::StepInfo& info) override;
  std::string Name() const override;

  int64_t applied() const { return applied_; }

 private:
  framework::Executor executor_;
  std::unique_ptr<framework::PreparedProgram> apply_;
  GradientMergeOptions options_;
  framework::RunState state_;
  int64_t last_step_ = 0;
  int64_t applied_ = 0;
};

}  // namespace fleet::distributed
