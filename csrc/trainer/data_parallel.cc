#include "trainer/data_parallel.h"

#include <algorithm>
#include <chrono>

#include "operators/blas.h"
#include "trainer/barrier_tasks.h"
#include "trainer/spin_wait.h"

namespace fleet::trainer {

struct DataParallelEngine::Replica {
  Scope* scope = nullptr;
  framework::BoundProgram compute;
  std::vector<framework::BoundProgram> segments;  // compute, cut (overlapped steps)
  std::vector<framework::BoundProgram> update;    // per phase; program null = nothing to run
  framework::RunState run_state;
  framework::RunStats stats;
  // Segments of this step's compute program run so far (overlapped steps), on a line of its
  // own: the other replicas poll it.
  alignas(64) std::atomic<size_t> progress{0};
  // Of this step's owned gradients, how many it reduced before the barrier (written before its
  // last progress store, read by the others after they saw it).
  std::atomic<size_t> reduced_before_barrier{0};
  // Its part of the first update phase after the compute program, cut into groups
  // (PlanBarrierTasks), bound to its scope; and the next of its tasks not claimed yet, which
  // any replica may claim.
  std::vector<framework::BoundProgram> barrier_groups;
  alignas(64) std::atomic<size_t> next_barrier_task{0};
};

DataParallelEngine::DataParallelEngine(const framework::Executor* executor,
                                       const framework::PreparedProgram* compute,
                                       UpdatePhases update, Scope* root,
                                       DataParallelOptions options)
    : executor_(executor),
      compute_(compute),
      update_(std::move(update)),
      options_(std::move(options)),
      pool_(options_.replicas, std::chrono::microseconds{options_.spin_before_sleep_us}) {
  FLEET_ENFORCE(options_.spin_before_sleep_us >= 0, InvalidArgument,
                "data parallelism: spin_before_sleep_us must be at least 0, got ",
                options_.spin_before_sleep_us);
  FLEET_ENFORCE(
      options_.prelude_phases >= 0 && options_.prelude_phases <= static_cast<int>(update_.size()),
      InvalidArgument, "data parallelism: ", options_.prelude_phases, " prelude phases of ",
      update_.size());
  FLEET_ENFORCE(options_.gradients.size() == options_.gradient_owners.size(), InvalidArgument,
                "data parallelism: ", options_.gradients.size(), " gradients but ",
                options_.gradient_owners.size(), " owners");
  FLEET_ENFORCE(options_.gradient_row_parts.empty() ||
                    options_.gradient_row_parts.size() == options_.gradients.size(),
                InvalidArgument, "data parallelism: ", options_.gradients.size(), " gradients but ",
                options_.gradient_row_parts.size(), " row parts");
  for (const auto& phase : update_) {
    FLEET_ENFORCE(static_cast<int>(phase.size()) == options_.replicas, InvalidArgument,
                  "data parallelism: an update phase has programs for ", phase.size(),
                  " replicas, expected ", options_.replicas);
  }
  const bool products = !options_.gradient_product_x.empty();
  FLEET_ENFORCE(!products || (options_.gradient_product_x.size() == options_.gradients.size() &&
                              options_.gradient_product_dout.size() == options_.gradients.size() &&
                              options_.gradient_row_parts.size() == options_.gradients.size()),
                InvalidArgument, "data parallelism: ", options_.gradients.size(), " gradients but ",
                options_.gradient_product_x.size(), " product inputs, ",
                options_.gradient_product_dout.size(), " product output gradients and ",
                options_.gradient_row_parts.size(), " row parts");
  const auto kFail = framework::Executor::MissingPersistable::kFail;
  // A product's block can be computed once no op writes its dOut or X: after dOut's last
  // access (the plan checks that X is not written after it).
  std::vector<std::string> cut_after = options_.gradients;
  for (size_t i = 0; products && i < cut_after.size(); ++i) {
    if (!options_.gradient_product_dout[i].empty())
      cut_after[i] = options_.gradient_product_dout[i];
  }
  segments_ = CutAfterLastAccess(*compute_, cut_after);
  engine_scope_ = root->NewScope();
  for (int r = 0; r < options_.replicas; ++r) {
    auto replica = std::make_unique<Replica>();
    replica->scope = engine_scope_->NewScope();
    replica->compute = executor_->Bind(*compute_, replica->scope, kFail);
    for (const auto& segment : segments_.segments) {
      replica->segments.push_back(executor_->Bind(*segment, replica->scope, kFail));
    }
    for (const auto& phase : update_) {
      replica->update.push_back(phase[r] ? executor_->Bind(*phase[r], replica->scope, kFail)
                                         : framework::BoundProgram{});
    }
    replica->run_state.rng.seed(options_.seed + static_cast<uint64_t>(r));
    replica->run_state.thread = r;
    replicas_.push_back(std::move(replica));
  }
  for (size_t i = 0; i < options_.gradients.size(); ++i) {
    GradientSlot slot;
    slot.name = options_.gradients[i];
    const int owner = options_.gradient_owners[i];
    FLEET_ENFORCE(owner >= -1 && owner < options_.replicas, InvalidArgument,
                  "data parallelism: gradient '", slot.name, "' is owned by replica ", owner,
                  ", outside [0, ", options_.replicas, ") (or -1: every replica)");
    slot.owner = owner < 0 ? 0 : owner;
    slot.everywhere = owner < 0;
    for (auto& replica : replicas_) {
      Variable* v = replica->scope->FindLocalVar(slot.name);
      FLEET_ENFORCE(v != nullptr, NotFound, "data parallelism: gradient '", slot.name,
                    "' is not a variable of the replica's program (persistable gradients cannot "
                    "be reduced)");
      slot.replica.push_back(v);
    }
    const std::string part =
        options_.gradient_row_parts.empty() ? "" : options_.gradient_row_parts[i];
    for (auto& replica : replicas_) {
      if (part.empty()) break;
      Variable* v = replica->scope->FindLocalVar(part);
      FLEET_ENFORCE(v != nullptr, NotFound, "data parallelism: '", part,
                    "', the share of the rows of gradient '", slot.name,
                    "' a replica updates, is not a variable of the replica's update program");
      slot.row_part.push_back(v);
    }
    const std::string x = products ? options_.gradient_product_x[i] : "";
    if (!x.empty()) {
      FLEET_ENFORCE(!part.empty(), InvalidArgument, "data parallelism: weight gradient '",
                    slot.name, "' is computed by the replicas from '", x,
                    "' but is not split by rows");
      const std::string& dout = options_.gradient_product_dout[i];
      auto operand = [&](Replica& replica, const std::string& name) {
        Variable* v = replica.scope->FindLocalVar(name);
        FLEET_ENFORCE(v != nullptr, NotFound, "data parallelism: '", name,
                      "', an operand of weight gradient '", slot.name,
                      "', is not a variable of the replica's program");
        return v;
      };
      for (auto& replica : replicas_) {
        slot.product_x.push_back(operand(*replica, x));
        slot.product_dout.push_back(operand(*replica, dout));
      }
    }
    gradients_.push_back(std::move(slot));
  }
  owned_.resize(static_cast<size_t>(options_.replicas));
  for (size_t i = 0; i < gradients_.size(); ++i) {
    if (!gradients_[i].row_part.empty()) {
      for (auto& mine : owned_) mine.push_back(i);  // every replica reduces its share
    } else if (!gradients_[i].everywhere) {
      owned_[static_cast<size_t>(gradients_[i].owner)].push_back(i);
    }
  }
  for (auto& mine : owned_) {
    std::stable_sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
      return segments_.final_after[a] < segments_.final_after[b];
    });
  }
  for (int r = 0; r < options_.replicas; ++r) all_replicas_.push_back(r);
  const size_t first_update = static_cast<size_t>(options_.prelude_phases);
  if (options_.share_barrier_work && first_update < update_.size()) PlanBarrierTasks(first_update);
}

