#include "trainer/multi_trainer.h"

#include <deque>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "operators/blas.h"

namespace fleet::trainer {
namespace {

double SumElements(const LoDTensor& t) {
  return VisitDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    double sum = 0;
    for (int64_t i = 0, n = t.numel(); i < n; ++i) sum += static_cast<double>(p[i]);
    return sum;
  });
}

// Every variable an op of `program` writes, once each: what the pass's hooks may rely on the
// others being only read (framework::PassInfo::written_vars).
std::vector<std::string> WrittenVars(const framework::PreparedProgram& program) {
  absl::flat_hash_set<std::string> seen;
  std::vector<std::string> written;
  for (const framework::PreparedOp& op : program.ops) {
    for (const auto& [slot, names] : op.spec.outputs) {
      for (const std::string& name : names) {
        if (seen.insert(name).second) written.push_back(name);
      }
    }
  }
  return written;
}

// A scalar prints as its value; anything larger as its mean and shape.
std::string FormatValue(const LoDTensor& t) {
  if (!t.initialized()) return "(no value)";
  if (t.numel() == 1) return absl::StrFormat("%.6g", SumElements(t));
  if (t.numel() == 0) return absl::StrCat("(empty ", ShapeToString(t.shape()), ")");
  return absl::StrFormat("mean %.6g of %s", SumElements(t) / static_cast<double>(t.numel()),
                         ShapeToString(t.shape()));
}

}  // namespace

struct MultiTrainer::ThreadState {
  int index = 0;
  Scope* scope = nullptr;
  framework::BoundProgram bound;
  std::vector<Variable*> slot_vars;
  // The next batch's inputs, announced to the hooks while the current batch runs.
  Scope* ahead_scope = nullptr;
  std::vector<Variable*> ahead_slot_vars;
  std::vector<Variable*> fetch_vars;
  std::vector<double> fetch_sums;
  framework::RunState run_state;
  framework::RunStats stats;
  int64_t batches = 0;
};

MultiTrainer::MultiTrainer(const framework::Executor* executor,
                           const framework::PreparedProgram* program, Scope* root,
                           TrainerOptions options)
    : executor_(executor), program_(program), root_(root), options_(std::move(options)) {
  FLEET_ENFORCE(options_.threads > 0, InvalidArgument,
                "train_from_dataset: thread must be positive, got ", options_.threads);
  FLEET_ENFORCE(options_.print_period >= 0, InvalidArgument,
                "train_from_dataset: print_period must not be negative");
  if (options_.fetch_labels.empty()) options_.fetch_labels = options_.fetch_names;
  FLEET_ENFORCE(options_.fetch_labels.size() == options_.fetch_names.size(), InvalidArgument,
                "train_from_dataset: fetch_info has ", options_.fetch_labels.size(), " names for ",
                options_.fetch_names.size(), " fetch variables");
}

MultiTrainer::~MultiTrainer() {
  if (finished_ || dataset_ == nullptr) return;
  Cancel();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  if (source_) {
    try {
      source_->Join();
    } catch (...) {  // the owner did not call Finish(): nobody is left to report to
    }
  }
  operators::blas::SetNumThreads(saved_blas_threads_);
  if (pass_begun_) {
    try {
      framework::RunPassEnd(executor_->resources().get());
    } catch (...) {  // likewise nobody to report to
    }
  }
  if (pass_scope_) pass_scope_->DropKids();
}

