#include "ps/table/detail/write_behind.h"

#include <system_error>
#include <utility>

namespace fleet::ps::detail {

WriteBehind::WriteBehind(size_t buffer_bytes,
                         std::function<absl::Status(const char*, size_t)> write)
    : write_(std::move(write)), spare_(new char[buffer_bytes]) {
  try {
    thread_ = std::thread(&WriteBehind::Loop, this);
  } catch (const std::system_error&) {
    // No thread to be had: Submit writes on the caller's thread.
  }
}

WriteBehind::~WriteBehind() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // Loop finishes the buffer in flight first
}

void WriteBehind::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return job_ != nullptr || stop_; });
    if (job_ == nullptr) return;
    const bool failed = !status_.ok();
    lock.unlock();
    // job_ stays put while it is in flight: Submit waits for it to be handed back.
    absl::Status status = failed ? absl::OkStatus() : write_(job_.get(), job_bytes_);
    lock.lock();
    if (status_.ok()) status_ = std::move(status);
    spare_ = std::move(job_);
    cv_.notify_all();
  }
}

absl::Status WriteBehind::Submit(std::unique_ptr<char[]>* buffer, size_t bytes) {
  if (!thread_.joinable()) {
    if (status_.ok()) status_ = write_(buffer->get(), bytes);
    return status_;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return job_ == nullptr; });
  if (!status_.ok()) return status_;
  job_ = std::move(*buffer);
  job_bytes_ = bytes;
  *buffer = std::move(spare_);
  cv_.notify_all();
  return absl::OkStatus();
}

absl::Status WriteBehind::Drain() {
  if (!thread_.joinable()) return status_;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return job_ == nullptr; });
  return status_;
}

}  // namespace fleet::ps::detail
