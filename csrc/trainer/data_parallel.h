#pragma once
// DataParallelEngine: one-process data parallelism (fluid's CompiledProgram.with_data_parallel /
// ParallelExecutor on CPU). N replicas are threads of this process, each running the program
// in a scope of its own under the root scope; the parameters stay in the root scope, one copy
// shared by every replica.
//
// One step:
//   0. the prelude phases (replica 0: ops that advance shared state once a step);
//   1. every replica with a share of the batch sets its inputs in its scope and runs the compute
//      program (forward and backward) on it, in parallel;
//   2. the gradients are reduced in memory (gradient_reduce.h): summed over those replicas and
//      scaled (by default by 1 / replicas, Paddle's GradientScaleStrategy.CoeffNumDevice),
//      into every replica's gradient (AllReduce) or only into the owner's (Reduce); when each
//      replica reduces exactly the gradients its own update ops read (owner_local), it runs the
//      first update phase right after, without a barrier between the two;
//      overlapped: once a step of every replica was owner_local, the next steps with every
//      replica active reduce during the compute program instead. It is cut after each
//      gradient's last access (compute_segments.h); each replica publishes how many segments it
//      has run, and after each of its own segments reduces those of its gradients that every
//      replica is past, so the last layers' gradients are reduced while the backward pass of
//      the first layers still runs, while they are still in cache. Compute, reduction and the
//      first update phase are then one fork-join: a replica starts its updates once every
//      replica has finished the compute program (no op reads a parameter while it changes).
//      A replica with less work after that barrier than another keeps its last reductions
//      until after it, so that the work on both sides of the barrier is even
//      (PlanDeferredReductions). The work after that barrier is cut into tasks (a gradient's
//      reduction and the update ops that read it, barrier_tasks.h): a replica done with its own
//      takes the tasks another has not started, so that the step's join waits less for the
//      slowest (share_barrier_work). A replica that finishes its compute program before
//      another runs its own tasks while it waits at the barrier, each as soon as every replica
//      is past the last op that touches what the task touches (early_barrier_work).
//      The sums are those of the plain path, term for term: the parameters are bit for bit the
//      same. A weight gradient the plan makes a product (BuildStrategy.split_weight_gradients)
//      is not computed by the compute program: its reduction is each replica computing its
//      block of rows from every replica's X and dOut (gradient_reduce.h), as soon as every
//      replica is past the last access of its dOut;
//   3. the update phases run: in each phase every replica runs its own part (the update ops of
//      the parameters it owns, and its share of the rows of a gradient split by rows),
//      with a barrier between phases (ops that must see every update before them, such as a
//      learning-rate schedule, are a phase of replica 0 alone, run on the calling thread).
// Each parameter's update runs once, on its owner replica; as every replica reads the one root
// copy, the owner's write is the broadcast. The step is bracketed by the executor's step hooks
// as one Executor.run step is (thread 0 of a pass of one thread), so a parameter-server worker's
// communicator sees one step per data-parallel step.
//
// Thread safety: Step must be called from one thread at a time; it blocks until the step is done
// and may be called with the GIL released. No Python runs on the replica threads.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "framework/executor.h"
#include "trainer/compute_segments.h"
#include "trainer/gradient_reduce.h"
#include "trainer/replica_pool.h"

