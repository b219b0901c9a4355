#include "data/line_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "core/errors.h"

extern char** environ;

namespace fleet::data {
namespace {

constexpr size_t kInitialBuffer = size_t{1} << 20;
constexpr size_t kMinRead = size_t{64} << 10;
constexpr size_t kStderrTail = 4096;
constexpr int kPollMillis = 100;

std::string ErrnoText() { return std::strerror(errno); }

// posix_spawn's dup2 is a no-op (close-on-exec stays set) when source and target are equal, so
// descriptors handed to the child as 0/1/2 must not already be 0/1/2.
int AboveStdio(int fd) {
  if (fd > 2) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  close(fd);
  errno = saved;
  return moved;
}

void ClosePair(int fds[2]) {
  close(fds[0]);
  close(fds[1]);
}

void MakePipe(int fds[2], const std::string& what) {
  FLEET_ENFORCE(pipe2(fds, O_CLOEXEC) == 0, Unavailable, what, ": pipe: ", ErrnoText());
  fds[0] = AboveStdio(fds[0]);
  fds[1] = AboveStdio(fds[1]);
  if (fds[0] < 0 || fds[1] < 0) {
    std::string error = ErrnoText();
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    throw Unavailable(absl::StrCat(what, ": pipe: ", error));
  }
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = strsignal(WTERMSIG(status));
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", name ? name : "?", ")");
  }
  return absl::StrCat("ended with status ", status);
}

}  // namespace

bool IsIdentityCommand(std::string_view command) {
  size_t begin = command.find_first_not_of(" \t\n\r");
  if (begin == std::string_view::npos) return false;
  size_t end = command.find_last_not_of(" \t\n\r");
  return command.substr(begin, end - begin + 1) == "cat";
}

