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

}  // namespace detail

Future Future::Failed(absl::Status status) {
  auto state = std::make_shared<detail::CallState>(1);
  state->Done(std::move(status));
  return Future(std::move(state));
}

}  // namespace fleet::ps
