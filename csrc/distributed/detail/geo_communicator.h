#pragma once
// GEO training (geo-SGD, as Paddle's GeoCommunicator): the worker trains its own copy of every
// parameter and every `geo_steps` steps (counted over all its threads) exchanges deltas:
//
//   dense:  the program keeps its optimizer ops, so the root scope's parameters are the local
//           copy; the delta is (current - last synced) / num_workers (the servers average the
//           workers' changes), pushed with PushKind::kDelta, then the
//           fresh values are pulled and become both current and last synced.
//   sparse: rows live here (LocalRows): pulled from the servers on first use, updated by the
//           user's optimizer (ps::UpdateRule) on push_sparse, their ids remembered; at an
//           exchange the touched rows' deltas are pushed and their fresh values pulled.
//
// The exchange runs on the trainer thread that completes the geo_steps-th step, while the other
// threads keep training on the local copy (their updates made during the exchange are either in
// the pushed delta or overwritten by the pull, as in Paddle's GEO).

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "distributed/detail/communicator_base.h"
#include "ps/table/update_rule.h"

namespace fleet::distributed::detail {

// The worker's copy of one sparse table: value, last-synced value and update-rule state per row.
class LocalRows {
 public:
  LocalRows(size_t dim, std::unique_ptr<ps::UpdateRule> rule);

  // Copies the values of present keys into out; returns the positions of absent keys.
  std::vector<size_t> Read(absl::Span<const int64_t> keys, absl::Span<float> out) const;
  // Inserts (or overwrites) rows with `values` as both value and synced value.
  void Reset(absl::Span<const int64_t> keys, absl::Span<const float> values);
  // Applies gradients through the update rule (repeated keys summed first) and remembers the ids.
  // Absent keys are an error (pull_sparse always runs before push_sparse).
  void Update(absl::Span<const int64_t> keys, absl::Span<const float> grads);
  // One training step of the rule's learning-rate schedule (nothing without one): the worker
  // calls it once per step, so that its k-th step updates rows at the schedule's rate of step k,
  // the rate the program's own lr variable has then (the servers only add GEO deltas).
  void StepSchedule() { rule_->BeginUpdate(); }
  // The ids updated since the last call, with their deltas scale * (value - synced).
  void TakeDeltas(float scale, std::vector<int64_t>* keys, std::vector<float>* deltas);

 private:
  static constexpr size_t kShards = 16;
  // A batch's lookups are mostly cache misses on large tables: the hash slot of the key this
  // many places ahead is prefetched.
  static constexpr uint32_t kPrefetchAhead = 8;
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<int64_t, size_t> row_of;
    std::vector<float> rows;  // per row: value[dim] synced[dim] state[state_dim]
    absl::flat_hash_set<int64_t> touched;
  };
  static size_t ShardIndex(int64_t key);
  Shard& ShardOf(int64_t key) const;
  // The positions of `keys` grouped by shard: shard s's are order[begin[s], begin[s + 1]), in
  // their order within keys.
  std::vector<uint32_t> ByShard(absl::Span<const int64_t> keys,
                                std::array<uint32_t, kShards + 1>* begin) const;
  // visit(shard, i) for every position i of `keys`, a shard's keys together under one lock of
  // the shard instead of a lock per key.
  template <class Visit>
  void ForEachByShard(absl::Span<const int64_t> keys, Visit&& visit) const;
  float* Row(Shard& shard, int64_t key) const;

  size_t dim_;
  size_t state_dim_;
  size_t width_;
  std::unique_ptr<ps::UpdateRule> rule_;
  std::unique_ptr<Shard[]> shards_;
};

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
