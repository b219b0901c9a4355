#include "memcpy_timer.h"

#include <chrono>
#include <cstring>
#include <vector>

namespace fleet::bench {

double MemcpySeconds(size_t bytes, int iterations) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    if (bytes > 0) src[0] = static_cast<char>(i);  // each copy moves different bytes
    std::memcpy(dst.data(), src.data(), bytes);
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  // Read the destination so the copies cannot be optimised away.
  volatile char sink = bytes ? dst[bytes - 1] : 0;
  (void)sink;
  return elapsed.count() / (iterations > 0 ? iterations : 1);
}

}  // namespace fleet::bench
