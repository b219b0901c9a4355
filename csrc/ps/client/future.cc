#include "ps/client/future.h"

namespace fleet::ps {
namespace detail {

void CallState::Complete() {
  if (status_.ok() && finisher_) finisher_();
  finisher_ = nullptr;
  done_ = true;
}

void CallState::SetFinisher(std::function<void()> finisher) {
  absl::MutexLock lock(&mu_);
  finisher_ = std::move(finisher);
}

void CallState::AddPending(int n) {
  absl::MutexLock lock(&mu_);
  pending_ += n;
}

void CallState::Done(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (status_.ok() && !status.ok()) status_ = std::move(status);
  if (--pending_ == 0) Complete();
}

void CallState::CompleteNow() {
  absl::MutexLock lock(&mu_);
  Complete();
}

absl::Status CallState::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return status_;
}

bool CallState::WaitFor(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
}

bool CallState::Ready() {
  absl::MutexLock lock(&mu_);
  return done_;
}

void CallState::Track(const void* rpc, std::function<void()> cancel) {
  absl::MutexLock lock(&cancel_mu_);
  cancels_.emplace_back(rpc, std::move(cancel));
}

void CallState::Untrack(const void* rpc) {
  absl::MutexLock lock(&cancel_mu_);
  for (size_t i = 0; i < cancels_.size(); ++i) {
    if (cancels_[i].first != rpc) continue;
    cancels_[i] = std::move(cancels_.back());
    cancels_.pop_back();
    return;
  }
}

void CallState::Cancel() {
  // Under the lock: an RPC cannot be freed (Untrack first) while it is being cancelled.
  absl::MutexLock lock(&cancel_mu_);
  for (auto& [rpc, cancel] : cancels_) cancel();
}

}  // namespace detail

Future Future::Failed(absl::Status status) {
  auto state = std::make_shared<detail::CallState>(1);
  state->Done(std::move(status));
  return Future(std::move(state));
}

}  // namespace fleet::ps
