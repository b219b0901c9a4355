#include "core/crash_report.h"

#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "absl/debugging/symbolize.h"

namespace fleet {
namespace {

// Everything below runs inside a signal handler: only async-signal-safe calls (write, open,
// read, prctl, raise, sigaction), fixed buffers, no allocation. glibc's backtrace() is safe once
// libgcc's unwinder is loaded, which InstallCrashReport makes sure of; absl::Symbolize is
// written to be called from a signal handler.

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int kSignalCount = sizeof(kSignals) / sizeof(kSignals[0]);
constexpr int kMaxFrames = 64;

// The process-wide state a signal handler needs (there is one set of handlers per process):
// written by InstallCrashReport before the handlers are installed, read-only afterwards.
struct HandlerState {
  struct sigaction previous[kSignalCount];
  char program[128];
};
HandlerState g_state;
std::once_flag g_install_once;
std::atomic<bool> g_installed{false};
// The thread writing a report (0: none), so a second crashing thread waits for the first one's
// report instead of interleaving with it.
std::atomic<long> g_reporting_thread{0};

// One line of the report, built in a fixed buffer and written with one write(2).
class Line {
 public:
  Line& operator<<(const char* text) {
    while (*text != '\0' && size_ < sizeof(buffer_)) buffer_[size_++] = *text++;
    return *this;
  }
  Line& Hex(uintptr_t value) {
    char digits[2 * sizeof(value)];
    int n = 0;
    do {
      digits[n++] = "0123456789abcdef"[value & 0xf];
      value >>= 4;
    } while (value != 0);
    *this << "0x";
    while (n > 0 && size_ < sizeof(buffer_)) buffer_[size_++] = digits[--n];
    return *this;
  }
  Line& Decimal(long value) {
    char digits[24];
    int n = 0;
    const bool negative = value < 0;
    unsigned long magnitude = negative ? 0UL - static_cast<unsigned long>(value) : value;
    do {
      digits[n++] = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude != 0);
    if (negative) *this << "-";
    while (n > 0 && size_ < sizeof(buffer_)) buffer_[size_++] = digits[--n];
    return *this;
  }
  void Write() {
    size_t done = 0;
    while (done < size_) {
      const ssize_t n = write(STDERR_FILENO, buffer_ + done, size_ - done);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

 private:
  char buffer_[1024];
  size_t size_ = 0;
};

const char* SignalName(int signo) {
  switch (signo) {
    case SIGSEGV:
      return "SIGSEGV (invalid memory access)";
    case SIGBUS:
      return "SIGBUS (bus error)";
    case SIGILL:
      return "SIGILL (illegal instruction)";
    case SIGFPE:
      return "SIGFPE (arithmetic fault)";
    case SIGABRT:
      return "SIGABRT (abort)";
  }
  return "a fatal signal";
}

uintptr_t ParseHex(const char** text) {
  uintptr_t value = 0;
  while (true) {
    const char c = **text;
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return value;
    }
    value = value * 16 + static_cast<uintptr_t>(digit);
    ++*text;
  }
}

// Finds the mapping of /proc/self/maps that holds `pc`: its file (into `path`) and the offset
// of `pc` in that file. False when no file mapping holds it (JIT code, a wild jump).
bool FindObject(uintptr_t pc, char* path, size_t path_size, uintptr_t* offset) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char chunk[4096];
  char line[512];
  size_t line_size = 0;
  bool found = false;
  ssize_t n;
  while (!found && (n = read(fd, chunk, sizeof(chunk))) > 0) {
    for (ssize_t i = 0; i < n && !found; ++i) {
      if (chunk[i] != '\n') {
        if (line_size + 1 < sizeof(line)) line[line_size++] = chunk[i];
        continue;
      }
      line[line_size] = '\0';
      line_size = 0;
      // "start-end perms offset dev inode   path"
      const char* p = line;
      const uintptr_t start = ParseHex(&p);
      if (*p++ != '-') continue;
      const uintptr_t end = ParseHex(&p);
      if (pc < start || pc >= end) continue;
      while (*p == ' ') ++p;
      while (*p != '\0' && *p != ' ') ++p;  // perms
      while (*p == ' ') ++p;
      const uintptr_t file_offset = ParseHex(&p);
      for (int field = 0; field < 2; ++field) {  // dev, inode
        while (*p == ' ') ++p;
        while (*p != '\0' && *p != ' ') ++p;
      }
      while (*p == ' ') ++p;
      if (*p != '/') break;  // anonymous, [stack], [vdso]: no file to name
      size_t k = 0;
      while (p[k] != '\0' && k + 1 < path_size) {
        path[k] = p[k];
        ++k;
      }
      path[k] = '\0';
      *offset = pc - start + file_offset;
      found = true;
    }
  }
  close(fd);
  return found;
}

uintptr_t InterruptedPc(const void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}

void WriteReport(int signo, const siginfo_t* info, const void* context) {
  char thread_name[17] = {};
  prctl(PR_GET_NAME, thread_name, 0, 0, 0);
  Line head;
  head << "\n*** Fleet native crash report (" << g_state.program << "): " << SignalName(signo);
  if (info != nullptr && info->si_code > 0 && signo != SIGABRT) {
    head << " at address ";
    head.Hex(reinterpret_cast<uintptr_t>(info->si_addr));
  }
  head << " in thread ";
  head.Decimal(static_cast<long>(syscall(SYS_gettid)));
  head << " '" << thread_name << "' of process ";
  head.Decimal(static_cast<long>(getpid()));
  head << " ***\nC++ stack of that thread (most recent call first):\n";
  head.Write();

  void* frames[kMaxFrames];
  const int count = backtrace(frames, kMaxFrames);
  // The first frames are this handler's and the kernel's signal trampoline: start at the
  // interrupted instruction when it is among the frames.
  const uintptr_t interrupted = context != nullptr ? InterruptedPc(context) : 0;
  int first = 0;
  for (int i = 0; i < count; ++i) {
    if (reinterpret_cast<uintptr_t>(frames[i]) == interrupted) {
      first = i;
      break;
    }
  }
  for (int i = first; i < count; ++i) {
    const uintptr_t pc = reinterpret_cast<uintptr_t>(frames[i]);
    // Frames below the first hold return addresses, one past their call: look up the call.
    const uintptr_t lookup = (i == first) ? pc : pc - 1;
    char symbol[512];
    char object[256];
    uintptr_t offset = 0;
    Line frame;
    frame << "  #";
    frame.Decimal(i - first);
    frame << " ";
    frame.Hex(pc);
    frame << " "
          << (absl::Symbolize(reinterpret_cast<void*>(lookup), symbol, sizeof(symbol)) ? symbol
                                                                                       : "??");
    if (FindObject(lookup, object, sizeof(object), &offset)) {
      frame << "  (" << object << " +";
      frame.Hex(offset);
      frame << ")";
    }
    frame << "\n";
    frame.Write();
  }
  Line tail;
  tail << "*** end of the C++ stack; the signal goes on to the previous handler (Python's "
          "faulthandler, when enabled, prints the Python stacks) ***\n";
  tail.Write();
}

void OnFatalSignal(int signo, siginfo_t* info, void* context) {
  const long self = static_cast<long>(syscall(SYS_gettid));
  long expected = 0;
  if (g_reporting_thread.compare_exchange_strong(expected, self)) {
    WriteReport(signo, info, context);
  } else if (expected != self) {
    // Another thread is reporting its crash, and will end the process: leave it the stderr.
    timespec wait{3, 0};
    nanosleep(&wait, nullptr);
  }
  // (expected == self: a crash inside this report; skip straight to the previous handler.)
  for (int k = 0; k < kSignalCount; ++k) {
    if (kSignals[k] == signo) sigaction(signo, &g_state.previous[k], nullptr);
  }
  // A signal that was sent (abort(), raise, kill) is sent again, and reaches the previous handler
  // once this one returns (it is blocked until then). A fault (si_code > 0) needs nothing: the
  // faulting instruction runs again on return and faults into the previous handler, with the
  // true registers, as if this handler had never been there.
  if (info == nullptr || info->si_code <= 0) raise(signo);
}

}  // namespace

bool InstallCrashReport(const std::string& program) {
  bool installed_now = false;
  std::call_once(g_install_once, [&] {
    const size_t n = std::min(program.size(), sizeof(g_state.program) - 1);
    std::memcpy(g_state.program, program.data(), n);
    g_state.program[n] = '\0';
    absl::InitializeSymbolizer(program.c_str());
    // Load the unwinder and warm the symbolizer now, so that the handler allocates nothing.
    void* warm[2];
    backtrace(warm, 2);
    char symbol[64];
    absl::Symbolize(reinterpret_cast<void*>(&OnFatalSignal), symbol, sizeof(symbol));
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = &OnFatalSignal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (int k = 0; k < kSignalCount; ++k) {
      sigaction(kSignals[k], &action, &g_state.previous[k]);
    }
    g_installed.store(true);
    installed_now = true;
  });
  return installed_now;
}

bool CrashReportInstalled() { return g_installed.load(); }

}  // namespace fleet
