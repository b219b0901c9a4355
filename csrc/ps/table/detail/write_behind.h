#pragma once
// Writes buffers out on a thread of its own, one at a time and in order, while the caller fills
// the next: a table save packs rows (user time) while the kernel copies the previous buffer into
// the page cache (system time), instead of one after the other.

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"

namespace fleet::ps::detail {

class WriteBehind {
 public:
  // `write` runs on the writer thread, once per submitted buffer, in order. After its first
  // error no further buffer is written and every later call returns that error. When no thread
  // can be had (a process at its thread or address-space limit), Submit writes on the calling
  // thread instead: the thread is a speed-up, not a need.
  WriteBehind(size_t buffer_bytes, std::function<absl::Status(const char*, size_t)> write);
  ~WriteBehind();  // waits for the buffer in flight; an error it meets is dropped
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  // Takes `*buffer`'s first `bytes` to be written and hands back in `*buffer` a free buffer of
  // `buffer_bytes` (the one written before); waits while a buffer is still in flight.
  absl::Status Submit(std::unique_ptr<char[]>* buffer, size_t bytes);
  // Waits until every submitted buffer is written; the first error.
  absl::Status Drain();

 private:
  void Loop();

  const std::function<absl::Status(const char*, size_t)> write_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<char[]> spare_;  // the caller's next buffer, while nothing is in flight
  std::unique_ptr<char[]> job_;    // in flight: being written, or about to be
  size_t job_bytes_ = 0;
  bool stop_ = false;
  absl::Status status_;
  std::thread thread_;  // not joinable when none could be had
};

}  // namespace fleet::ps::detail
