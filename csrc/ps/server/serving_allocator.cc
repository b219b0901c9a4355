#include "ps/server/serving_allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace fleet::ps {

AllocatorTuning TuneAllocatorForServing(bool memory_bounded) {
  AllocatorTuning tuning;
#if defined(__GLIBC__)
  // 32 MiB is glibc's largest mmap threshold on 64-bit targets (HEAP_MAX_SIZE / 2); a dense
  // table bigger than that still gets its reply from mmap, where a fault per page is small
  // beside the copy.
  constexpr size_t kMmapThreshold = size_t{32} << 20;
  constexpr size_t kTrimThreshold = size_t{512} << 20;
  tuning.applied = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold)) == 1 &&
                   mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrimThreshold)) == 1;
  if (tuning.applied) {
    tuning.mmap_threshold = kMmapThreshold;
    tuning.trim_threshold = kTrimThreshold;
  }
  // Threads already running keep their arenas; those started later share these.
  if (tuning.applied && memory_bounded && mallopt(M_ARENA_MAX, kBoundedArenas) == 1) {
    tuning.arena_max = kBoundedArenas;
  }
#endif
  return tuning;
}

}  // namespace fleet::ps
