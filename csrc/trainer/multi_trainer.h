#pragma once
// MultiTrainer: train_from_dataset's engine. N trainer threads each bind the prepared program to
// a child scope of their own (activations, fed slots) under the root scope (parameters, shared:
// Hogwild updates on CPU, as Paddle's HogwildWorker), take batches from the dataset's channel,
// set the slot variables in their scope directly, and run the program. No Python in the loop.
//
// Distributed training hooks in through the executor's RuntimeResources (framework/runtime.h):
// kernels of every thread see them, and their step hooks run around every batch with the
// contract documented there (OnPassBegin, Before/AfterStep per batch, OnThreadEnd, OnPassEnd).
//
// Lifecycle: Start() returns at once; Wait() polls for the end (so a binding can check for
// Ctrl-C between waits); Cancel() stops early; Finish() joins every thread (trainers, readers,
// producers) and child process, and rethrows the first error: a trainer's error first (the op
// that failed), else the dataset's (the file and line).

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "data/dataset.h"
#include "framework/executor.h"

namespace fleet::trainer {

using data::Batch;
using data::BatchSource;
using data::Channel;
using data::Dataset;
using data::ReadStats;

struct TrainerOptions {
  int threads = 1;
  // Variables read after every batch: summed into TrainerResult::fetch_sums and printed.
  std::vector<std::string> fetch_names;
  std::vector<std::string> fetch_labels;  // printed names; empty = the variable names
  // Batches (over all threads) between progress lines; 0 = none.
  int64_t print_period = 100;
  bool debug = false;           // time ops per role (TrainerResult::run_stats)
  bool print_profile = false;   // and log those times at the end
  uint64_t seed = 0x5eed;       // thread t's random generator starts from seed + t
  size_t channel_capacity = 0;  // batches in flight; 0 = 2 * threads + 2
  // Receives progress lines, one call at a time, from trainer threads (and Finish()).
  std::function<void(const std::string&)> log;
};

struct TrainerResult {
  int64_t batches = 0;
  int64_t samples = 0;
  double seconds = 0;
  ReadStats read;
  // Per fetch variable: the sum of its elements over every batch (e.g. the pass's mean loss
  // is fetch_sums[i] / batches for a scalar loss).
  std::vector<double> fetch_sums;
  // Copies of the fetch variables after the last batch to finish.
  std::vector<LoDTensor> last_fetch;
  framework::RunStats run_stats;  // summed over threads; filled when debug is set
};

class MultiTrainer {
 public:
  // `executor`, `program` and `root` must outlive this object. The executor's resources (and
  // their step hooks) are those of this pass.
  MultiTrainer(const framework::Executor* executor, const framework::PreparedProgram* program,
               Scope* root, TrainerOptions options);
  ~MultiTrainer();  // cancels and joins if Finish() was not called
  MultiTrainer(const MultiTrainer&) = delete;
  MultiTrainer& operator=(const MultiTrainer&) = delete;

  // Binds the program in one scope per thread (errors surface here, before any batch), opens a
  // pass of `dataset` and starts the threads. The dataset must outlive Finish().
  void Start(Dataset* dataset);
  // Waits up to `timeout` for every trainer thread to end; true once they have.
  bool Wait(absl::Duration timeout);
  void Cancel();
  TrainerResult Finish();

 private:
  struct ThreadState;
  void TrainLoop(ThreadState* state);
  void RunBatch(ThreadState* state, const Batch& batch);
  // Announces `next`, taken `distance` batches ahead of the running one, to the hooks.
  void AnnounceNext(ThreadState* state, const Batch& next, int distance);
  void CollectFetches(ThreadState* state);
  void Report(ThreadState* state, int64_t batch_number);
  void Fail(std::exception_ptr error);
  void Log(const std::string& line);

  const framework::Executor* executor_;
  const framework::PreparedProgram* program_;
  Scope* root_;
  TrainerOptions options_;
  Dataset* dataset_ = nullptr;
  std::unique_ptr<Channel<Batch>> channel_;
  std::unique_ptr<BatchSource> source_;
  std::vector<std::unique_ptr<ThreadState>> states_;
  std::vector<std::thread> threads_;
  Scope* pass_scope_ = nullptr;
  int saved_blas_threads_ = 0;
  bool finished_ = false;
  bool pass_begun_ = false;  // OnPassBegin ran: OnPassEnd is owed
  int batches_ahead_ = 1;    // batches a trainer thread holds ahead of the running one

  std::atomic<bool> stop_{false};
  std::atomic<int> running_{0};
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> samples_{0};
  absl::Notification done_;
  absl::Time start_time_;

  absl::Mutex log_mu_;  // one log call at a time; never held with mu_
  absl::Mutex mu_;      // the first error, progress timing, last fetch values
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);
  absl::Time last_report_time_ ABSL_GUARDED_BY(mu_);
  int64_t last_report_samples_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<LoDTensor> last_fetch_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::trainer
