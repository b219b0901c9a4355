#pragma once
// How much memory this process may still take, so that a table too large for the machine is
// refused with its size before anything is allocated, instead of growing until the kernel's
// out-of-memory killer ends the process.

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace fleet::ps::detail {

// The least of: the memory the kernel reports available (MemAvailable of /proc/meminfo), what
// the process's cgroup limit leaves (v2 memory.max, or v1 memory.limit_in_bytes), and what its
// address-space limit (RLIMIT_AS, as `ulimit -v` sets) leaves of its virtual size; UINT64_MAX
// when none can be read. `source`, when given, receives which of them it is.
uint64_t AvailableMemoryBytes(std::string* source = nullptr);

// ResourceExhausted naming `what`, the bytes it needs and those available, when `bytes` exceeds
// the available memory.
absl::Status CheckMemory(uint64_t bytes, const std::string& what);

}  // namespace fleet::ps::detail
