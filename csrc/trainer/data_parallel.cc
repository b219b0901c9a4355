#include "trainer/data_parallel.h"

#include "operators/blas.h"

namespace fleet::trainer {

struct DataParallelEngine::Replica {
  Scope* scope = nullptr;
  framework::BoundProgram compute;
  std::vector<framework::BoundProgram> update;  // per phase; program null = nothing to run
  framework::RunState run_state;
  framework::RunStats stats;
};

DataParallelEngine::DataParallelEngine(const framework::Executor* executor,
                                       const framework::PreparedProgram* compute,
                                       UpdatePhases update, Scope* root,
                                       DataParallelOptions options)
    : executor_(executor),
      compute_(compute),
      update_(std::move(update)),
      options_(std::move(options)),
      pool_(options_.replicas) {
  FLEET_ENFORCE(
      options_.prelude_phases >= 0 && options_.prelude_phases <= static_cast<int>(update_.size()),
      InvalidArgument, "data parallelism: ", options_.prelude_phases, " prelude phases of ",
      update_.size());
  FLEET_ENFORCE(options_.gradients.size() == options_.gradient_owners.size(), InvalidArgument,
                "data parallelism: ", options_.gradients.size(), " gradients but ",
                options_.gradient_owners.size(), " owners");
  for (const auto& phase : update_) {
    FLEET_ENFORCE(static_cast<int>(phase.size()) == options_.replicas, InvalidArgument,
                  "data parallelism: an update phase has programs for ", phase.size(),
                  " replicas, expected ", options_.replicas);
  }
  const auto kFail = framework::Executor::MissingPersistable::kFail;
  engine_scope_ = root->NewScope();
  for (int r = 0; r < options_.replicas; ++r) {
    auto replica = std::make_unique<Replica>();
    replica->scope = engine_scope_->NewScope();
    replica->compute = executor_->Bind(*compute_, replica->scope, kFail);
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
    gradients_.push_back(std::move(slot));
  }
}

DataParallelEngine::~DataParallelEngine() {
  replicas_.clear();
  if (engine_scope_) engine_scope_->DropKids();
}

void DataParallelEngine::Compute(Replica* replica, const std::vector<std::string>& input_names,
                                 const std::vector<LoDTensor>& feed) {
  FLEET_ENFORCE(feed.size() == input_names.size(), InvalidArgument,
                "data parallelism: ", feed.size(), " values for ", input_names.size(), " inputs");
  for (size_t i = 0; i < feed.size(); ++i) {
    *replica->scope->Var(input_names[i])->GetMutable<LoDTensor>() = feed[i];
  }
  executor_->Run(replica->compute, &replica->run_state, profile_ ? &replica->stats : nullptr);
}

void DataParallelEngine::RunUpdate(size_t phase, int r) {
  Replica* replica = replicas_[r].get();
  if (replica->update[phase].program != nullptr) {
    executor_->Run(replica->update[phase], &replica->run_state,
                   profile_ ? &replica->stats : nullptr);
  }
}

void DataParallelEngine::RunPhase(size_t phase) {
  pool_.Run([&](int r) { RunUpdate(phase, r); });
}

std::vector<std::vector<LoDTensor>> DataParallelEngine::Step(
    const std::vector<std::string>& input_names, const std::vector<std::vector<LoDTensor>>& feeds,
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
    pool_.Run([&](int r) {
      if (r < active) Compute(replicas_[r].get(), input_names, feeds[r]);
    });
    std::vector<int> sources;
    for (int r = 0; r < active; ++r) sources.push_back(r);
    float scale = options_.gradient_scale > 0 ? options_.gradient_scale : 1.0f / active;
    ReducePlan plan = PlanReduction(gradients_, std::move(sources), options_.replicas, scale,
                                    options_.all_reduce);
    size_t next_phase = prelude;
    if (plan.owner_local && next_phase < update_.size()) {
      // Each replica reduces the gradients it owns and updates their parameters, in one go.
      pool_.Run([&](int r) {
        RunReduceTasks(plan, r);
        RunUpdate(next_phase, r);
      });
      ++next_phase;
    } else if (!plan.tasks.empty()) {
      pool_.Run([&](int r) { RunReduceTasks(plan, r); });
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
