#pragma once
// A handle on an asynchronous client call made of one or more RPCs.

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fleet::ps {
namespace detail {

// Shared by a Future and the RPC callbacks of its call. Thread-safe.
class CallState {
 public:
  // `cancellable`: Launch registers each RPC of the call while it is in flight, so that
  // Cancel can reach it.
  explicit CallState(int pending, bool cancellable = false)
      : cancellable_(cancellable), pending_(pending) {}
  // Runs once after every RPC succeeded, before waiters wake (e.g. to copy repeated rows).
  // Must be set while the call cannot complete yet (some pending count is still held).
  void SetFinisher(std::function<void()> finisher);
  // Adds RPCs to wait for; only while the call cannot complete yet.
  void AddPending(int n);
  // Records the outcome of one RPC; the first error wins. The last one completes the call.
  void Done(absl::Status status);
  // Completes a call that launched no RPC (must be called when the pending count was 0).
  void CompleteNow();
  absl::Status Wait();
  bool WaitFor(absl::Duration timeout);
  bool Ready();

  // A cancellable call's RPCs: Launch tracks each one (`cancel` cancels it) before starting it
  // and untracks it before freeing it; Cancel cancels those still in flight, which then end
  // CANCELLED through their callbacks (gRPC does not run a callback inside TryCancel).
  bool cancellable() const { return cancellable_; }
  void Track(const void* rpc, std::function<void()> cancel);
  void Untrack(const void* rpc);
  void Cancel();

 private:
  void Complete() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool cancellable_;
  absl::Mutex cancel_mu_;
  std::vector<std::pair<const void*, std::function<void()>>> cancels_ ABSL_GUARDED_BY(cancel_mu_);

  absl::Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::function<void()> finisher_ ABSL_GUARDED_BY(mu_);
};

}  // namespace detail

// Wait() blocks until every RPC of the call has completed, and returns the first error, which
// names the server's endpoint. Every RPC has a deadline, so Wait() returns within about the
// call's timeout even when a server hangs. Copyable; any copy may wait, from any thread.
class Future {
 public:
  explicit Future(std::shared_ptr<detail::CallState> state) : state_(std::move(state)) {}
  // A future that is already complete with `status`.
  static Future Failed(absl::Status status);

  absl::Status Wait() const { return state_->Wait(); }
  // Waits up to `timeout`; true when the call completed (then Wait() returns at once).
  bool WaitFor(absl::Duration timeout) const { return state_->WaitFor(timeout); }
  bool Ready() const { return state_->Ready(); }

 private:
  std::shared_ptr<detail::CallState> state_;
};

}  // namespace fleet::ps