void MultiTrainer::Start(Dataset* dataset) {
  FLEET_ENFORCE(dataset_ == nullptr, Internal, "MultiTrainer::Start called twice");
  dataset_ = dataset;
  saved_blas_threads_ = operators::blas::GetNumThreads();
  // One BLAS thread per trainer thread: N trainers already keep N cores busy.
  operators::blas::SetNumThreads(1);
  pass_scope_ = root_->NewScope();
  try {
    const auto& slots = dataset->config().slots;
    for (int t = 0; t < options_.threads; ++t) {
      auto state = std::make_unique<ThreadState>();
      state->index = t;
      state->scope = pass_scope_->NewScope();
      // Before Bind: a hook's variables in the thread's scope are the ones its program uses.
      framework::RunPrepareThreadScope(executor_->resources().get(), t, state->scope);
      state->bound =
          executor_->Bind(*program_, state->scope, framework::Executor::MissingPersistable::kFail);
      for (const auto& slot : slots) {
        Variable* v = state->scope->FindVar(slot.name);
        FLEET_ENFORCE(v != nullptr, NotFound, "dataset variable '", slot.name,
                      "' (set_use_var) is not a variable of the program");
        state->slot_vars.push_back(v);
      }
      state->ahead_scope = pass_scope_->NewScope();
      for (const auto& slot : slots) {
        state->ahead_slot_vars.push_back(state->ahead_scope->Var(slot.name));
      }
      for (const auto& name : options_.fetch_names) {
        Variable* v = state->scope->FindVar(name);
        FLEET_ENFORCE(v != nullptr, NotFound, "fetch variable '", name,
                      "' is not a variable of the program");
        state->fetch_vars.push_back(v);
      }
      state->fetch_sums.assign(options_.fetch_names.size(), 0.0);
      state->run_state.rng.seed(options_.seed + static_cast<uint64_t>(t));
      state->run_state.thread = t;
      states_.push_back(std::move(state));
    }
    size_t capacity = options_.channel_capacity > 0 ? options_.channel_capacity
                                                    : 2 * static_cast<size_t>(options_.threads) + 2;
    channel_ = std::make_unique<Channel<Batch>>(capacity, "train_from_dataset batch channel");
    framework::PassInfo pass;
    pass.num_threads = options_.threads;
    pass.dataset_pass = true;
    pass.written_vars = WrittenVars(*program_);
    framework::RunPassBegin(executor_->resources().get(), pass);
    pass_begun_ = true;
    batches_ahead_ = framework::MaxBatchesAhead(executor_->resources().get());
    source_ = dataset->NewPass();
    source_->Start(channel_.get());
  } catch (...) {
    if (pass_begun_) {
      try {
        framework::RunPassEnd(executor_->resources().get());
      } catch (...) {  // the set-up error is the one to report
      }
    }
    operators::blas::SetNumThreads(saved_blas_threads_);
    pass_scope_->DropKids();
    finished_ = true;
    throw;
  }
  last_fetch_.resize(options_.fetch_names.size());
  start_time_ = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    last_report_time_ = start_time_;
  }
  running_.store(options_.threads);
  for (auto& state : states_) {
    threads_.emplace_back([this, s = state.get()] { TrainLoop(s); });
  }
}

bool MultiTrainer::Wait(absl::Duration timeout) {
  return done_.WaitForNotificationWithTimeout(timeout);
}

void MultiTrainer::Cancel() {
  stop_.store(true);
  if (source_) source_->Cancel();
  if (channel_) channel_->Close();
}

void MultiTrainer::TrainLoop(ThreadState* state) {
  try {
    // Look-ahead: while a batch runs, the batches after it that the channel has ready (never
    // waiting for them) are taken, up to as many as the hooks want (framework::MaxBatchesAhead),
    // and each is announced once, when taken, so that their pulls can start early.
    std::deque<Batch> ahead;
    while (!stop_.load() && !source_->failed()) {
      std::optional<Batch> batch;
      if (ahead.empty()) {
        batch = channel_->Get();
      } else {
        batch = std::move(ahead.front());
        ahead.pop_front();
      }
      if (!batch) break;
      framework::StepInfo info{state->index, options_.threads, state->batches, state->scope};
      if (!framework::RunAdmitStep(executor_->resources().get(), info)) break;
      while (static_cast<int>(ahead.size()) < batches_ahead_) {
        std::optional<Batch> next = channel_->TryGet();
        if (!next) break;
        ahead.push_back(std::move(*next));
        AnnounceNext(state, ahead.back(), static_cast<int>(ahead.size()));
      }
      RunBatch(state, *batch);
    }
  } catch (...) {
    Fail(std::current_exception());
  }
  try {
    framework::RunThreadEnd(executor_->resources().get(), state->index);
  } catch (...) {
    Fail(std::current_exception());
  }
  if (running_.fetch_sub(1) == 1) done_.Notify();
}

void MultiTrainer::RunBatch(ThreadState* state, const Batch& batch) {
  for (size_t i = 0; i < state->slot_vars.size(); ++i) {
    // Shares the batch's memory: the program only reads its inputs.
    *state->slot_vars[i]->GetMutable<LoDTensor>() = batch.tensors[i];
  }
  const framework::RuntimeResources* resources = executor_->resources().get();
  framework::StepInfo info{state->index, options_.threads, state->batches, state->scope};
  framework::RunBeforeStep(resources, info);
  executor_->Run(state->bound, &state->run_state, options_.debug ? &state->stats : nullptr);
  framework::RunAfterStep(resources, info);
  ++state->batches;
  if (!state->fetch_vars.empty()) CollectFetches(state);
  samples_.fetch_add(batch.num_samples);
  int64_t n = batches_.fetch_add(1) + 1;
  if (options_.print_period > 0 && n % options_.print_period == 0) Report(state, n);
}

void MultiTrainer::AnnounceNext(ThreadState* state, const Batch& next, int distance) {
  for (size_t i = 0; i < state->ahead_slot_vars.size(); ++i) {
    *state->ahead_slot_vars[i]->GetMutable<LoDTensor>() = next.tensors[i];
  }
  framework::StepInfo info{state->index, options_.threads, state->batches + distance,
                           state->ahead_scope};
  framework::RunBatchAhead(executor_->resources().get(), info, distance);
}

