#pragma once
// Transparent huge pages for large buffers.
//
// Many kernels run with THP in "madvise" mode: only ranges a process marks get 2 MB pages. A
// 4 KB-paged buffer of tens of MB costs a TLB miss every 4 KB on every pass, and under a
// hypervisor each miss walks two page tables. Measured on this project's 2-core VM: a 64 MB
// Gloo allreduce into a 4 KB-paged tensor spent 60% more time copying out of the socket than
// into NumPy's buffer (NumPy marks arrays of 4 MB and more), and ran 10-15% slower end to end.

#include <cstddef>

namespace fleet {

// Buffers of at least this many bytes are worth huge pages (NumPy's threshold too); below it
// the rounding to 2 MB would waste more than it saves.
inline constexpr size_t kHugePageMinBytes = size_t{4} << 20;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Asks the kernel to back [data, data + bytes) with huge pages where whole 2 MB pages fit.
// Advice only: no error when the kernel has THP off or refuses.
void AdviseHugePages(void* data, size_t bytes);

}  // namespace fleet
