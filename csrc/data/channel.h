#pragma once
// Channel<T>: a bounded multi-producer multi-consumer queue with close semantics; the pipe from
// reader threads to trainer threads.
//
// Contract:
// - Put blocks while the channel is full and open; Get blocks while it is empty and open.
// - Close() ends the stream: a later (or blocked) Put returns false and drops its item; Gets
//   drain what is queued and then return std::nullopt. Close wakes every waiter; idempotent.
// - The timed forms throw fleet::Timeout naming the channel when the deadline passes first.
//   Blocking forms without a timeout rely on Close() to wake them: whoever owns a channel must
//   close it on every path (normal end, error, cancellation).
// - Items come out in the order they went in (FIFO across all producers).
// All methods are thread-safe.

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/errors.h"

namespace fleet::data {

template <typename T>
class Channel {
 public:
  explicit Channel(size_t capacity, std::string name = "channel")
      : capacity_(capacity), name_(std::move(name)) {
    FLEET_ENFORCE(capacity > 0, InvalidArgument, name_, ": capacity must be positive");
  }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Queues `item`, waiting for room. Returns false (item dropped) if the channel is closed.
  bool Put(T item) { return PutUntil(std::move(item), absl::InfiniteFuture()); }
  bool Put(T item, absl::Duration timeout) {
    return PutUntil(std::move(item), absl::Now() + timeout);
  }

  // The oldest item, waiting for one; std::nullopt once the channel is closed and drained.
  std::optional<T> Get() { return GetUntil(absl::InfiniteFuture()); }
  std::optional<T> Get(absl::Duration timeout) { return GetUntil(absl::Now() + timeout); }
  // An item if one is there now; nullopt otherwise (empty, open or closed), without waiting.
  std::optional<T> TryGet() {
    absl::MutexLock lock(&mu_);
    if (items_.empty()) return std::nullopt;
    std::optional<T> out(std::move(items_.front()));
    items_.pop_front();
    return out;
  }

  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }
  const std::string& name() const { return name_; }

 private:
  bool PutUntil(T item, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return closed_ || items_.size() < capacity_;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
      throw Timeout(absl::StrCat(name_, ": Put timed out with ", items_.size(), " of ", capacity_,
                                 " slots full (is a consumer running?)"));
    }
    if (closed_) return false;
    items_.push_back(std::move(item));
    return true;
  }

  std::optional<T> GetUntil(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return closed_ || !items_.empty(); };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
      throw Timeout(absl::StrCat(name_,
                                 ": Get timed out on an empty open channel (is a "
                                 "producer running?)"));
    }
    if (items_.empty()) return std::nullopt;
    std::optional<T> out(std::move(items_.front()));
    items_.pop_front();
    return out;
  }

  const size_t capacity_;
  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<T> items_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fleet::data
