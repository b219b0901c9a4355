#pragma once
// FileReaders: reader threads that turn a list of files into parsed SampleBlocks.
//
// Each thread takes the next unread file (one file per thread at a time), streams its lines
// (through pipe_command if set), parses them with the MultiSlot parser and hands blocks of up to
// `block_samples` samples to the sink. The first error (missing or unreadable file, malformed
// line without skip_bad_lines, failing pipe_command) stops every reader; Join() rethrows it.

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/thread_priority.h"
#include "data/slots.h"

namespace fleet::data {

struct ReaderOptions {
  std::string pipe_command;  // empty or "cat": read the file directly
  // How long a pipe_command may write nothing before it is killed (Timeout naming the file).
  absl::Duration pipe_idle_timeout = absl::Minutes(10);
  // Non-fatal findings (a pipe_command that wrote nothing for a non-empty file), from any
  // reader thread. Null: dropped.
  std::function<void(const std::string&)> warn;
  int threads = 1;
  bool skip_bad_lines = false;
  size_t block_samples = 512;
  // A block never spans two files, so (file index, block sequence) orders the blocks the way
  // the files order the lines. Queue mode lets a partial block carry on into the next file.
  bool block_per_file = false;
  // The reader threads' priority (core/thread_priority.h): a pass's readers feed a trainer and
  // only need to stay ahead of it; a load into memory has its caller waiting and keeps kNormal.
  ThreadPriority priority = ThreadPriority::kNormal;
};

// What a pass of readers saw. bad_line_examples keeps the first few skipped lines' errors.
struct ReadStats {
  int64_t files = 0;
  int64_t lines = 0;
  int64_t samples = 0;
  int64_t bad_lines = 0;
  int64_t bytes = 0;
  std::vector<std::string> bad_line_examples;
  bool interrupted = false;  // stopped by the caller before the end (see LoadIntoMemory)
};

// Receives a full block, from any reader thread (so it must be thread-safe). `file_index` and
// `sequence` locate the block when block_per_file is set. Returning false stops the readers
// (the consumer is gone); that is not an error.
using BlockSink = std::function<bool(SampleBlock&& block, size_t file_index, size_t sequence)>;

// Throws InvalidArgument for an empty list and NotFound naming every file that does not exist
// or is not a regular file, so that a pass fails before it starts.
void CheckFiles(const std::vector<std::string>& files);

// Names the calling feed thread (what `top -H`, perf and cpu_window.py show) and gives it
// `priority`. A refusal is not an error (the priority changes speed, not results): it goes to
// `warn` once per `warned` flag, so that a pass of many threads says it once.
void EnterFeedThread(const char* name, ThreadPriority priority,
                     const std::function<void(const std::string&)>& warn,
                     std::atomic<bool>* warned);

class FileReaders {
 public:
  // `slots` must outlive this object. `on_finish` runs once, on the last reader thread to end
  // (after success, error or cancellation): queue datasets close their channel there.
  FileReaders(std::vector<std::string> files, const std::vector<SlotSpec>* slots,
              ReaderOptions options, BlockSink sink, std::function<void()> on_finish = nullptr);
  ~FileReaders();  // cancels and joins
  FileReaders(const FileReaders&) = delete;
  FileReaders& operator=(const FileReaders&) = delete;

  void Start();
  // Asks every reader to stop soon (between lines); running pipe commands are killed.
  void Cancel() { cancel_.store(true); }
  bool failed() const { return failed_.load(); }
  // True once every reader thread has ended, waiting at most `timeout` for it (so that a caller
  // can poll for an interrupt in between).
  bool WaitFor(absl::Duration timeout);
  // Waits for every reader thread; rethrows the first error; returns the counters.
  ReadStats Join();

 private:
  void ReaderLoop();
  void ReadFile(size_t index, SampleBlock* block, size_t* sequence, ReadStats* stats);
  bool Emit(SampleBlock* block, size_t file_index, size_t* sequence);
  void RecordBadLine(const std::string& message, ReadStats* stats);

  const std::vector<std::string> files_;
  const std::vector<SlotSpec>* slots_;
  const ReaderOptions options_;
  BlockSink sink_;
  std::function<void()> on_finish_;
  std::atomic<size_t> next_file_{0};
  std::atomic<bool> cancel_{false};
  std::atomic<bool> failed_{false};
  std::atomic<int> running_{0};
  std::atomic<bool> priority_warned_{false};
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);
  ReadStats stats_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;  // reader threads that have ended
};

}  // namespace fleet::data