namespace fleet::trainer {

// Waits of the replicas whose poll gave up (DataParallelOptions::spin_before_sleep_us), each a
// likely sleep and wake-up, by what they waited for.
struct DataParallelWaits {
  int64_t for_work = 0;     // replicas 1.. waiting for the next step or phase
  int64_t for_workers = 0;  // replica 0 waiting for the others to finish a step or phase
  int64_t for_compute = 0;  // a replica done with an overlapped compute program, for the others
};

struct DataParallelOptions {
  int replicas = 1;
  bool all_reduce = true;  // false: ReduceStrategy.Reduce
  // Multiplies the summed gradients; 0 means 1 / (replicas that ran the step).
  float gradient_scale = 0;
  // The gradients reduced after the compute program, and the replica owning each one's update
  // (-1: ops of several replicas read it, so it is reduced into every replica).
  std::vector<std::string> gradients;
  std::vector<int> gradient_owners;
  // Per gradient (or empty: none): the variable that receives each replica's share of its rows
  // when the gradient (sparse, or a dense one of a plan its split balances) is split by rows
  // (gradient_reduce.h), "" when it is not. The update ops of a split gradient run on every
  // replica, each reading its share there.
  std::vector<std::string> gradient_row_parts;
  // Per gradient (or empty: none): for a weight gradient split by rows that the backward pass
  // leaves out (its mul_grad has no Y@GRAD), the mul's input X and output gradient, from which
  // each replica computes its block of rows over the whole batch (gradient_reduce.h); "" when
  // the backward pass computes the gradient.
  std::vector<std::string> gradient_product_x;
  std::vector<std::string> gradient_product_dout;
  uint64_t seed = 0x5eed;  // replica r's random generator starts from seed + r
  // The first prelude_phases update phases run before the compute program (ops that advance
  // shared state once a step, such as a learning-rate schedule's step counter).
  int prelude_phases = 0;
  // Reduce gradients while the compute program runs (step 2 above); false: always after it.
  bool overlap_reduction = true;
  // In an overlapped step, let a replica with less work after the barrier that ends the compute
  // program keep its last reductions until after it (PlanDeferredReductions); false: every
  // reduction runs as soon as every replica is past its gradient.
  bool even_barrier_work = true;
  // In an overlapped step, let a replica that has done its own work after that barrier (its last
  // reductions and its part of the first update phase, cut into tasks: barrier_tasks.h) take
  // the tasks another replica has not started yet, instead of waiting at the join; false: each
  // replica does its own. The same reductions and ops either way. Left off where an update
  // group reads several gradients or one another replica reduces.
  bool share_barrier_work = true;
  // With the work after the barrier shared: let a replica that has finished its compute program
  // and waits for the others at that barrier run its next tasks of that work meanwhile, each as
  // soon as every replica is past the last op of the compute program that touches what the
  // task touches (its gradient, its parameter, the parameter's moments), instead of idling
  // until the slowest is done. The same reductions and ops, on the same values; false: every
  // task waits for the barrier.
  bool early_barrier_work = true;
  // How long a replica waiting for another (for work, for the others to finish the compute
  // program or a phase) polls before it sleeps; it stops polling at once when it finds it was
  // preempted (spin_wait.h). 0: sleep at once. fleet.data_parallel sets it from the environment
  // variable FLEET_DP_SPIN_US.
  int spin_before_sleep_us = 50;
};

// The update part of a step: update[p][r] is what replica r runs in phase p (null: nothing).
using UpdatePhases = std::vector<std::vector<const framework::PreparedProgram*>>;

class DataParallelEngine {
 public:
  // Binds the programs in one child scope of `root` per replica: every persistable variable
  // must already be in `root` (run the startup program first), else NotFound names it.
  // `executor`, the programs and `root` must outlive the engine.
  DataParallelEngine(const framework::Executor* executor, const framework::PreparedProgram* compute,
                     UpdatePhases update, Scope* root, DataParallelOptions options);
  ~DataParallelEngine();
  DataParallelEngine(const DataParallelEngine&) = delete;
  DataParallelEngine& operator=(const DataParallelEngine&) = delete;

  int replicas() const { return options_.replicas; }
  // Steps whose reduction overlapped the compute program (see step 2 above).
  int64_t overlapped_steps() const { return overlapped_steps_; }
  // Reductions of the backward pass a replica keeps until after its barrier, every overlapped
  // step, to even out the work after it (PlanDeferredReductions); 0 before the first one.
  int64_t deferred_reductions() const;
  // Whether the work after an overlapped step's barrier is shared (share_barrier_work and a
  // plan it applies to), and the tasks of it a replica ran for another since the engine was
  // made. Read between steps.
  bool shares_barrier_work() const { return share_barrier_work_; }
  int64_t shared_barrier_tasks() const { return shared_tasks_.load(std::memory_order_relaxed); }
  // Tasks of that work a replica ran while it waited at the barrier (early_barrier_work) since
  // the engine was made. Read between steps.
  int64_t early_barrier_tasks() const { return early_tasks_.load(std::memory_order_relaxed); }
  // The replicas' waits whose poll gave up since the engine was made. Read between steps.
  DataParallelWaits polls_given_up() const {
    return {pool_.polls_given_up_for_work(), pool_.polls_given_up_for_workers(),
            compute_polls_given_up_.load(std::memory_order_relaxed)};
  }

  // Runs one step. feeds[r][i] is the value of input_names[i] for replica r; each share is moved
  // into its replica's scope (a caller that keeps its tensors passes a copy, which shares their
  // memory; one that passes them with std::move saves the copy and the release of its tensors
  // between steps); replicas r >= feeds.size() have no share this step: they skip the
  // compute program and the reduction, and still run their update ops. Returns, for each
  // replica with a share, copies of the fetch variables after the step. `stats` may be null.
  std::vector<std::vector<LoDTensor>> Step(const std::vector<std::string>& input_names,
                                           std::vector<std::vector<LoDTensor>> feeds,
                                           const std::vector<std::string>& fetch_names,
                                           framework::RunStats* stats);

