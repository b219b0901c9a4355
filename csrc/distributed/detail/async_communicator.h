#pragma once
// Async training (Paddle's AsyncCommunicator, reshaped): every variable (each sparse table, the
// packed dense gradients) has a bounded queue; the ops only enqueue a copy and return, blocking
// only while their queue is full. Send threads (one for the dense queue, thread_pool_size shared
// by the sparse ones) take up to max_merge_var_num gradients of a queue, waiting send_wait_times
// x 10 ms for more when fewer are there, merge them by summing (sparse: rows concatenated, the
// client sums repeated ids) and push; the dense thread refreshes the dense values with each of
// its pushes, whose replies carry the values after the update (PsClient::PushPullDense: one
// round trip a step), or a receive thread pulls them every 10 ms, with independent_recv.
//
// Merging is exact only for SGD (one update with the summed gradients equals the updates one
// after another, to first order); for a stateful rule (Adam, Adagrad) k gradients merged would
// make one step where the single process makes k (measured: CTR-DNN with Adam lost 0.06 AUC on
// 40k rows). So a table whose rule is not SGD sends each gradient as its own push, in order;
// the ops' fusion already makes that one request per table and step.
//
// Bounded staleness of the dense parameters (max_dense_staleness = S >= 0): before each step a
// trainer thread waits until the dense values it reads include every dense gradient of its own
// but the last S. The dense queue has its own send thread, which receives the dense table with
// each push into a staging buffer; a trainer thread installs the staged values at its step
// boundary, so a step never reads half-refreshed weights. In a dataset pass the install copies
// nothing where it can: the thread's dense parameters become views of the staging buffer itself
// (CommunicatorBase::ShareDenseParams), which the communicator never writes again while a tensor
// holds it. With one trainer thread no other copy reads it, so an op that writes a dense
// parameter in place writes that thread's values only, as with a copy. Several threads share
// the buffer only when no op of the pass's program writes a dense parameter (PassInfo's
// written_vars: an async worker's program has no optimizer ops); else each copy gets the values
// copied in, since one buffer would carry one thread's in-place writes into another's step (the
// copy was 1.7 MB a CTR-DNN step and thread, under the communicator's lock). Without the bound
// (S < 0) the dense
// values lag by as many steps as the queue and the round trips hold. Measured on CTR-DNN (200k
// rows, Adam, 2 workers, 1 server): S < 0 and S = 1 both end 0.01-0.02 test AUC below one
// process, S = 0 within 0.003, at about 15% fewer samples/s; waiting for the sparse pushes
// before each pull changed nothing, so sparse rows are never waited for. S = 0 is the default.
//
// Trainer threads: in a dataset pass each thread reads a private copy of the dense parameters in
// its own scope (PrepareThreadScope), which only it writes; Executor.run steps read the root
// scope's, which a pass's end (Flush) sets to the servers' values. With one copy shared by the
// threads, one thread's install landed in the middle of another's step, whose layers then read
// different weights (e2e/test_async_threads.py). What that cost was not measurable on DLRM (200k
// rows, Adam, 1 worker of 2 threads, 3 runs each: test AUC 0.754-0.771 shared, 0.754-0.773
// private). The bound stays per thread: a step cannot wait for the gradient its sibling is
// computing, so a worker of N threads adds to the staleness about what N workers add (DLRM, 2
// workers of 2 threads: 0.674 in 5 runs shared, 0.697 and 0.675 private; 4 workers of 1 thread
// 0.673; 2 workers of 1 thread 0.765. At 0.674 its bottom MLP's last ReLUs are all dead).
//
// Bounded staleness of the sparse rows (max_sparse_staleness = S >= 0): a pull of a table's rows
// waits until the servers acknowledged every push of that table this worker queued but the last
// S (all its trainer threads' pushes: they are queued already, so no pull waits for a sibling's
// computation). While a pull waits, the send thread pushes what is queued at once instead of
// waiting send_wait_times for a fuller merge. A prefetch is a pull started before the push is
// acknowledged, so a bound turns prefetch_sparse off. Why: without it, the rows of frequent ids
// (in every batch: word2vec's frequent words, their output rows touched as negatives by every
// batch) are read without the worker's last few gradients and each step pushes a gradient taken
// at the same stale value, which overshoots like a larger learning rate; word2vec on the text
// corpus (SGD 5.0, 2 workers of 2 threads) scored a held-out pair AUC of 0.643 against 0.767 in
// one process, 0.704 with queues of 1. The default (-1) keeps Paddle's unbounded behaviour.
//
// The dense push without a hand-off (max_dense_staleness 0, the refresh in the push's reply):
// when the dense queue is empty and nothing of it is in flight, SendDense starts the push on the
// trainer thread itself and the step boundary (BeforeStep) waits for its reply directly, where
// the send thread would first be woken to start it and then wake the trainer once it staged the
// values: two thread hand-offs less per step on the round trip that a step of S = 0 waits for.
// The values staged are the same: the push is still the only one of the dense queue in flight,
// its reply holds every dense push of this worker so far. Whoever needs the push done first
// finishes it (the step boundary, the send thread with a later dense item queued behind it, a
// flush), so a thread whose pass ends with its push outstanding blocks no other.
//
// An error of a send or receive thread is kept and thrown by the next op, Flush or Stop, so a
// dead server ends training with its endpoint named.

