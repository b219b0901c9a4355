#pragma once
// The CPU priority of a background thread: one whose work is not on a training step's critical
// path (a data feed's reader, which only has to stay ahead of its trainer).
//
// Why: on a machine with as many busy trainer threads as cores (2 workers on 2 cores), a feed
// thread that wakes while both trainers compute takes a core from one of them, and a sync step
// (or an allreduce) waits for the slower trainer. A weaker priority makes the kernel run the
// feed when a trainer waits (for a reply, a barrier, or a batch) or when its time slice ends.
// How far each choice can fall behind: kBatch keeps a normal share of the CPU and so stays
// ahead as a normal feed does; kLow and kIdle get almost nothing beside a busy thread and catch
// up only when the trainer blocks, at worst on the empty channel itself.
//
// Nothing here raises a priority, so nothing needs privileges; a thread keeps what it was given
// until it ends, and the threads and processes it starts inherit it (a reader's pipe_command
// does).

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fleet {

enum class ThreadPriority {
  kNormal,  // leave the thread as it was created
  // SCHED_BATCH: a normal thread's CPU share, but its wake-ups do not preempt the running
  // thread; it waits for that thread's time slice to end or for it to block. So it cannot
  // starve, and a trainer that computes is not interrupted each time the feed wakes.
  kBatch,
  kLow,   // nice 19: about 1.5% of a core beside a nice-0 thread; still preempts on wake-up
  kIdle,  // SCHED_IDLE: runs only on CPU time no normal thread wants; never preempts one
};

// "normal", "batch", "low", "idle": the names Python's options use.
const char* ThreadPriorityName(ThreadPriority priority);
// InvalidArgument naming the value and the accepted names for anything else.
absl::StatusOr<ThreadPriority> ThreadPriorityFromName(const std::string& name);

// Gives the calling thread `priority` (kNormal does nothing). Linux: setpriority on the thread's
// id, or sched_setscheduler(SCHED_BATCH or SCHED_IDLE), which unprivileged threads may do. An error
// (a kernel or sandbox that refuses) leaves the thread unchanged and says what was refused and why;
// callers report it and carry on, since the priority only changes speed, never results.
absl::Status LowerCurrentThreadPriority(ThreadPriority priority);

}  // namespace fleet
