#include "distributed/detail/step_merge_communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace fleet::distributed::detail {

StepMergeCommunicator::~StepMergeCommunicator() {
  // No Stop() here: its flush and sync barriers could wait a step timeout for peers that are
  // gone, keeping a failed process alive.
  if (!stopped_) DestroyedWithoutStop();
}

void StepMergeCommunicator::PushSparse(int thread, uint32_t table_id,
                                       absl::Span<const int64_t> keys,
                                       absl::Span<const float> grads) {
  const size_t dim = CheckPushSize(table_id, keys, grads);
  absl::MutexLock lock(&mu_);
  SparseSums& acc = sparse_[table_id];
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] = acc.row_of.try_emplace(keys[i], static_cast<uint32_t>(acc.keys.size()));
    const float* g = grads.data() + i * dim;
    if (inserted) {
      acc.keys.push_back(keys[i]);
      acc.sums.insert(acc.sums.end(), g, g + dim);
    } else {
      float* sum = acc.sums.data() + static_cast<size_t>(it->second) * dim;
      for (size_t j = 0; j < dim; ++j) sum[j] += g[j];
    }
  }
}

void StepMergeCommunicator::SendDense(int thread, const std::vector<const LoDTensor*>& grads) {
  absl::MutexLock lock(&mu_);
  if (dense_parts_ == 0) {
    // Zeroed, then added to: the sums' float operations whichever memory holds them.
    if (config_.dense_table_id) dense_shares_ = client_->TakeDenseShares(*config_.dense_table_id);
    if (dense_shares_ != nullptr) {
      dense_shares_->Fill(0.0f);
    } else {
      dense_sums_.assign(dense_size(), 0.0f);
    }
  }
  if (dense_shares_ != nullptr) {
    GatherDense(grads, dense_shares_.get(), /*add=*/true);
  } else {
    GatherDense(grads, dense_sums_.data(), /*add=*/true);
  }
  ++dense_parts_;
}

void StepMergeCommunicator::FlushStepLocked() {
  const float scale = contributors_ > 0 ? 1.0f / static_cast<float>(contributors_) : 1.0f;
  const bool sync = config_.mode == PsMode::kSync;
  const ps::PushKind kind = sync ? ps::PushKind::kAccumulate : ps::PushKind::kGradient;
  std::vector<ps::Future> pushes;
  std::vector<std::string> what;
  for (auto& [table_id, acc] : sparse_) {
    if (acc.keys.empty()) continue;
    for (float& g : acc.sums) g *= scale;
    pushes.push_back(client_->PushSparse(table_id, acc.keys, acc.sums, kind));
    what.push_back(absl::StrCat("push of '", Sparse(table_id).name, "' gradients"));
  }
  if (dense_parts_ > 0 && dense_shares_ != nullptr) {
    dense_shares_->Scale(scale);
    pushes.push_back(client_->PushDense(*config_.dense_table_id, std::move(dense_shares_), kind));
    what.push_back("push of the dense gradients");
  } else if (dense_parts_ > 0) {
    for (float& g : dense_sums_) g *= scale;
    pushes.push_back(client_->PushDense(*config_.dense_table_id, dense_sums_, kind));
    what.push_back("push of the dense gradients");
  }
  // The pushes copied their buffers: reset before waiting, so that a failure leaves no stale sums.
  sparse_.clear();
  dense_parts_ = 0;
  contributors_ = 0;
  if (!sync) {
    for (size_t i = 0; i < pushes.size(); ++i) WaitOk(pushes[i], what[i]);
    PullDenseIntoRoot();
    return;
  }
  // The step's barrier goes out beside its pushes, not after their replies: it announces them
  // (the client counts them per server) and each server arrives once they are in, so a step
  // waits once. A failed push's error comes back instead of the step's (it is the cause).
  const std::string step = absl::StrCat("sync step of worker ", config_.worker_id, " (with its ",
                                        pushes.size(), " gradient pushes)");
  if (!config_.dense_table_id) {
    auto done = client_->SyncStep(config_.num_workers, config_.worker_id, /*done=*/false,
                                  config_.step_timeout, pushes);
    ThrowIfError(done.status(), step);
    return;
  }
  // The step's replies carry the dense values after its update: no pull of its own. They are
  // written straight into the root scope's parameters, as WriteDenseParams did after a copy:
  // every trainer thread of this worker waits in this meeting, so no step reads them meanwhile.
  float* params = PackedRootDenseParams(&packed_dense_);
  auto done = client_->SyncStepAndPullDense(config_.num_workers, config_.worker_id,
                                            config_.step_timeout, *config_.dense_table_id,
                                            absl::MakeSpan(params, dense_size()), pushes);
  ThrowIfError(done.status(), step);
}