void DataParallelEngine::PlanBarrierTasks(size_t phase) {
  const auto kFail = framework::Executor::MissingPersistable::kFail;
  // Gradient i's variables as an update op names them: the gradient and its share of rows.
  auto reads = [&](const framework::PreparedProgram& group, size_t i) {
    const bool part = !options_.gradient_row_parts.empty() &&
                      !options_.gradient_row_parts[i].empty() &&
                      Touches(group, options_.gradient_row_parts[i]);
    return part || Touches(group, gradients_[i].name);
  };
  std::vector<std::vector<BarrierTask>> tasks(replicas_.size());
  std::vector<std::vector<std::unique_ptr<framework::PreparedProgram>>> groups(replicas_.size());
  for (size_t r = 0; r < replicas_.size(); ++r) {
    const auto& mine = owned_[r];
    for (size_t k = 0; k < mine.size(); ++k) tasks[r].push_back({static_cast<int>(k), {}});
    if (update_[phase][r] != nullptr) groups[r] = CutIntoIndependentGroups(*update_[phase][r]);
    for (size_t g = 0; g < groups[r].size(); ++g) {
      int attached = -1;
      for (size_t i = 0; i < gradients_.size(); ++i) {
        if (!reads(*groups[r][g], i)) continue;
        auto at = std::find(mine.begin(), mine.end(), i);
        if (at == mine.end() || attached >= 0) return;  // another's, or a second: not shared
        attached = static_cast<int>(at - mine.begin());
      }
      if (attached >= 0) {
        tasks[r][static_cast<size_t>(attached)].groups.push_back(g);
      } else {
        tasks[r].push_back({-1, {g}});
      }
    }
  }
  // Before the barrier a task may run once every replica has run the segment of the last
  // compute op touching any variable it touches: no replica's compute program then reads the
  // parameter it writes, or writes what it reads (the learning rate, the gradient).
  const auto through = SegmentsThroughLastAccess(segments_.segments);
  for (size_t r = 0; r < replicas_.size(); ++r) {
    for (BarrierTask& task : tasks[r]) {
      size_t need = 0;
      if (task.gradient >= 0) {  // its reduction reads every replica's gradient
        need = segments_.final_after[owned_[r][static_cast<size_t>(task.gradient)]] + 1;
      }
      for (size_t g : task.groups) {
        need = std::max(need, SegmentsBeforeGroup(*groups[r][g], through));
      }
      task.ready_after_segments = need;
    }
  }
  for (size_t r = 0; r < replicas_.size(); ++r) {
    for (auto& group : groups[r]) {
      replicas_[r]->barrier_groups.push_back(executor_->Bind(*group, replicas_[r]->scope, kFail));
      barrier_programs_.push_back(std::move(group));
    }
  }
  barrier_tasks_ = std::move(tasks);
  share_barrier_work_ = true;
  early_barrier_work_ = options_.early_barrier_work;
}

