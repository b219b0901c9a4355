#pragma once
// Sync and half-async training: the trainer threads of a worker meet after every step; the last
// to arrive averages their gradients (dense summed, sparse rows summed by key, both divided by
// the pass's trainer threads: one that ran out of batches counts as a zero gradient, as a
// finished worker does on the servers) and pushes them, then pulls the dense parameters into the
// root scope, and only then does any thread start its next step.
//
//   half-async: the push goes through the servers' update rule at once.
//   sync:       the push goes to the servers' accumulators, and a sync-step barrier on every
//               server (sent beside the push, not after its replies: it announces the push, and
//               the server arrives once the push is in) applies the average over all workers
//               once, its replies carrying the dense values after the update (no separate
//               pull); a worker whose pass ended keeps arriving (with nothing) until every
//               worker's has, so that workers with a batch more are not left waiting.
//
// A thread that runs out of batches leaves the meeting (OnThreadEnd), so the others do not wait
// for it. Executor.run is one thread: every run is one step.

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "distributed/detail/communicator_base.h"

namespace fleet::distributed::detail {

class StepMergeCommunicator : public CommunicatorBase {
 public:
  using CommunicatorBase::CommunicatorBase;
  ~StepMergeCommunicator() override;

  void PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<const float> grads) override;
  void SendDense(int thread, const std::vector<const LoDTensor*>& grads) override;
  void Flush() override;
  void Stop() override;

  void OnPassBegin(const framework::PassInfo& pass) override;
  void AfterStep(const framework::StepInfo& info) override;
  void OnThreadEnd(int thread) override;
  void OnPassEnd() override;

 private:
  struct SparseSums {
    absl::flat_hash_map<int64_t, uint32_t> row_of;
    std::vector<int64_t> keys;
    std::vector<float> sums;
  };
  // Pushes the merged step (caller holds mu_), pulls dense parameters, resets the sums.
  void FlushStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The leader's part of a meeting: flush, then release the others.
  void EndMeetingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sync: arrive at the servers' step barrier as done until every worker is.
  void FinishSyncSteps();

  absl::Mutex mu_;
  absl::CondVar cv_;
  int threads_ ABSL_GUARDED_BY(mu_) = 1;       // trainer threads of the pass
  int active_ ABSL_GUARDED_BY(mu_) = 0;        // threads of the pass still running
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;       // threads waiting at this step's meeting
  int64_t meeting_ ABSL_GUARDED_BY(mu_) = 0;   // meetings held (wakes the waiters)
  int dense_parts_ ABSL_GUARDED_BY(mu_) = 0;   // threads that sent dense gradients this step
  int contributors_ ABSL_GUARDED_BY(mu_) = 0;  // threads this step's sums are divided by
  // The step's dense gradients summed: where the push sends them from (the segments shared with
  // the servers) when there are free slots, else dense_sums_.
  std::unique_ptr<ps::PsClient::DenseShares> dense_shares_ ABSL_GUARDED_BY(mu_);
  std::vector<float> dense_sums_ ABSL_GUARDED_BY(mu_);
  // Sync: the packed buffer the root scope's dense parameters view, into which a step's barrier
  // replies write the values after its update (CommunicatorBase::PackedRootDenseParams).
  std::shared_ptr<Buffer> packed_dense_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, SparseSums> sparse_ ABSL_GUARDED_BY(mu_);
  bool dataset_pass_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;  // a flush failed: the meeting is broken
  bool stopped_ = false;
};

}  // namespace fleet::distributed::detail
