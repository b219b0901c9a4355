#pragma once
// GEO training (geo-SGD, as Paddle's GeoCommunicator): the worker trains its own copy of every
// parameter and every `geo_steps` steps (counted over all its threads) exchanges deltas:
//
//   dense:  the program keeps its optimizer ops, so the root scope's parameters are the local
//           copy; the delta is (current - last synced) / num_workers (the servers average the
//           workers' changes), pushed with PushKind::kDelta, then the
//           fresh values are pulled and become both current and last synced.
//   sparse: rows live here (LocalRows, local_rows.h): pulled from the servers on first use,
//           updated by the user's optimizer (ps::UpdateRule) on push_sparse, their ids
//           remembered; at an exchange the touched rows' deltas are pushed and their fresh
//           values pulled.
//
// The exchange runs on the trainer thread that completes the geo_steps-th step, while the other
// threads keep training on the local copy (their updates made during the exchange are either in
// the pushed delta or overwritten by the pull, as in Paddle's GEO).

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "distributed/detail/communicator_base.h"
#include "distributed/detail/local_rows.h"

namespace fleet::distributed::detail {

class GeoCommunicator : public CommunicatorBase {
 public:
  GeoCommunicator(CommunicatorConfig config, std::shared_ptr<ps::PsClient> client, Scope* root);

  void PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<float> out, bool from_servers) override;
  void PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<const float> grads) override;
  void SendDense(int thread, const std::vector<const LoDTensor*>& grads) override;
  void Flush() override;
  void Stop() override;

  void OnPassBegin(const framework::PassInfo& pass) override { dataset_pass_ = pass.dataset_pass; }
  void AfterStep(const framework::StepInfo& info) override;
  void OnPassEnd() override;

 protected:
  void StartThreads() override;

 private:
  LocalRows& Local(uint32_t table_id);
  void Exchange();

  absl::flat_hash_map<uint32_t, std::unique_ptr<LocalRows>> local_;
  std::vector<float> dense_synced_;
  std::mutex exchange_mu_;  // one exchange at a time
  std::atomic<int64_t> steps_{0};
  std::atomic<bool> dataset_pass_{false};
  bool stopped_ = false;
};

}  // namespace fleet::distributed::detail