DataParallelEngine::~DataParallelEngine() {
  replicas_.clear();
  if (engine_scope_) engine_scope_->DropKids();
}

namespace {

// Moves a replica's share into its scope (memory, shape and lod), leaving empty tensors behind:
// the share's metadata then dies with the scope's next value, on the replica's own thread,
// instead of with the caller's copy on the thread that runs the step between two steps.
void SetFeed(Scope* scope, const std::vector<std::string>& input_names,
             std::vector<LoDTensor>* feed) {
  FLEET_ENFORCE(feed->size() == input_names.size(), InvalidArgument,
                "data parallelism: ", feed->size(), " values for ", input_names.size(), " inputs");
  for (size_t i = 0; i < feed->size(); ++i) {
    *scope->Var(input_names[i])->GetMutable<LoDTensor>() = std::move((*feed)[i]);
  }
}

}  // namespace

void DataParallelEngine::Compute(Replica* replica, const std::vector<std::string>& input_names,
                                 std::vector<LoDTensor>* feed) {
  SetFeed(replica->scope, input_names, feed);
  executor_->Run(replica->compute, &replica->run_state, profile_ ? &replica->stats : nullptr);
}

size_t DataParallelEngine::SegmentsEveryReplicaRan() const {
  size_t least = segments_.segments.size();
  for (const auto& replica : replicas_) {
    least = std::min(least, replica->progress.load(std::memory_order_acquire));
  }
  return least;
}

size_t DataParallelEngine::ReduceFinished(int r, size_t next, size_t limit, size_t segments,
                                          float scale) {
  const auto& mine = owned_[static_cast<size_t>(r)];
  for (; next < limit && segments_.final_after[mine[next]] < segments; ++next) {
    ReduceGradient(gradients_[mine[next]], all_replicas_, options_.replicas, scale,
                   options_.all_reduce, r);
  }
  return next;
}

