#pragma once
// The memory system's limit beside the parameter server's figures (benchmarks/ps_throughput.py):
// a plain memcpy of the bytes a request and its reply move.

#include <cstddef>

namespace fleet::bench {

// Mean seconds of one memcpy of `bytes` bytes between two buffers (touched first), over
// `iterations` copies. Blocking, allocates 2 * bytes.
double MemcpySeconds(size_t bytes, int iterations);

}  // namespace fleet::bench
