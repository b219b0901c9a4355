#pragma once
// GEO training (geo-SGD, as Paddle's GeoCommunicator): the worker trains its own copy of every
// parameter and every `geo_steps` steps (counted over all its threads) exchanges deltas:
//
//   dense:  the program keeps its optimizer ops, so the root scope's parameters are the local
//           copy; the delta is (current - last synced) / num_workers (the servers average the
//           workers' changes), pushed with PushKind::kDelta in a push-pull whose reply
//           carries the fresh values (one round trip), which become both current and last
//           synced.
//   sparse: rows live here (LocalRows, local_rows.h): pulled from the servers on first use,
//           updated by the user's optimizer (ps::UpdateRule) on push_sparse, their ids
//           remembered; at an exchange the touched rows' deltas are pushed in a push-pull
//           whose reply carries the rows' fresh values (PsClient::PushPullSparse).
//
// The trainer thread that completes the geo_steps-th step takes the deltas (the synced values
// become the current ones) and hands the rest of the exchange to a thread of its own: the pushes,
// the pulls of fresh values and their rebase (value = fresh + (value - synced), as Paddle's GEO
// receives dense values), while every trainer thread keeps training on the local copy. An update
// made while the deltas travel stays on top of the fresh values and goes with the next exchange;
// with none, the fresh values are taken exactly. One exchange at a time: the next k-th step waits
// for the one in flight (and raises its error); a flush or the end of a pass exchanges in full
// before it returns.

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "distributed/detail/communicator_base.h"
#include "distributed/detail/geo_row_prefetch.h"
#include "distributed/detail/local_rows.h"

namespace fleet::distributed::detail {

// The step's pull of the rows (of `dim` floats) its Read missed, the positions `missing` of
// `keys`: fetches them with `pull`, inserts those still absent and writes every missed row into
// `out` as it is in `local` then, so that a row another trainer thread pulled and trained while
// this pull was in flight is read with its update, not overwritten. (A function of its own so
// that a test can run the other thread's step inside `pull`, the window in which the race is.)
void PullMissingRows(LocalRows& local, size_t dim, absl::Span<const int64_t> keys,
                     absl::Span<const size_t> missing, absl::Span<float> out,
                     absl::FunctionRef<void(absl::Span<const int64_t>, absl::Span<float>)> pull);

class GeoCommunicator : public CommunicatorBase {
 public:
  GeoCommunicator(CommunicatorConfig config, std::shared_ptr<ps::PsClient> client, Scope* root);
  ~GeoCommunicator() override;

  void PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<float> out, bool from_servers) override;
  void PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<const float> grads) override;
  void SendDense(int thread, const std::vector<const LoDTensor*>& grads) override;
  void Flush() override;
  void Stop() override;

  void OnPassBegin(const framework::PassInfo& pass) override;
  void OnBatchAhead(const framework::StepInfo& next) override;
  // With the row prefetch, a dataset pass announces GeoRowPrefetch::kBatchesAhead batches ahead.
  int BatchesAhead() const override;
  void AfterStep(const framework::StepInfo& info) override;
  void OnPassEnd() override;
  // The next-batch row prefetch's counts (geo_row_prefetch.h); null without prefetch_sparse.
  const GeoRowPrefetch* row_prefetch() const { return prefetch_.get(); }

 protected:
  void StartThreads() override;

 private:
  // An exchange's deltas, taken on the trainer thread.
  struct Deltas {
    std::vector<std::vector<int64_t>> keys;  // per config_.sparse entry
    std::vector<std::vector<float>> rows;
    std::vector<LocalRows::Lookup> places;  // where the keys' rows are, for their rebase
    std::vector<float> dense;
  };
  // Where a trainer thread's last pull of a table found its rows, for the push of the same ids
  // that follows in the step. The mutex is for callers that share a thread number (Executor.run
  // from several Python threads): a Lookup of other keys is ignored, never misused.
  struct LastPull {
    std::mutex mu;
    LocalRows::Lookup lookup;
  };
  LocalRows& Local(uint32_t table_id);
  LastPull& LastPullOf(int thread, uint32_t table_id);
  // Takes the deltas and hands them to the exchange thread (started on first use).
  void StartExchange();
  // A whole exchange before it returns.
  void Exchange();
  // Waits until the exchange thread is idle; raises the error of its last exchange. Under
  // exchange_mu_.
  void FinishPending();
  // Under exchange_mu_, with no exchange in flight.
  Deltas TakeDeltas();
  // Pushes the deltas, pulls the fresh values of what they touched and rebases onto them.
  void SendAndRebase(const Deltas& deltas);
  // The exchange thread's loop, and its end (after the exchange in flight).
  void ExchangeLoop();
  void StopExchangeThread();

  absl::flat_hash_map<uint32_t, std::unique_ptr<LocalRows>> local_;
  std::mutex last_pulls_mu_;
  absl::flat_hash_map<std::pair<int, uint32_t>, std::unique_ptr<LastPull>> last_pulls_;
  std::vector<float> dense_synced_;  // only the exchange in flight or, with none, its taker
  // Where the exchange in flight's replies come back (SendAndRebase, one at a time).
  std::vector<float> dense_fresh_;
  std::vector<std::vector<float>> fresh_;  // per config_.sparse entry
  std::mutex exchange_mu_;                 // one exchange taken at a time
  std::atomic<int64_t> steps_{0};
  std::atomic<bool> dataset_pass_{false};
  bool stopped_ = false;
  // The exchange thread and what it is handed, under pending_mu_.
  std::mutex pending_mu_;
  std::condition_variable pending_cv_;
  std::shared_ptr<const Deltas> pending_;  // handed over, not yet picked up
  bool in_flight_ = false;                 // handed over and not yet done
  std::exception_ptr pending_error_;       // the last exchange's, until FinishPending raises it
  bool quit_ = false;
  std::thread exchange_thread_;
  // Pulls the rows the next batch lacks while the current one runs; null without
  // prefetch_sparse. Declared last: destroyed first, it waits for its pulls in flight.
  std::unique_ptr<GeoRowPrefetch> prefetch_;
};

}  // namespace fleet::distributed::detail