LineStream::LineStream(std::string path, std::string pipe_command,
                       const std::atomic<bool>* cancel)
    : path_(std::move(path)),
      command_(IsIdentityCommand(pipe_command) ? "" : std::move(pipe_command)),
      cancel_(cancel),
      buffer_(kInitialBuffer) {
  int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  FLEET_ENFORCE(fd >= 0, NotFound, "cannot open data file '", path_, "': ", ErrnoText());
  struct stat info;
  if (fstat(fd, &info) != 0 || S_ISDIR(info.st_mode)) {
    close(fd);
    throw NotFound(absl::StrCat("data file '", path_, "' is a directory, not a file"));
  }
  if (command_.empty()) {
    fd_ = fd;
    return;
  }
  fd = AboveStdio(fd);
  FLEET_ENFORCE(fd >= 0, Unavailable, "data file '", path_, "': ", ErrnoText());
  try {
    StartCommand(fd);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
}

LineStream::~LineStream() {
  KillChild();
  if (fd_ >= 0) close(fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void LineStream::StartCommand(int input_fd) {
  const std::string what = absl::StrCat("pipe_command '", command_, "' on '", path_, "'");
  int out[2], err[2];
  MakePipe(out, what);
  try {
    MakePipe(err, what);
  } catch (...) {
    ClosePair(out);
    throw;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input_fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group (to kill a pipeline at once), no blocked signals, and SIGPIPE back to its
  // default: Python ignores SIGPIPE and ignored signals survive exec.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string sh = "/bin/sh", dash_c = "-c";
  char* argv[] = {sh.data(), dash_c.data(), command_.data(), nullptr};
  int rc = posix_spawn(&child_, "/bin/sh", &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    child_ = -1;
    close(out[0]);
    close(err[0]);
    throw Unavailable(absl::StrCat(what, ": cannot start /bin/sh: ", std::strerror(rc)));
  }
  fd_ = out[0];
  err_fd_ = err[0];
}

bool LineStream::Next(std::string_view* line) {
  for (;;) {
    const char* base = buffer_.data();
    const void* nl = std::memchr(base + begin_, '\n', end_ - begin_);
    if (nl != nullptr) {
      size_t pos = static_cast<const char*>(nl) - base;
      *line = std::string_view(base + begin_, pos - begin_);
      begin_ = pos + 1;
      ++line_number_;
      return true;
    }
    if (eof_) {
      if (begin_ == end_) return false;
      *line = std::string_view(base + begin_, end_ - begin_);  // last line without '\n'
      begin_ = end_;
      ++line_number_;
      return true;
    }
    if (cancelled()) return false;
    if (begin_ > 0) {
      std::memmove(buffer_.data(), base + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buffer_.size() - end_ < kMinRead) buffer_.resize(buffer_.size() * 2);
    size_t n = Fill();
    if (n == 0) {
      if (cancelled()) return false;
      eof_ = true;
      if (child_ > 0) WaitForChild();
    }
    end_ += n;
    bytes_read_ += static_cast<int64_t>(n);
  }
}

size_t LineStream::Fill() {
  if (child_ > 0) return ReadChild();
  for (;;) {
    ssize_t n = read(fd_, buffer_.data() + end_, buffer_.size() - end_);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) throw Unavailable(absl::StrCat("reading '", path_, "': ", ErrnoText()));
  }
}

size_t LineStream::ReadChild() {
  for (;;) {
    if (cancelled()) return 0;
    pollfd fds[2] = {{fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    int rc = poll(fds, err_fd_ >= 0 ? 2 : 1, kPollMillis);
    if (rc < 0 && errno != EINTR) {
      throw Unavailable(absl::StrCat("waiting for pipe_command on '", path_, "': ", ErrnoText()));
    }
    if (rc <= 0) continue;
    if (err_fd_ >= 0 && fds[1].revents != 0) DrainStderr(false);
    if (fds[0].revents != 0) {
      ssize_t n = read(fd_, buffer_.data() + end_, buffer_.size() - end_);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR && errno != EAGAIN) {
        throw Unavailable(absl::StrCat("reading the output of pipe_command '", command_,
                                       "' on '", path_, "': ", ErrnoText()));
      }
    }
  }
}

// Reads what the child wrote to stderr, keeping the tail. With `block` false it reads once.
void LineStream::DrainStderr(bool block) {
  char chunk[4096];
  do {
    if (err_fd_ < 0) return;
    if (block) {
      pollfd fds = {err_fd_, POLLIN, 0};
      if (poll(&fds, 1, 0) <= 0) return;  // nothing more without waiting (writer still open)
    }
    ssize_t n = read(err_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(err_fd_);
      err_fd_ = -1;
      return;
    }
    stderr_tail_.append(chunk, static_cast<size_t>(n));
    if (stderr_tail_.size() > 2 * kStderrTail) {
      stderr_tail_.erase(0, stderr_tail_.size() - kStderrTail);
    }
  } while (block);
}

void LineStream::WaitForChild() {
  int status = 0;
  for (;;) {
    pid_t r = waitpid(child_, &status, WNOHANG);
    if (r == child_) break;
    if (r < 0 && errno != EINTR) {
      throw Internal(absl::StrCat("waitpid for pipe_command on '", path_, "': ", ErrnoText()));
    }
    if (cancelled()) return;  // the destructor kills it
    pollfd fds = {err_fd_, POLLIN, 0};
    if (err_fd_ >= 0 && poll(&fds, 1, kPollMillis) > 0) {
      DrainStderr(false);
    } else if (err_fd_ < 0) {
      poll(nullptr, 0, 10);
    }
  }
  child_ = -1;
  DrainStderr(true);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::string tail = stderr_tail_.size() > kStderrTail
                         ? stderr_tail_.substr(stderr_tail_.size() - kStderrTail)
                         : stderr_tail_;
  tail.erase(tail.find_last_not_of(" \t\n\r") + 1);
  throw InvalidArgument(absl::StrCat(
      "pipe_command '", command_, "' ", DescribeStatus(status), " on file '", path_, "' after ",
      bytes_read_, " bytes of output; ",
      tail.empty() ? "its stderr was empty" : absl::StrCat("its stderr ends with:\n", tail)));
}

void LineStream::KillChild() {
  if (child_ <= 0) return;
  kill(-child_, SIGKILL);  // the whole process group: sh and everything it started
  while (waitpid(child_, nullptr, 0) < 0 && errno == EINTR) {
  }
  child_ = -1;
}

}  // namespace fleet::data
