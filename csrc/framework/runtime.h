#pragma once
// RuntimeResources: the distributed resources of one process (a parameter-server communicator, a
// collective group, ...) that some kernels need, and the per-step hooks those resources register.
//
// Ownership and lifetime: whoever creates a resource (the Python `fleet` facade in init_worker or
// fleet.init(is_collective=True), a test) puts it here as a shared_ptr; an Executor holds the
// RuntimeResources through a shared_ptr too, so a resource lives as long as any executor that can
// run a kernel needing it. There is no process-wide registry: two executors in one process may
// hold different resources (tests run several workers in one process that way).
//
// Thread safety: Set/AddStepHook/Clear are for set-up, between runs. While programs run (one
// Executor.run, or the N threads of a trainer) the object is only read, so Find/Get/step_hooks are
// safe from any thread without a lock. The resources themselves document their own thread safety.
//
// Per-step hooks are how distributed training changes what happens between batches (a sync
// barrier, a GEO push every k steps, a half-async thread barrier, gradient merge) without special
// cases inside the executor or trainer loops. The contract every driver keeps:
//   PrepareThreadScope(t, scope)
//                           dataset passes only, once per trainer thread before its program is
//                           bound in `scope` (and before OnPassBegin): a hook may create variables
//                           there that shadow the root scope's for that thread;
//   OnPassBegin(pass)       once, before any batch: how many threads will run, and whether this
//                           is a pass over a dataset (train_from_dataset) or one Executor.run;
//   BeforeStep / AfterStep  around every batch, on the thread that runs it;
//   OnThreadEnd(t)          when thread t has run its last batch (others may still be running);
//   OnPassEnd()             once, after every thread ended (also after a failure or cancel).
// Executor.run is a pass of one thread and one step: every hook fires once per call.
// A hook that throws fails the step like a kernel would; OnPassEnd is still called.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/errors.h"
#include "core/scope.h"

namespace fleet::framework {

// What a hook learns of the pass it begins.
struct PassInfo {
  // Not an aggregate, so that `PassInfo{threads, dataset_pass}` leaves written_vars unset
  // without a missing-initializer warning at each such call site.
  PassInfo() = default;
  PassInfo(int threads, bool dataset) : num_threads(threads), dataset_pass(dataset) {}

  int num_threads = 1;
  bool dataset_pass = false;  // train_from_dataset (else one Executor.run call)
  // The variables some op of the pass's program writes (its outputs), where the driver lists
  // them (train_from_dataset does): a hook may rely on every other variable being only read by
  // the pass's steps (the async communicator's trainer threads then share one buffer of dense
  // values). Unset: any variable may be written.
  std::optional<std::vector<std::string>> written_vars;
};

// What a hook learns of the step it brackets.
struct StepInfo {
  int thread = 0;          // index of the trainer thread (0 for Executor.run)
  int num_threads = 1;     // threads of the pass
  int64_t step = 0;        // batches this thread has run before this one
  Scope* scope = nullptr;  // the scope the thread runs in (a child of the root scope in a pass)
};

class StepHook {
 public:
  virtual ~StepHook() = default;
  // A dataset pass's trainer thread `thread` will run in `scope`, a child of the root scope: a
  // variable the hook creates there is the thread's own, found before the root's of that name
  // (the async communicator gives each thread a private copy of the dense parameters so). The
  // scope lives until the pass ends; a hook must not keep it longer.
  virtual void PrepareThreadScope(int thread, Scope* scope) {}
  virtual void OnPassBegin(const PassInfo& pass) {}
  // Before each step of a dataset pass (and before BeforeStep): false ends this thread's part of
  // the pass, leaving this batch and the thread's later ones unrun. A hook says so when the
  // processes of a job have agreed that the pass is over (one of them ran out of data). Every
  // hook is asked, whatever the others answer.
  virtual bool AdmitStep(const StepInfo& info) { return true; }
  virtual void BeforeStep(const StepInfo& info) {}
  virtual void AfterStep(const StepInfo& info) {}
  // A dataset pass announces a thread's next batch while the current one runs: `next.scope`
  // holds the next batch's input variables (only those), `next.step` is its step number. A hook
  // may start work for it (a prefetch) but must not keep the scope past the next BeforeStep.
  virtual void OnBatchAhead(const StepInfo& next) {}
  // How many batches ahead of the running one the hook wants announced. A dataset pass holds
  // the largest wish of its hooks in batches taken from the feed and announces each batch once,
  // when it takes it, `distance` batches ahead, to the hooks that want at least that distance;
  // so a hook that wants 1 sees only the next batch (or none, when a deeper hook's look-ahead
  // took it earlier).
  virtual int BatchesAhead() const { return 1; }
  virtual void OnThreadEnd(int thread) {}
  virtual void OnPassEnd() {}
  // For error messages.
  virtual std::string Name() const = 0;
};

class RuntimeResources {
 public:
  // Stores `resource` as the process's T, replacing any previous one.
  template <class T>
  void Set(std::shared_ptr<T> resource) {
    items_[std::type_index(typeid(T))] = std::move(resource);
  }
  template <class T>
  void Remove() {
    items_.erase(std::type_index(typeid(T)));
  }
  // The T set here, or nullptr.
  template <class T>
  T* Find() const {
    auto it = items_.find(std::type_index(typeid(T)));
    return it == items_.end() ? nullptr : static_cast<T*>(it->second.get());
  }
  // The T set here; Unavailable naming `user` (an op, say) and `how_to_set` when there is none.
  template <class T>
  T& Get(const std::string& user, const char* how_to_set) const {
    T* found = Find<T>();
    FLEET_ENFORCE(found != nullptr, Unavailable, user, " needs a ", T::kResourceName,
                  ", which this executor does not have: ", how_to_set);
    return *found;
  }

  void AddStepHook(std::shared_ptr<StepHook> hook) { hooks_.push_back(std::move(hook)); }
  void RemoveStepHook(const StepHook* hook);
  const std::vector<std::shared_ptr<StepHook>>& step_hooks() const { return hooks_; }

  void Clear() {
    items_.clear();
    hooks_.clear();
  }

 private:
  absl::flat_hash_map<std::type_index, std::shared_ptr<void>> items_;
  std::vector<std::shared_ptr<StepHook>> hooks_;
};

// Calls every hook's method in registration order; for drivers.
void RunPrepareThreadScope(const RuntimeResources* resources, int thread, Scope* scope);
void RunPassBegin(const RuntimeResources* resources, const PassInfo& pass);
bool RunAdmitStep(const RuntimeResources* resources, const StepInfo& info);
void RunBeforeStep(const RuntimeResources* resources, const StepInfo& info);
void RunAfterStep(const RuntimeResources* resources, const StepInfo& info);
// To the hooks whose BatchesAhead() is at least `distance`.
void RunBatchAhead(const RuntimeResources* resources, const StepInfo& next, int distance = 1);
// The largest BatchesAhead() of the hooks (1 without any).
int MaxBatchesAhead(const RuntimeResources* resources);
void RunThreadEnd(const RuntimeResources* resources, int thread);
// Calls every hook even when one throws, then rethrows the first error.
void RunPassEnd(const RuntimeResources* resources);

}  // namespace fleet::framework