#include <atomic>
#include <deque>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "distributed/detail/communicator_base.h"
#include "distributed/detail/sparse_prefetch.h"

namespace fleet::distributed::detail {

class AsyncCommunicator : public CommunicatorBase {
 public:
  AsyncCommunicator(CommunicatorConfig config, std::shared_ptr<ps::PsClient> client, Scope* root);
  ~AsyncCommunicator() override;

  void PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<const float> grads) override;
  // Queues the vectors themselves: no copy.
  void PushSparseOwned(int thread, uint32_t table_id, std::vector<int64_t> keys,
                       std::vector<float> grads) override;
  void SendDense(int thread, const std::vector<const LoDTensor*>& grads) override;
  // Served from the rows prefetched for the thread's batch when there are (sparse_prefetch.h).
  void PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<float> out, bool from_servers) override;
  // Gives the prefetched rows' buffer itself away when there are.
  std::shared_ptr<Buffer> PullSparseRows(int thread, uint32_t table_id,
                                         absl::Span<const int64_t> keys, size_t dim,
                                         bool from_servers) override;
  // The mode's hook, then the prefetcher's (none without prefetch_sparse).
  std::vector<std::shared_ptr<framework::StepHook>> hooks() override;
  // Pulls served from prefetched rows so far.
  int64_t prefetched_pulls() const { return prefetcher_ ? prefetcher_->served() : 0; }
  // Dense pushes the trainer threads started themselves so far (see the class comment).
  int64_t direct_dense_pushes() const;
  // What the trainer threads waited for so far (communicator.h).
  TrainerWaits trainer_waits() const;
  void Flush() override;
  void Stop() override;
  // Gives a dataset pass's trainer thread its own copy of the dense parameters (see above).
  void PrepareThreadScope(int thread, Scope* scope) override;
  void OnPassBegin(const framework::PassInfo& pass) override;
  // Waits while the dense parameters lag more than max_dense_staleness steps behind this
  // worker's own gradients (see the class comment).
  void BeforeStep(const framework::StepInfo& info) override;
  // After a dataset pass: Flush (an Executor.run step does not wait for its sends).
  void OnPassEnd() override;

 protected:
  void StartThreads() override;

 private:
  struct Item {
    std::vector<int64_t> keys;  // empty for dense
    std::vector<float> values;  // empty for dense gradients written into `shares`
    // Dense: the gradients where the push sends them from (the segments shared with the
    // servers; PsClient::DenseShares), when the slots were free; else in `values`.
    std::unique_ptr<ps::PsClient::DenseShares> shares;
  };
  struct Queue {
    Queue() = default;
    // Moved only (its items hold dense shares), so that queues_ grows by moving them.
    Queue(Queue&&) = default;
    Queue(const Queue&) = delete;
    uint32_t table_id = 0;
    bool dense = false;
    std::string what;
    std::deque<Item> items;
    int in_flight = 0;      // items taken by a send thread and not yet pushed
    int64_t enqueued = 0;   // items ever queued
    int64_t pushed = 0;     // items the servers acknowledged (a queue's pushes go in order)
    int pulls_waiting = 0;  // pulls waiting for this queue's pushes (max_sparse_staleness)
    size_t max_merge = 1;   // max_merge_var_num for SGD tables, else 1 (see above)
    // The condition its send thread waits on (in sender_work_; null before StartThreads).
    absl::CondVar* sender = nullptr;
  };
  // Queues the item; returns its number in the queue's order (1, 2, ...).
  int64_t Enqueue(size_t q, Item item);
  // The dense push a trainer thread started itself, until it is finished.
  struct DirectPush {
    std::optional<ps::Future> future;   // unset while the starting thread launches it
    std::shared_ptr<Buffer> refreshed;  // the dense values after the push (its reply)
    Item item;                          // its gradients (their buffer returns at the end)
    int in_shares = 0;                  // 1 when its gradients were written into shares
    bool finishing = false;             // a thread waits for its reply to finish it
    bool launch_awaited = false;        // a thread waits for `future` to be set
  };
  // Starts the push of a dense item on the calling trainer thread when nothing of the dense
  // queue is queued or in flight (see the class comment); else queues it. Returns its number.
  int64_t SendOrEnqueueDense(Item item);
  // Whether the dense item may be pushed by the trainer thread now.
  bool MayPushDirectly(const Queue& queue) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether this thread may finish the direct push now (one is launched and no other thread
  // waits for it).
  bool DirectPushToFinish() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the direct push's reply (without the lock) and stages its values as the send
  // thread stages a push's; an error is kept for the next op. DirectPushToFinish() must hold.
  void FinishDirectPush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a direct push is under way that another thread launches or finishes; if so, that
  // thread wakes every waiter when it is done.
  bool AwaitDirectPush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For an op that needs the direct push done (a step, the send thread, a flush): finishes it
  // when this thread may (true), else AwaitDirectPush (false: the caller waits on its condition).
  bool FinishOrAwaitDirectPush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At Stop and destruction: waits until no RPC writes the direct push's buffer any more.
  void AbandonDirectPush() ABSL_LOCKS_EXCLUDED(mu_);
  void SendLoop(std::vector<size_t> queues, bool refresh_dense);
  // The queue of sparse table `table_id`.
  size_t SparseQueue(uint32_t table_id) const;
  // Waits until queue q's pushes but the last max_sparse_staleness are acknowledged.
  void AwaitSparsePushes(size_t q);
  // A pull that no prefetch served: at the step, after the sparse bound's wait.
  void PullAtStep(uint32_t table_id, absl::Span<const int64_t> keys, absl::Span<float> out,
                  bool from_servers);
  void RecvLoop();
  // Whether an op of the pass's program may write a dense parameter (in place): then its trainer
  // threads cannot share one buffer of dense values.
  bool WritesDenseParams(const framework::PassInfo& pass) const;
  // Pulls the dense table into the staging buffer and records which of this worker's dense
  // pushes the values include; the trainer installs them at its next step boundary.
  void RefreshDense();
  // Which staged values a copy of the dense parameters holds.
  struct Installed {
    int64_t stage = 0;    // staged_count_ when they were written
    int64_t through = 0;  // this worker's dense pushes they include
  };
  // Writes the staged values into the dense parameters `scope` sees unless `*installed` has them
  // already, and records that it does. With `share`, the parameters become views of the staged
  // buffer instead of copies (only for a copy that no other reads: see the class comment).
  void InstallStagedDense(const Scope* scope, Installed* installed, bool share = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The copy `thread`'s steps read: its private one in a dataset pass, else the root scope's.
  Installed& InstalledFor(int thread) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stages pulled values that include this worker's first `through` dense pushes, unless newer
  // ones are staged.
  void StageDense(std::shared_ptr<Buffer> values, int64_t through)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes up to max_merge_var_num items of queue q (waiting a little for more); empty: none.
  std::vector<Item> Take(size_t q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pushes the items (merged); a dense push with `refreshed` also returns the dense values after
  // it, in a buffer of TakePullBuffer (PsClient::PushPullDense).
  void Send(const Queue& queue, std::vector<Item>& items, std::shared_ptr<Buffer>* refreshed);
  void CheckError() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes every waiter of every condition (an error or stop).
  void WakeAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the send thread of `queue`: an item was queued, or a pull waits for its pushes.
  void WakeSender(const Queue& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinThreads();
  // A buffer of dense_size() floats: a spare one (its old values are overwritten by the caller)
  // or a new one. Reuse keeps the per-step megabytes of gradients and pulled values from being
  // allocated, zeroed and faulted in every step.
  std::vector<float> TakeDenseBuffer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReturnDenseBuffer(std::vector<float> buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A buffer of dense_size() floats to pull the dense values into: a retired one that nothing
  // holds any more (no trainer's parameters view it), or a new one.
  std::shared_ptr<Buffer> TakePullBuffer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps pulled values no longer staged for reuse once their last view is gone.
  void RetirePullBuffer(std::shared_ptr<Buffer> buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // An item was taken or pushed, or an error or stop: what a full queue's Enqueue,
  // AwaitSparsePushes, Flush and the receive thread wait for.
  absl::CondVar changed_;
  // New dense values were staged, or an error or stop: what BeforeStep waits for. Apart from
  // changed_, so that a trainer thread waiting for its dense refresh is not woken by every
  // sparse push, enqueue and take of the other queues (measured on CTR-DNN async: about 40%
  // more wake-ups of the trainer than steps that waited).
  absl::CondVar dense_staged_;
  // One condition per send thread (a deque: conditions do not move), which Enqueue signals for
  // that thread's queues only, where a shared one woke every send thread for every item.
  std::deque<absl::CondVar> sender_work_ ABSL_GUARDED_BY(mu_);
  std::vector<Queue> queues_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);
  // This worker's dense gradients handed to the servers so far.
  int64_t dense_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  // Per trainer thread, the numbers of its dense gradients not yet known to be in the values it
  // reads (the bound applies per thread: one thread's step does not wait for another's).
  std::vector<std::deque<int64_t>> own_dense_ ABSL_GUARDED_BY(mu_);
  // The pushes included in the root scope's dense values, and in each trainer thread's private
  // copy during a dataset pass that made them (private_dense_).
  Installed root_installed_ ABSL_GUARDED_BY(mu_);
  std::vector<Installed> thread_installed_ ABSL_GUARDED_BY(mu_);
  bool private_dense_ ABSL_GUARDED_BY(mu_) = false;
  // The latest pulled dense values, and the pushes they include; written into the values a
  // trainer thread reads between its steps, never while it computes (a refresh written in the
  // middle of a step tears it: its forward and backward would read different weights).
  // Null until values are staged. A trainer thread's parameters may view it (ShareDenseParams):
  // then it is never written again, and a retired buffer is reused only once no view holds it.
  std::shared_ptr<Buffer> staged_dense_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Buffer>> retired_pulls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<float>> spare_dense_ ABSL_GUARDED_BY(mu_);  // gradients' buffers
  // A dataset pass whose trainer threads install the staged values as views (see above).
  bool share_staged_ ABSL_GUARDED_BY(mu_) = false;
  // Retired pull buffers kept for reuse (each trainer thread's parameters may view one).
  size_t retired_limit_ ABSL_GUARDED_BY(mu_) = 4;
  int64_t staged_through_ ABSL_GUARDED_BY(mu_) = -1;  // -1: nothing staged
  int64_t staged_count_ ABSL_GUARDED_BY(mu_) = 0;     // values staged so far
  // Dense items queued or in flight whose gradients are in shares (the slots they hold).
  int items_in_shares_ ABSL_GUARDED_BY(mu_) = 0;
  // The dense push a trainer thread started, while it is not finished (see the class comment).
  std::optional<DirectPush> direct_ ABSL_GUARDED_BY(mu_);
  int64_t direct_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  // Counts of TrainerWaits: steps that waited for the dense refresh, gradients that waited for
  // room in their queue, pulls of the servers at a step.
  int64_t dense_refresh_waits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queue_full_waits_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> step_pulls_{0};
  std::vector<std::thread> threads_;
  std::atomic<bool> dataset_pass_{false};
  std::shared_ptr<SparsePrefetcher> prefetcher_;  // null without prefetch_sparse
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace fleet::distributed::detail
