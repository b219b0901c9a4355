#include "data/line_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "core/errors.h"
#include "data/printable.h"

extern char** environ;

namespace fleet::data {
namespace {

constexpr size_t kInitialBuffer = size_t{1} << 20;
constexpr size_t kMinRead = size_t{64} << 10;
constexpr size_t kStderrTail = 4096;
constexpr int kPollMillis = 100;

std::string ErrnoText() { return std::strerror(errno); }

// dup2 is a no-op (close-on-exec stays set) when source and target are equal, so
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

LineStream::LineStream(std::string path, std::string pipe_command, const std::atomic<bool>* cancel,
                       LineStreamOptions options)
    : path_(std::move(path)),
      command_(IsIdentityCommand(pipe_command) ? "" : std::move(pipe_command)),
      cancel_(cancel),
      options_(std::move(options)),
      buffer_(kInitialBuffer) {
  int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  FLEET_ENFORCE(fd >= 0, NotFound, "cannot open data file '", path_, "': ", ErrnoText());
  struct stat info;
  if (fstat(fd, &info) != 0 || S_ISDIR(info.st_mode)) {
    close(fd);
    throw NotFound(absl::StrCat("data file '", path_, "' is a directory, not a file"));
  }
  file_bytes_ = static_cast<int64_t>(info.st_size);
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

namespace {

// The guard, in the forked child: leader of a new process group, it starts /bin/sh -c <command>
// in that group and mirrors its exit status. When the process that started it dies (SIGTERM
// from PR_SET_PDEATHSIG, or a changed parent seen by polling) or it is told to stop, it kills
// the whole group, itself included. Runs between fork and exec in a threaded process, so it
// only makes async-signal-safe calls and never allocates.
[[noreturn]] void RunGuard(pid_t parent, int input_fd, int out_fd, int err_fd, char** argv) {
  // input_fd, out_fd and err_fd are above 2 (AboveStdio), so the dup2 calls cannot clobber them.
  setpgid(0, 0);
  // Only the command's three descriptors stay open: the guard does not exec, so close-on-exec
  // does not apply, and a copy of another stream's pipe (or a socket) kept here would hold
  // that stream (or connection) open until this command ends.
  dup2(input_fd, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  if (close_range(3, ~0U, 0) != 0) {
    for (int fd = 3; fd < 65536; ++fd) close(fd);
  }
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);  // signals are taken with sigtimedwait below
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // e.g. SIGCHLD ignored
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(127);  // the parent died before the line above
  pid_t sh = _Fork();
  if (sh == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve("/bin/sh", argv, environ);
    _exit(127);
  }
  if (sh < 0) _exit(127);
  close(0);
  close(1);
  close(2);
  sigset_t wanted;
  sigemptyset(&wanted);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&wanted, sig);
  const timespec second = {1, 0};
  for (;;) {
    int sig = sigtimedwait(&wanted, nullptr, &second);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || getppid() != parent) {
      kill(0, SIGKILL);  // the whole group, this guard included
      _exit(137);
    }
    int status = 0;
    if (waitpid(sh, &status, WNOHANG) != sh) continue;
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    // Report a death by signal as one: the same signal, unblocked, with its default action.
    const int term = WTERMSIG(status);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, term);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    kill(getpid(), term);
    _exit(128 + term);
  }
}

}  // namespace

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
  std::string sh = "/bin/sh", dash_c = "-c";
  char* argv[] = {sh.data(), dash_c.data(), command_.data(), nullptr};
  const pid_t parent = getpid();
  // _Fork: no atfork handlers (gRPC and others register some) run in a child that only execs.
  const pid_t guard = _Fork();
  if (guard == 0) RunGuard(parent, input_fd, out[1], err[1], argv);
  const int fork_errno = errno;
  close(out[1]);
  close(err[1]);
  if (guard < 0) {
    close(out[0]);
    close(err[0]);
    throw Unavailable(absl::StrCat(what, ": cannot start /bin/sh: ", std::strerror(fork_errno)));
  }
  // Also set here, so that a kill of the group right after _Fork cannot miss the guard.
  setpgid(guard, guard);
  child_ = guard;
  fd_ = out[0];
  err_fd_ = err[0];
  last_output_ = std::chrono::steady_clock::now();
}

