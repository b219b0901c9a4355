#include "core/thread_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace fleet {
namespace {

// The weakest nice value: a nice-19 thread gets about 1.5% of a core beside a nice-0 one.
constexpr int kLowNice = 19;

absl::Status Refused(const char* what) {
  const int error = errno;
  return absl::PermissionDeniedError(
      absl::StrCat(what, " for thread ", syscall(SYS_gettid), " refused: ", std::strerror(error)));
}

}  // namespace

const char* ThreadPriorityName(ThreadPriority priority) {
  switch (priority) {
    case ThreadPriority::kNormal:
      return "normal";
    case ThreadPriority::kBatch:
      return "batch";
    case ThreadPriority::kLow:
      return "low";
    case ThreadPriority::kIdle:
      return "idle";
  }
  return "unknown";
}

absl::StatusOr<ThreadPriority> ThreadPriorityFromName(const std::string& name) {
  for (ThreadPriority p : {ThreadPriority::kNormal, ThreadPriority::kBatch, ThreadPriority::kLow,
                           ThreadPriority::kIdle}) {
    if (name == ThreadPriorityName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("thread priority '", name, "' is not one of 'normal', 'batch', 'low', 'idle'"));
}

absl::Status LowerCurrentThreadPriority(ThreadPriority priority) {
  // On Linux a nice value and a policy belong to a thread (a task), so PRIO_PROCESS and
  // sched_setscheduler with the thread's own id change this thread alone.
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  switch (priority) {
    case ThreadPriority::kNormal:
      return absl::OkStatus();
    case ThreadPriority::kLow:
      // Never raises: a thread already nicer than kLowNice (a niced process) stays so.
      errno = 0;
      if (int now = getpriority(PRIO_PROCESS, tid); errno == 0 && now >= kLowNice) {
        return absl::OkStatus();
      }
      if (setpriority(PRIO_PROCESS, tid, kLowNice) != 0) return Refused("setpriority(nice 19)");
      return absl::OkStatus();
    case ThreadPriority::kBatch:
    case ThreadPriority::kIdle: {
      // The nice value stays: SCHED_BATCH keeps its weight; SCHED_IDLE ignores it.
      const bool batch = priority == ThreadPriority::kBatch;
      sched_param param{};
      if (sched_setscheduler(tid, batch ? SCHED_BATCH : SCHED_IDLE, &param) != 0) {
        return Refused(batch ? "sched_setscheduler(SCHED_BATCH)"
                             : "sched_setscheduler(SCHED_IDLE)");
      }
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("unknown thread priority");
}

}  // namespace fleet
