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
//
// A gradient may instead be split by rows (row_part): each replica reduces only the rows of its
// share into a SelectedRows variable of its own, and runs the update ops of that parameter on
// them; an update that touches only the rows of its gradient (lazy Adam, SGD, Adagrad) then
// does the same arithmetic on the same rows, in the same order, as on the whole. A sparse
// gradient's share is the rows whose RowShare is the replica's, concatenated from every
// replica; a dense one's is one contiguous block of rows (DenseRowShare), summed as SumRange
// sums a range (the same formula, bit for bit) into the replica's own gradient (and under
// AllReduce every replica's), its share's value a view of those rows. This spreads a large
// embedding's, or a dense layer's, reduction and update over every replica.
//
// A dense weight gradient split by rows may also be a product: the backward pass leaves it out
// (its mul_grad computes only the input's gradient) and each replica computes its block of rows
// of dW = X^T dOut over the whole batch, from every replica's X and dOut, into its own variable
// (and under AllReduce copies the block into every replica's). The replicas then do the GEMM
// work of one weight gradient between them, with no sum of per-replica gradients and one
// zeroing of dW instead of one a replica.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/variable.h"

namespace fleet::trainer {

struct GradientSlot {
  std::string name;
  int owner = 0;                   // the replica that applies this gradient's update
  bool everywhere = false;         // read by ops of several replicas: reduce into every one
  std::vector<Variable*> replica;  // the gradient variable of each replica
  // Split by rows: row_part[r] receives replica r's share of the reduced rows. Empty: the
  // gradient is reduced whole, as `owner` and `everywhere` say.
  std::vector<Variable*> row_part;
  // A product (only with row_part): the gradient is X^T dOut of a mul whose X, flattened to
  // [batch, rows], is product_x[r] and whose dOut, [batch, columns], is product_dout[r] in
  // replica r; the replicas' gradient variables are written, not read. Empty: not a product.
  std::vector<Variable*> product_x;
  std::vector<Variable*> product_dout;
  bool product() const { return !product_x.empty(); }
  // The variables that tell whether replica r's backward pass produced this gradient.
  const Variable* produced(int r) const {
    return product() ? product_dout[static_cast<size_t>(r)] : replica[static_cast<size_t>(r)];
  }
};

// The replica whose share of a split gradient holds `row` (of `replicas`): Fibonacci hashing
// (Knuth, TAOCP vol. 3, 6.4), so that ids of any distribution, sequential ones included, spread
// evenly, at the cost of two multiplies a row.
inline int RowShare(int64_t row, int replicas) {
  const uint64_t mixed = static_cast<uint64_t>(row) * 0x9E3779B97F4A7C15ull;
  return static_cast<int>(((mixed >> 32) * static_cast<uint64_t>(replicas)) >> 32);
}

// Rows [first, second) of `rows`: replica `worker`'s share of a dense gradient split by rows
// (of `replicas`), one contiguous block each, of sizes differing by at most one row.
inline std::pair<int64_t, int64_t> DenseRowShare(int64_t rows, int worker, int replicas) {
  return {rows * worker / replicas, rows * (worker + 1) / replicas};
}

struct ReduceTask {
  const GradientSlot* gradient = nullptr;
  bool sparse = false;
  int64_t begin = 0, end = 0;  // element range of a dense gradient
  int worker = 0;              // the replica that runs this task (and, when split, its share)
};

struct ReducePlan {
  std::vector<int> sources;  // replicas that ran the step
  float scale = 1.0f;
  bool all_reduce = true;  // write every replica's variable, else only the owner's
  // Every task runs on its gradient's owner (or on the replica whose share of the rows it is)
  // and no gradient is read by several replicas: a replica may run its update ops right after
  // its own tasks, without waiting for the others.
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

// Reduces one gradient on the calling thread, as the owner_local task of `worker` in a plan with
// these sources would (the same sums, in the same order): the whole gradient when `worker` is
// its owner (-1: the owner), or worker's share of a gradient split by rows. Checks and sizes its
// targets, then sums. Nothing is done when no source holds a value. Throws InvalidArgument as
// PlanReduction. Several threads may reduce distinct gradients (or distinct shares of one split
// gradient) at once, while other ops run, as long as no op reads or writes this gradient's
// variables meanwhile.
void ReduceGradient(const GradientSlot& gradient, const std::vector<int>& sources, int replicas,
                    float scale, bool all_reduce, int worker = -1);

}  // namespace fleet::trainer
