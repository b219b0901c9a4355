#pragma once
// The largest magnitude in a float array, found with integer operations so that the loop
// vectorises: GCC keeps a float sum or a float max reduction scalar unless -ffast-math lets it
// reorder them, and the tables check every pushed gradient and every updated row this way.
//
// With the sign bit cleared, the bit patterns of non-NaN floats, read as unsigned integers, are
// ordered as their magnitudes; infinity is 0x7f800000 and every NaN lies above it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fleet::ps::detail {

inline constexpr uint32_t kInfinityBits = 0x7f800000u;

inline uint32_t MagnitudeBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits & 0x7fffffffu;
}

// The largest MagnitudeBits of values[0, n); 0 for n = 0.
inline uint32_t MaxMagnitudeBits(const float* values, size_t n) {
  uint32_t largest = 0;
  for (size_t i = 0; i < n; ++i) largest = std::max(largest, MagnitudeBits(values[i]));
  return largest;
}

}  // namespace fleet::ps::detail
