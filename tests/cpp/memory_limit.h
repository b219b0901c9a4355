#pragma once
// For the tests that run a child process out of memory for real: the child lowers its
// address-space limit (RLIMIT_AS) a little above what it maps, so that the next large
// allocation (or a thread's stack) fails as it would on a full machine.

#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>

namespace fleet::testing_memory {

// AddressSanitizer maps terabytes of shadow memory and aborts on a failed allocation instead of
// throwing std::bad_alloc: these tests skip under it.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

inline constexpr const char* kSkipUnderAddressSanitizer =
    "AddressSanitizer maps terabytes of shadow memory and aborts on a failed allocation instead "
    "of throwing std::bad_alloc";

// Bytes of address space this process has mapped (/proc/self/statm, first field, in pages).
inline size_t MappedBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long pages = 0;
  const int read = std::fscanf(f, "%lu", &pages);
  std::fclose(f);
  return read == 1 ? pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// Lowers this process's address-space limit to `headroom` bytes above what it maps now.
inline bool LimitMemoryTo(size_t headroom) {
  const size_t mapped = MappedBytes();
  const rlimit as{mapped + headroom, mapped + headroom};
  return mapped > 0 && ::setrlimit(RLIMIT_AS, &as) == 0;
}

}  // namespace fleet::testing_memory
