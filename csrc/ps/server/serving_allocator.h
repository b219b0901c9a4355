#pragma once
// Allocator settings for a process whose job is serving RPCs (a parameter server), or that
// makes them every step (a parameter-server worker: fleet's PsRuntime tunes both).
//
// Every pull or push builds request and reply buffers of up to megabytes. glibc serves blocks
// over 128 KiB (growing to the largest one freed) with fresh mmap pages and gives freed heap
// tops back to the kernel, so each request faults its buffers in again: measured at a third of
// a 100k-key pull on loopback, and at 0.6 of the 2 CPU-s of system time of a 2-worker CTR-DNN
// job (200k rows, async). Keeping freed memory for reuse removes those faults at the cost
// of holding on to the peak in-flight buffer memory.

#include <cstddef>

namespace fleet::ps {

struct AllocatorTuning {
  bool applied = false;  // false where the allocator has no such knobs (not glibc)
  size_t mmap_threshold = 0;
  size_t trim_threshold = 0;
};

// Serves blocks of up to 32 MiB from the heap and keeps up to 512 MiB of freed memory there
// instead of unmapping it. Process-wide; call once when the process becomes a server.
AllocatorTuning TuneAllocatorForServing();

}  // namespace fleet::ps