 private:
  struct Replica;
  void RunPhase(size_t phase);
  void RunUpdate(size_t phase, int replica);
  void Compute(Replica* replica, const std::vector<std::string>& input_names,
               std::vector<LoDTensor>* feed);
  // The reduction of a step that did not overlap it, after the compute program, and with it
  // the update phase `phase` when the plan is owner_local; returns the next phase to run.
  size_t RunPlainReduction(const ReducePlan& plan, size_t phase);
  // Replica r's compute program by segments, reducing the gradients it owns as every replica
  // passes them, then the rest once every replica has finished. Returns false, having stopped,
  // when another replica failed (its error is the step's).
  bool ComputeAndReduce(int r, const std::vector<std::string>& input_names,
                        std::vector<LoDTensor>* feed, float scale);
  // Reduces replica r's gradients owned_[r][next, limit) that every replica is done with after
  // `segments` segments; returns the index of the first one left.
  size_t ReduceFinished(int r, size_t next, size_t limit, size_t segments, float scale);
  // Elements of gradient i one replica reduces and updates (see PlanDeferredReductions).
  int64_t ShareElements(size_t i) const;
  // Sets defer_from_ from the gradients' sizes (known after the first, plain, step).
  void PlanDeferredReductions();
  size_t SegmentsEveryReplicaRan() const;
  // Cuts each replica's part of update phase `phase` into the tasks of barrier_tasks_
  // (share_barrier_work_ stays false when a group of its ops reads several of its gradients, or one
  // it does not reduce itself: a task would then wait on another's reduction).
  void PlanBarrierTasks(size_t phase);
  // Replica r's work after the barrier, shared: its own tasks first, then the others' that no
  // replica has started.
  void RunBarrierTasks(int r, float scale);
  // Runs task t of replica `owner`'s barrier tasks on replica r's thread.
  void RunBarrierTask(int r, int owner, size_t t, float scale);
  // Replica r, done with its compute program, claims and runs its own next barrier task if every
  // replica is past what it touches; returns whether it ran one.
  bool RunReadyBarrierTask(int r, float scale);
  bool NextBarrierTaskReady(int r) const;
  // Blocks until every replica has run every segment (true) or one failed (false); replica r
  // runs its ready barrier tasks meanwhile when early_barrier_work_.
  bool AwaitCompute(int r, float scale);

  const framework::Executor* executor_;
  const framework::PreparedProgram* compute_;
  UpdatePhases update_;
  DataParallelOptions options_;
  Scope* engine_scope_ = nullptr;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<GradientSlot> gradients_;
  ComputeSegments segments_;
  std::vector<std::vector<size_t>> owned_;  // per replica: its gradients by final segment
  // Per replica: owned_[r][defer_from_[r]..] wait for the barrier after the compute program
  // even when every replica is past them earlier (see PlanDeferredReductions); empty: not
  // planned yet.
  std::vector<size_t> defer_from_;
  std::vector<int> all_replicas_;  // the sources of an overlapped step
  // Per replica: the tasks after an overlapped step's barrier, in order, when share_barrier_work_:
  // the reduction of owned_[r][gradient] (unless it ran before the barrier; -1: none) and then the
  // groups of its update ops (indices into Replica::barrier_groups) that read that gradient.
  struct BarrierTask {
    int gradient = -1;
    std::vector<size_t> groups;
    // Segments every replica must have run before the task may run ahead of the barrier: past
    // the last access of its gradient and of every variable its groups touch.
    size_t ready_after_segments = 0;
  };
  std::vector<std::vector<BarrierTask>> barrier_tasks_;
  std::vector<std::unique_ptr<framework::PreparedProgram>> barrier_programs_;  // the groups' ops
  bool share_barrier_work_ = false;
  std::atomic<int64_t> shared_tasks_{0};
  bool early_barrier_work_ = false;  // options_.early_barrier_work and share_barrier_work_
  std::atomic<int64_t> early_tasks_{0};
  bool overlap_next_ = false;  // the last plain step was owner_local with every replica active
  int64_t overlapped_steps_ = 0;
  // Published segment counts: stores of the last segment and of a failure are made under the
  // mutex, so that AwaitCompute may sleep on them; the others are read lock-free.
  absl::Mutex progress_mu_;
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> compute_polls_given_up_{0};  // AwaitCompute's
  ReplicaPool pool_;
  int64_t steps_ = 0;
  bool profile_ = false;  // time ops per role in this step
};

}  // namespace fleet::trainer
