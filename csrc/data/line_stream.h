#pragma once
// LineStream: the lines of one input file, read directly or as the standard output of
// `/bin/sh -c <pipe_command>` run with the file as its standard input (Paddle's pipe_command).
//
// The command runs in its own process group under a small guard process (forked, not exec'd),
// so that a whole pipeline (`sh -c "a | b"`) goes at once: the destructor, a cancel and an idle
// timeout kill the group, and the guard kills it when the process that started it dies, even by
// SIGKILL (PR_SET_PDEATHSIG reaches the guard, which outlives sh's own children otherwise).
// Its stderr is read alongside stdout (no deadlock on a chatty child) and the last few KiB are
// kept for the error message. No process outlives its stream.

#include <sys/types.h>

#include <atomic>
#include <chrono>  // steady_clock: the idle check must not follow the wall clock
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

namespace fleet::data {

struct LineStreamOptions {
  // A command that writes nothing to stdout for this long (and has not exited) is killed, and
  // Next() throws Timeout naming the file and the command.
  absl::Duration idle_timeout = absl::Minutes(10);
  // Told (from the reading thread) when a command wrote nothing at all for a non-empty file,
  // which usually means a reader that skips every line. Null: no warning.
  std::function<void(const std::string&)> warn;
};

class LineStream {
 public:
  // Opens `path` (NotFound naming it if that fails) and, when `pipe_command` is not empty,
  // starts the command (Unavailable if it cannot be started). `cancel`, if not null, is polled
  // while waiting on the child: once it is true, Next() returns false.
  LineStream(std::string path, std::string pipe_command, const std::atomic<bool>* cancel,
             LineStreamOptions options = {});
  ~LineStream();
  LineStream(const LineStream&) = delete;
  LineStream& operator=(const LineStream&) = delete;

  // The next line without its '\n' (valid until the next call), or false at the end of the
  // input or on cancellation. At the end of a command's output, waits for the command: a
  // non-zero exit or death by a signal throws InvalidArgument naming the file, the command and
  // the tail of its stderr. Read errors throw Unavailable naming the file; a command idle for
  // options.idle_timeout throws Timeout.
  bool Next(std::string_view* line);

  // 1-based number of the line last returned.
  int64_t line_number() const { return line_number_; }
  // Bytes of input consumed so far (the command's output when there is one).
  int64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }

 private:
  void StartCommand(int input_fd);
  // Reads more bytes into the buffer; returns 0 at the end of the input.
  size_t Fill();
  size_t ReadChild();
  void DrainStderr(bool block);
  void WaitForChild();
  void KillChild();
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(); }

  // Throws Timeout when the command has been silent for longer than the idle timeout.
  void CheckIdle();
  std::string Describe() const;

  std::string path_;
  std::string command_;
  const std::atomic<bool>* cancel_;
  LineStreamOptions options_;
  int64_t file_bytes_ = 0;
  std::chrono::steady_clock::time_point last_output_;
  int fd_ = -1;       // the file, or the read end of the child's stdout
  int err_fd_ = -1;   // the read end of the child's stderr
  pid_t child_ = -1;  // the guard: leader of the command's process group
  std::string stderr_tail_;
  std::vector<char> buffer_;
  size_t begin_ = 0;  // start of unread bytes in buffer_
  size_t end_ = 0;    // end of valid bytes in buffer_
  bool eof_ = false;
  int64_t line_number_ = 0;
  int64_t bytes_read_ = 0;
};

// True when `command` can be skipped: it only copies stdin to stdout ("cat", Paddle's default).
bool IsIdentityCommand(std::string_view command);

}  // namespace fleet::data
