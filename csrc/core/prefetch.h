#pragma once
// Cache prefetch hints that the compiler keeps.
//
// GCC 12 at -O3 deletes __builtin_prefetch when the address is computed from loaded values
// (a row found through an index, say): it counts the builtin as free of side effects and drops
// it as dead code, silently. A volatile asm statement is never dropped. On other targets the
// hints do nothing.

namespace fleet {

// Brings the cache line holding `p` towards the core for reading.
inline void PrefetchForRead(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pldl1keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  (void)p;
#endif
}

// Brings the cache line holding `p` towards the core for writing.
inline void PrefetchForWrite(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pstl1keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  (void)p;
#endif
}

}  // namespace fleet
