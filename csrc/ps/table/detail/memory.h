#pragma once
// How much memory this process may still take, so that a table too large for the machine is
// refused with its size before anything is allocated, instead of growing until the kernel's
// out-of-memory killer ends the process.

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace fleet::ps::detail {

// The smaller of the memory the kernel reports available (MemAvailable of /proc/meminfo) and
// what the process's cgroup (v2) limit leaves; UINT64_MAX when neither can be read.
uint64_t AvailableMemoryBytes();

// ResourceExhausted naming `what`, the bytes it needs and those available, when `bytes` exceeds
// the available memory.
absl::Status CheckMemory(uint64_t bytes, const std::string& what);

}  // namespace fleet::ps::detail