int64_t DataParallelEngine::ShareElements(size_t i) const {
  const GradientSlot& g = gradients_[i];
  const Variable* v = g.replica[static_cast<size_t>(g.owner)];
  if (v->IsType<LoDTensor>()) {
    const int64_t n = v->Get<LoDTensor>().numel();
    return g.row_part.empty() ? n : n / options_.replicas;
  }
  // A sparse gradient split by rows gives every replica a share of its rows, alike as far as
  // the plan can tell; one kept whole costs its owner the rows of this step.
  if (!g.row_part.empty() || !v->IsType<SelectedRows>()) return 0;
  return v->Get<SelectedRows>().value().numel();
}

// After the barrier that ends the compute program every replica reduces the gradients the last
// segment finishes (the first layer's) and updates its parameters; before it, the others,
// interleaved with its backward pass. Where the replicas' work after the barrier is unequal
// (the MLP: the owner of the first layer's weights reduces them there while the other replica
// waits at the join), a replica with less of it there keeps its last reductions of the
// backward pass until after the barrier, as far as that fills its share up to the largest: its
// backward pass ends sooner, the work after the barrier is even, and the step does the same
// work, in the same sums. Counted in elements (a reduction and an update each read every
// element of the gradient once).
void DataParallelEngine::PlanDeferredReductions() {
  const size_t last = segments_.segments.size() - 1;
  std::vector<int64_t> after(owned_.size(), 0);  // per replica: its work after the barrier
  for (size_t r = 0; r < owned_.size(); ++r) {
    for (size_t i : owned_[r]) {
      const int64_t n = ShareElements(i);
      after[r] += segments_.final_after[i] == last ? 2 * n : n;  // reduce and update, or update
    }
  }
  const int64_t most = *std::max_element(after.begin(), after.end());
  defer_from_.assign(owned_.size(), 0);
  for (size_t r = 0; r < owned_.size(); ++r) {
    const auto& mine = owned_[r];
    size_t from = mine.size();
    while (from > 0 && segments_.final_after[mine[from - 1]] == last) --from;  // there anyway
    while (options_.even_barrier_work && from > 0 &&
           after[r] + ShareElements(mine[from - 1]) <= most) {
      after[r] += ShareElements(mine[from - 1]);
      --from;
    }
    defer_from_[r] = from;
  }
}

int64_t DataParallelEngine::deferred_reductions() const {
  int64_t n = 0;
  const size_t last = segments_.segments.size() - 1;
  for (size_t r = 0; r < defer_from_.size(); ++r) {
    for (size_t k = defer_from_[r]; k < owned_[r].size(); ++k) {
      n += segments_.final_after[owned_[r][k]] != last;
    }
  }
  return n;
}

bool DataParallelEngine::NextBarrierTaskReady(int r) const {
  const auto& tasks = barrier_tasks_[static_cast<size_t>(r)];
  const size_t t =
      replicas_[static_cast<size_t>(r)]->next_barrier_task.load(std::memory_order_relaxed);
  return t < tasks.size() && tasks[t].ready_after_segments <= SegmentsEveryReplicaRan();
}

