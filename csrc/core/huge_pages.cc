#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace fleet {

void AdviseHugePages(void* data, size_t bytes) {
#ifdef MADV_HUGEPAGE
  // madvise needs a page-aligned start; only whole 2 MB pages inside the range can be huge.
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  const uintptr_t last = (begin + bytes) & ~(kHugePageBytes - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace fleet