void StepMergeCommunicator::EndMeetingLocked() {
  // Every thread of the pass, also those that ran out of batches (a zero gradient): dividing by
  // the threads that arrived made the last steps larger per sample once a thread had ended.
  contributors_ = threads_;
  arrived_ = 0;
  try {
    FlushStepLocked();
  } catch (...) {
    failed_ = true;
    ++meeting_;
    cv_.SignalAll();
    throw;
  }
  ++meeting_;
  cv_.SignalAll();
}

void StepMergeCommunicator::OnPassBegin(const framework::PassInfo& pass) {
  absl::MutexLock lock(&mu_);
  threads_ = std::max(pass.num_threads, 1);
  active_ = pass.num_threads;
  arrived_ = 0;
  failed_ = false;
  dataset_pass_ = pass.dataset_pass;
}

void StepMergeCommunicator::AfterStep(const framework::StepInfo& info) {
  absl::MutexLock lock(&mu_);
  FLEET_ENFORCE(!failed_, Unavailable,
                "another trainer thread's parameter-server step failed; see its error");
  ++arrived_;
  if (arrived_ == active_) {
    EndMeetingLocked();
    return;
  }
  const int64_t meeting = meeting_;
  while (meeting_ == meeting) cv_.Wait(&mu_);
  FLEET_ENFORCE(!failed_, Unavailable,
                "another trainer thread's parameter-server step failed; see its error");
}

void StepMergeCommunicator::OnThreadEnd(int thread) {
  absl::MutexLock lock(&mu_);
  --active_;
  // The others may all be waiting for this thread: it ends the meeting for them.
  if (active_ > 0 && arrived_ == active_ && !failed_) EndMeetingLocked();
}

void StepMergeCommunicator::FinishSyncSteps() {
  if (config_.mode != PsMode::kSync) return;
  while (true) {
    auto done = client_->SyncStep(config_.num_workers, config_.worker_id, /*done=*/true,
                                  config_.step_timeout);
    ThrowIfError(done.status(),
                 absl::StrCat("worker ", config_.worker_id, " waiting for the others to finish"));
    if (*done >= config_.num_workers) return;
  }
}

void StepMergeCommunicator::OnPassEnd() {
  bool dataset_pass;
  {
    absl::MutexLock lock(&mu_);
    dataset_pass = dataset_pass_;
    if (failed_ || failed()) return;
  }
  // After a dataset pass, wait until every worker's pass ended (they may have more batches).
  // Executor.run loops keep their steps in step by themselves; stop_worker finishes them.
  if (dataset_pass) FinishSyncSteps();
}

void StepMergeCommunicator::Flush() {
  absl::MutexLock lock(&mu_);
  if (!sparse_.empty() || dense_parts_ > 0) {
    contributors_ = 1;
    FlushStepLocked();
  }
}

void StepMergeCommunicator::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // After a failed step nothing more is pushed and no barrier is met: a peer may be dead or
  // frozen, and the step's error has been raised already.
  if (failed()) return;
  try {
    Flush();
    FinishSyncSteps();
    Leave();
  } catch (const std::exception& e) {
    MarkFailed(e.what());
    throw;
  }
}

}  // namespace fleet::distributed::detail
