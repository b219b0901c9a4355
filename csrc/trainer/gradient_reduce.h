#pragma once
// In-memory reduction of gradients across the replicas of a data-parallel step.
//
// Every replica holds its own value of each gradient variable (in its own scope). The reduced
// value is sum over the replicas that ran the step, times `scale` (1/replicas for Paddle's
// default GradientScaleStrategy.CoeffNumDevice, so that replicas on equal shares of a batch
// give the gradient of the whole batch's mean loss). It is written to the owner's variable
// (ReduceStrategy.Reduce) or to every replica's variable (AllReduce).
//
// The work is cut into tasks that replicas run in parallel. When the owners' shares of the dense
// elements are balanced, every gradient is one task of its owner (owner_local). Otherwise a
// large dense gradient is cut into one contiguous range per replica (replica r sums range r over
// every replica and writes it to every target: a reduce-scatter and all-gather in one pass over
// shared memory); a small dense gradient or a sparse one is one task of its owner. A sparse
// (SelectedRows) gradient is reduced by concatenating the replicas' rows and scaled values:
// consumers add duplicate rows, so the result is the sum without densifying the table.

#include <cstdint>
#include <string>
#include <vector>

#include "core/variable.h"

namespace fleet::trainer {

struct GradientSlot {
  std::string name;
  int owner = 0;                   // the replica that applies this gradient's update
  bool everywhere = false;         // read by ops of several replicas: reduce into every one
  std::vector<Variable*> replica;  // the gradient variable of each replica
};

struct ReduceTask {
  const GradientSlot* gradient = nullptr;
  bool sparse = false;
  int64_t begin = 0, end = 0;  // element range of a dense gradient
  int worker = 0;              // the replica that runs this task
};

struct ReducePlan {
  std::vector<int> sources;  // replicas that ran the step
  float scale = 1.0f;
  bool all_reduce = true;  // write every replica's variable, else only the owner's
  // Every task runs on its gradient's owner and no gradient is read by several replicas: a
  // replica may run its update ops right after its own tasks, without waiting for the others.
  bool owner_local = false;
  std::vector<ReduceTask> tasks;
};

// Builds the tasks of one reduction and sizes every target variable (serially, before the
// replicas run the tasks in parallel). Throws InvalidArgument naming a gradient whose replicas
// hold different kinds or shapes.
ReducePlan PlanReduction(const std::vector<GradientSlot>& gradients, std::vector<int> sources,
                         int replicas, float scale, bool all_reduce);

// Runs the tasks of `plan` assigned to `worker`. Tasks touch disjoint memory, so replicas run
// this concurrently, each with its own worker index.
void RunReduceTasks(const ReducePlan& plan, int worker);

// Reduces one gradient whole on the calling thread, as one owner_local task of a plan with
// these sources would (the same sums, in the same order): checks and sizes its targets, then
// sums. Nothing is done when no source holds a value. Throws InvalidArgument as PlanReduction.
// Several threads may reduce distinct gradients at once, while other ops run, as long as no op
// reads or writes this gradient's variables meanwhile.
void ReduceGradient(const GradientSlot& gradient, const std::vector<int>& sources, int replicas,
                    float scale, bool all_reduce);

}  // namespace fleet::trainer
