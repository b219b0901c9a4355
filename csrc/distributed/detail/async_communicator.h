#pragma once
// Async training (Paddle's AsyncCommunicator, reshaped): every variable (each sparse table, the
// packed dense gradients) has a bounded queue; the ops only enqueue a copy and return, blocking
// only while their queue is full. Send threads (thread_pool_size, each owning some queues) take
// up to max_merge_var_num gradients of a queue, waiting send_wait_times x 10 ms for more when
// fewer are there, merge them by summing (sparse: rows concatenated, the client sums repeated
// ids), push, and after each round refresh the dense parameters in the root scope (or a receive
// thread does, with independent_recv).
//
// Merging is exact only for SGD (one update with the summed gradients equals the updates one
// after another, to first order); for a stateful rule (Adam, Adagrad) k gradients merged would
// make one step where the single process makes k (measured: CTR-DNN with Adam lost 0.06 AUC on
// 40k rows). So a table whose rule is not SGD sends each gradient as its own push, in order;
// the ops' fusion already makes that one request per table and step.
//
// An error of a send or receive thread is kept and thrown by the next op, Flush or Stop, so a
// dead server ends training with its endpoint named.

#include <atomic>
#include <deque>
#include <exception>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "distributed/detail/communicator_base.h"

namespace fleet::distributed::detail {

class AsyncCommunicator : public CommunicatorBase {
 public:
  AsyncCommunicator(CommunicatorConfig config, std::shared_ptr<ps::PsClient> client, Scope* root);
  ~AsyncCommunicator() override;

  void PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                  absl::Span<const float> grads) override;
  void SendDense(int thread, const std::vector<const LoDTensor*>& grads) override;
  void Flush() override;
  void Stop() override;
  void OnPassBegin(const framework::PassInfo& pass) override { dataset_pass_ = pass.dataset_pass; }
  // After a dataset pass: Flush (an Executor.run step does not wait for its sends).
  void OnPassEnd() override;

 protected:
  void StartThreads() override;

 private:
  struct Item {
    std::vector<int64_t> keys;  // empty for dense
    std::vector<float> values;
  };
  struct Queue {
    uint32_t table_id = 0;
    bool dense = false;
    std::string what;
    std::deque<Item> items;
    int in_flight = 0;     // items taken by a send thread and not yet pushed
    size_t max_merge = 1;  // max_merge_var_num for SGD tables, else 1 (see above)
  };
  void Enqueue(size_t q, Item item);
  void SendLoop(std::vector<size_t> queues, bool refresh_dense);
  void RecvLoop();
  // Takes up to max_merge_var_num items of queue q (waiting a little for more); empty: none.
  std::vector<Item> Take(size_t q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Send(const Queue& queue, std::vector<Item>& items);
  void CheckError() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinThreads();

  absl::Mutex mu_;
  absl::CondVar changed_;  // an item was queued or pushed, or stop
  std::vector<Queue> queues_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
  std::atomic<bool> dataset_pass_{false};
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace fleet::distributed::detail