void MultiTrainer::CollectFetches(ThreadState* state) {
  for (size_t i = 0; i < state->fetch_vars.size(); ++i) {
    const Variable* v = state->fetch_vars[i];
    const std::string& name = options_.fetch_names[i];
    FLEET_ENFORCE(v->IsType<LoDTensor>(), InvalidArgument, "fetch variable '", name, "' holds ",
                  v->KindName(), "; only LoDTensor variables can be fetched");
    const LoDTensor& t = v->Get<LoDTensor>();
    FLEET_ENFORCE(t.initialized(), InvalidArgument, "fetch variable '", name,
                  "' has no value after the batch (does the program compute it?)");
    state->fetch_sums[i] += SumElements(t);
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < state->fetch_vars.size(); ++i) {
    const LoDTensor& t = state->fetch_vars[i]->Get<LoDTensor>();
    last_fetch_[i].CopyFrom(t);
    last_fetch_[i].set_lod(t.lod());
  }
}

void MultiTrainer::Report(ThreadState* state, int64_t batch_number) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < state->fetch_vars.size(); ++i) {
    parts.push_back(absl::StrCat(options_.fetch_labels[i], "=",
                                 FormatValue(state->fetch_vars[i]->Get<LoDTensor>())));
  }
  double rate = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = absl::Now();
    int64_t samples = samples_.load();
    double seconds = absl::ToDoubleSeconds(now - last_report_time_);
    rate = seconds > 0 ? static_cast<double>(samples - last_report_samples_) / seconds : 0;
    last_report_time_ = now;
    last_report_samples_ = samples;
  }
  parts.push_back(absl::StrFormat("%.0f samples/s", rate));
  Log(absl::StrCat("batch ", batch_number, " (thread ", state->index,
                   "): ", absl::StrJoin(parts, ", ")));
}

void MultiTrainer::Fail(std::exception_ptr error) {
  {
    absl::MutexLock lock(&mu_);
    if (!error_) error_ = error;
  }
  Cancel();
}

void MultiTrainer::Log(const std::string& line) {
  if (!options_.log) return;
  absl::MutexLock lock(&log_mu_);
  options_.log(line);
}

TrainerResult MultiTrainer::Finish() {
  FLEET_ENFORCE(dataset_ != nullptr && !finished_, Internal,
                "MultiTrainer::Finish without a running pass");
  finished_ = true;
  for (auto& t : threads_) t.join();
  TrainerResult result;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start_time_);
  std::exception_ptr reader_error;
  // The trainers are gone, so nobody drains the channel any more: a producer still blocked on a
  // full channel (after a reader failed, say) must be released before it can be joined. After a
  // complete pass every producer has ended already and this changes nothing.
  source_->Cancel();
  try {
    result.read = source_->Join();
  } catch (...) {
    reader_error = std::current_exception();
  }
  operators::blas::SetNumThreads(saved_blas_threads_);
  std::exception_ptr hook_error;
  try {
    framework::RunPassEnd(executor_->resources().get());
  } catch (...) {
    hook_error = std::current_exception();
  }
  result.batches = batches_.load();
  result.samples = samples_.load();
  result.fetch_sums.assign(options_.fetch_names.size(), 0.0);
  std::vector<int64_t> per_thread;
  for (const auto& s : states_) {
    for (size_t i = 0; i < s->fetch_sums.size(); ++i) result.fetch_sums[i] += s->fetch_sums[i];
    for (size_t r = 0; r < s->stats.nanos_by_role.size(); ++r) {
      result.run_stats.nanos_by_role[r] += s->stats.nanos_by_role[r];
    }
    result.run_stats.runs += s->stats.runs;
    per_thread.push_back(s->batches);
  }
  states_.clear();
  pass_scope_->DropKids();
  std::exception_ptr error;
  {
    absl::MutexLock lock(&mu_);
    error = error_;
    result.last_fetch = std::move(last_fetch_);
  }
  if (error) std::rethrow_exception(error);
  if (reader_error) std::rethrow_exception(reader_error);
  if (hook_error) std::rethrow_exception(hook_error);
  if (result.read.bad_lines > 0) {
    Log(absl::StrCat("skipped ", result.read.bad_lines, " malformed lines (skip_bad_lines); ",
                     "first: ", result.read.bad_line_examples.front()));
  }
  if (options_.print_profile) {
    const auto& ns = result.run_stats.nanos_by_role;
    Log(absl::StrFormat(
        "op time over all threads: forward %.3fs, backward %.3fs, optimize %.3fs, other %.3fs; "
        "batches per thread: %s",
        ns[0] * 1e-9, ns[1] * 1e-9, ns[2] * 1e-9, ns[3] * 1e-9, absl::StrJoin(per_thread, ", ")));
  }
  return result;
}

}  // namespace fleet::trainer
