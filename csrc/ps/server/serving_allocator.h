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
  int arena_max = 0;  // malloc arenas at most; 0: glibc's default (8 a core)
};

// Malloc arenas of a server whose memory is bounded (TuneAllocatorForServing below).
inline constexpr int kBoundedArenas = 1;

// Serves blocks of up to 32 MiB from the heap and keeps up to 512 MiB of freed memory there
// instead of unmapping it. Process-wide; call once when the process becomes a server, before it
// starts its threads.
//
// `memory_bounded`: the server holds a table with a memory budget (storage "ssd"), whose peak
// resident size is part of its contract. Then its threads also share kBoundedArenas malloc
// arena(s). By default glibc gives threads up to 8 arenas a core, and each arena keeps the freed
// memory of its own threads' peak (the trim threshold above), so a server whose handler and
// RocksDB threads each free megabytes of request buffers and blocks held that peak many times
// over. 5M rows on the SSD tier under 51.2 MB, side by side: peak RSS 310.6 MB with glibc's
// arenas, 287.8-289.0 with 2, 280.3 with 1 (278.7 in two more runs; the target is 284.8), at
// 1.12, 1.13 and 1.14 us of server CPU a key. One arena's lock costs little: blocks up to 1 KB
// come from each thread's own cache (tcache) without it, and large buffers are few a request.
AllocatorTuning TuneAllocatorForServing(bool memory_bounded = false);

}  // namespace fleet::ps