bool DataParallelEngine::RunReadyBarrierTask(int r, float scale) {
  if (!NextBarrierTaskReady(r)) return false;
  auto& next = replicas_[static_cast<size_t>(r)]->next_barrier_task;
  size_t t = next.load(std::memory_order_relaxed);
  // Before the barrier only this replica claims its tasks; past it another may have claimed
  // this one, and then the step is at its shared part anyway.
  if (!next.compare_exchange_strong(t, t + 1, std::memory_order_relaxed)) return false;
  RunBarrierTask(r, r, t, scale);
  early_tasks_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool DataParallelEngine::AwaitCompute(int r, float scale) {
  const size_t all = segments_.segments.size();
  auto done = [&] { return failed_.load() || SegmentsEveryReplicaRan() == all; };
  const std::chrono::microseconds budget{options_.spin_before_sleep_us};
  bool poll = true;
  // The wait for the slowest replica, filled with this replica's tasks as they become ready;
  // when none is and the poll for one gives up, it sleeps until every replica is done.
  while (early_barrier_work_ && !done()) {
    if (RunReadyBarrierTask(r, scale)) continue;
    if (!SpinWait([&] { return done() || NextBarrierTaskReady(r); }, budget)) {
      poll = false;
      break;
    }
  }
  if (!(poll ? SpinWait(done, budget) : done())) {
    compute_polls_given_up_.fetch_add(1, std::memory_order_relaxed);
    absl::MutexLock lock(&progress_mu_);
    progress_mu_.Await(absl::Condition(&done));
  }
  return !failed_.load();
}

bool DataParallelEngine::ComputeAndReduce(int r, const std::vector<std::string>& input_names,
                                          std::vector<LoDTensor>* feed, float scale) {
  Replica* replica = replicas_[static_cast<size_t>(r)].get();
  try {
    SetFeed(replica->scope, input_names, feed);
    const size_t all = replica->segments.size();
    size_t next = 0;  // the first of this replica's gradients not reduced yet
    const size_t before_barrier = defer_from_[static_cast<size_t>(r)];
    for (size_t s = 0; s < all; ++s) {
      if (failed_.load(std::memory_order_relaxed)) return false;
      executor_->Run(replica->segments[s], &replica->run_state,
                     profile_ ? &replica->stats : nullptr);
      if (s + 1 < all) {
        replica->progress.store(s + 1, std::memory_order_release);
        next = ReduceFinished(r, next, before_barrier, SegmentsEveryReplicaRan(), scale);
      } else {
        replica->reduced_before_barrier.store(next, std::memory_order_relaxed);
        absl::MutexLock lock(&progress_mu_);  // AwaitCompute may sleep on it
        replica->progress.store(all, std::memory_order_release);
      }
    }
    if (!AwaitCompute(r, scale)) return false;
    if (share_barrier_work_) {
      RunBarrierTasks(r, scale);
    } else {
      ReduceFinished(r, next, owned_[static_cast<size_t>(r)].size(), all, scale);
    }
    return true;
  } catch (...) {
    absl::MutexLock lock(&progress_mu_);
    failed_.store(true);
    throw;
  }
}

void DataParallelEngine::RunBarrierTasks(int r, float scale) {
  for (int k = 0; k < options_.replicas; ++k) {
    const int owner = (r + k) % options_.replicas;
    Replica* from = replicas_[static_cast<size_t>(owner)].get();
    const auto& tasks = barrier_tasks_[static_cast<size_t>(owner)];
    for (size_t t = from->next_barrier_task.fetch_add(1, std::memory_order_relaxed);
         t < tasks.size(); t = from->next_barrier_task.fetch_add(1, std::memory_order_relaxed)) {
      RunBarrierTask(r, owner, t, scale);
      if (owner != r) shared_tasks_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void DataParallelEngine::RunBarrierTask(int r, int owner, size_t t, float scale) {
  Replica* runner = replicas_[static_cast<size_t>(r)].get();
  Replica* from = replicas_[static_cast<size_t>(owner)].get();
  const BarrierTask& task = barrier_tasks_[static_cast<size_t>(owner)][t];
  const size_t reduced = from->reduced_before_barrier.load(std::memory_order_relaxed);
  if (task.gradient >= 0 && static_cast<size_t>(task.gradient) >= reduced) {
    // The owner's share (of a gradient split by rows), whichever thread sums it.
    ReduceGradient(gradients_[owned_[static_cast<size_t>(owner)][task.gradient]], all_replicas_,
                   options_.replicas, scale, options_.all_reduce, owner);
  }
  for (size_t g : task.groups) {
    executor_->Run(from->barrier_groups[g], &runner->run_state,
                   profile_ ? &runner->stats : nullptr);
  }
}

void DataParallelEngine::RunUpdate(size_t phase, int r) {
  Replica* replica = replicas_[r].get();
  if (replica->update[phase].program != nullptr) {
    executor_->Run(replica->update[phase], &replica->run_state,
                   profile_ ? &replica->stats : nullptr);
  }
}

void DataParallelEngine::RunPhase(size_t phase) {
  bool others = false;
  for (size_t r = 1; r < update_[phase].size(); ++r) others = others || update_[phase][r];
  if (!others) {  // replica 0 alone: no need to wake the other threads
    RunUpdate(phase, 0);
    return;
  }
  pool_.Run([&](int r) { RunUpdate(phase, r); });
}

size_t DataParallelEngine::RunPlainReduction(const ReducePlan& plan, size_t phase) {
  if (plan.owner_local && phase < update_.size()) {
    // Each replica reduces the gradients it owns and updates their parameters, in one go.
    pool_.Run([&](int r) {
      RunReduceTasks(plan, r);
      RunUpdate(phase, r);
    });
    return phase + 1;
  }
  if (!plan.tasks.empty()) pool_.Run([&](int r) { RunReduceTasks(plan, r); });
  return phase;
}

std::vector<std::vector<LoDTensor>> DataParallelEngine::Step(
    const std::vector<std::string>& input_names, std::vector<std::vector<LoDTensor>> feeds,
    const std::vector<std::string>& fetch_names, framework::RunStats* stats) {
  const int active = static_cast<int>(feeds.size());
  FLEET_ENFORCE(active >= 1 && active <= options_.replicas, InvalidArgument,
                "data parallelism: a step needs shares for 1 to ", options_.replicas,
                " replicas, got ", active);
  profile_ = stats != nullptr;
  const framework::RuntimeResources* resources = executor_->resources().get();
  Scope* hook_scope = replicas_[0]->scope;
  framework::StepInfo info{0, 1, steps_, hook_scope};
  int saved_blas_threads = operators::blas::GetNumThreads();
  operators::blas::SetNumThreads(1);  // the replicas already keep the cores busy
  std::vector<std::vector<LoDTensor>> fetched(static_cast<size_t>(active));
  framework::RunPassBegin(resources, framework::PassInfo{1, /*dataset_pass=*/false});
  try {
    framework::RunBeforeStep(resources, info);
    const size_t prelude = static_cast<size_t>(options_.prelude_phases);
    for (size_t p = 0; p < prelude; ++p) RunPhase(p);
    const float scale = options_.gradient_scale > 0 ? options_.gradient_scale : 1.0f / active;
    size_t next_phase = prelude;
    if (overlap_next_ && active == options_.replicas) {
      if (defer_from_.empty()) PlanDeferredReductions();
      for (auto& replica : replicas_) {
        replica->progress.store(0);
        replica->next_barrier_task.store(0);
      }
      failed_.store(false);
      const bool update = next_phase < update_.size();
      pool_.Run([&](int r) {
        // Shared: the update phase is part of the tasks after the barrier.
        if (ComputeAndReduce(r, input_names, &feeds[r], scale) && update && !share_barrier_work_) {
          RunUpdate(next_phase, r);
        }
      });
      if (update) ++next_phase;
      ++overlapped_steps_;
    } else {
      pool_.Run([&](int r) {
        if (r < active) Compute(replicas_[r].get(), input_names, &feeds[r]);
      });
      std::vector<int> sources;
      for (int r = 0; r < active; ++r) sources.push_back(r);
      ReducePlan plan = PlanReduction(gradients_, std::move(sources), options_.replicas, scale,
                                      options_.all_reduce);
      overlap_next_ = options_.overlap_reduction && plan.owner_local && active == options_.replicas;
      next_phase = RunPlainReduction(plan, next_phase);
    }
    for (size_t p = next_phase; p < update_.size(); ++p) RunPhase(p);
    framework::RunAfterStep(resources, info);
    framework::RunThreadEnd(resources, 0);
    for (int r = 0; r < active; ++r) {
      for (const auto& name : fetch_names) {
        const Variable* v = replicas_[r]->scope->FindVar(name);
        FLEET_ENFORCE(v != nullptr && v->IsType<LoDTensor>(), InvalidArgument, "fetch '", name,
                      "' holds ", v ? v->KindName() : "nothing", " in replica ", r,
                      "; only LoDTensor variables can be fetched");
        const LoDTensor& t = v->Get<LoDTensor>();
        LoDTensor copy;
        if (t.initialized()) copy.CopyFrom(t);
        copy.set_lod(t.lod());
        fetched[r].push_back(std::move(copy));
      }
    }
  } catch (...) {
    operators::blas::SetNumThreads(saved_blas_threads);
    try {
      framework::RunPassEnd(resources);
    } catch (...) {  // the step's error is the one to report
    }
    throw;
  }
  operators::blas::SetNumThreads(saved_blas_threads);
  framework::RunPassEnd(resources);
  ++steps_;
  if (stats) {
    for (auto& replica : replicas_) {
      for (size_t i = 0; i < stats->nanos_by_role.size(); ++i) {
        stats->nanos_by_role[i] += replica->stats.nanos_by_role[i];
      }
      replica->stats = framework::RunStats{};
    }
    ++stats->runs;
  }
  return fetched;
}

}  // namespace fleet::trainer