std::string LineStream::Describe() const {
  return absl::StrCat("pipe_command '", command_, "' on file '", path_, "'");
}

void LineStream::CheckIdle() {
  const auto idle = std::chrono::steady_clock::now() - last_output_;
  if (absl::FromChrono(idle) <= options_.idle_timeout) return;
  KillChild();
  throw Timeout(
      absl::StrCat(Describe(), " wrote nothing for ", absl::ToDoubleSeconds(options_.idle_timeout),
                   " s (after ", bytes_read_,
                   " bytes of output) and was killed; raise the limit with "
                   "dataset.set_pipe_command_timeout(seconds) if the command is only slow"));
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
    CheckIdle();
    pollfd fds[2] = {{fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    int rc = poll(fds, err_fd_ >= 0 ? 2 : 1, kPollMillis);
    if (rc < 0 && errno != EINTR) {
      throw Unavailable(absl::StrCat("waiting for pipe_command on '", path_, "': ", ErrnoText()));
    }
    if (rc <= 0) continue;
    if (err_fd_ >= 0 && fds[1].revents != 0) DrainStderr(false);
    if (fds[0].revents != 0) {
      ssize_t n = read(fd_, buffer_.data() + end_, buffer_.size() - end_);
      if (n > 0) last_output_ = std::chrono::steady_clock::now();
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR && errno != EAGAIN) {
        throw Unavailable(absl::StrCat("reading the output of pipe_command '", command_, "' on '",
                                       path_, "': ", ErrnoText()));
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
  for (;;) {
    // Wait without reaping: while the guard is a zombie its group id cannot be reused, so the
    // kill of leftovers (background jobs the command started) below hits only them.
    siginfo_t info{};
    int r = waitid(P_PID, static_cast<id_t>(child_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == child_) break;
    if (r < 0 && errno != EINTR) {
      throw Internal(absl::StrCat("waitid for pipe_command on '", path_, "': ", ErrnoText()));
    }
    if (cancelled()) return;  // the destructor kills it
    CheckIdle();              // output ended, but the command does not exit
    pollfd fds = {err_fd_, POLLIN, 0};
    if (err_fd_ >= 0 && poll(&fds, 1, kPollMillis) > 0) {
      DrainStderr(false);
    } else if (err_fd_ < 0) {
      poll(nullptr, 0, 10);
    }
  }
  kill(-child_, SIGKILL);
  int status = 0;
  while (waitpid(child_, &status, 0) < 0 && errno == EINTR) {
  }
  child_ = -1;
  DrainStderr(true);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    if (bytes_read_ == 0 && file_bytes_ > 0 && options_.warn) {
      options_.warn(absl::StrCat(Describe(), " wrote nothing for a file of ", file_bytes_,
                                 " bytes: check that the command reads its standard input and "
                                 "prints MultiSlot lines"));
    }
    return;
  }
  std::string tail = stderr_tail_.size() > kStderrTail
                         ? stderr_tail_.substr(stderr_tail_.size() - kStderrTail)
                         : stderr_tail_;
  tail.erase(tail.find_last_not_of(" \t\n\r") + 1);
  throw InvalidArgument(absl::StrCat(
      "pipe_command '", command_, "' ", DescribeStatus(status), " on file '", path_, "' after ",
      bytes_read_, " bytes of output; ",
      tail.empty() ? "its stderr was empty"
                   : absl::StrCat("its stderr ends with:\n", PrintableBytes(tail, true))));
}

void LineStream::KillChild() {
  if (child_ <= 0) return;
  kill(-child_, SIGKILL);  // the whole process group: sh and everything it started
  while (waitpid(child_, nullptr, 0) < 0 && errno == EINTR) {
  }
  child_ = -1;
}

}  // namespace fleet::data
