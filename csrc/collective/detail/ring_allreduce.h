#pragma once
// Ring all-reduce over Gloo's transport, in place or out of place; the backend's all-reduce.
//
// gloo::allreduce given a separate input first copies each input segment into the output and
// then reduces in place: one extra pass over the whole buffer, about a quarter more memory
// traffic on loopback. This ring reduces straight from the input (out = in (+) received) and
// sends the first step from the input, so the out-of-place all-reduce that fleet.util.all_reduce
// needs (it must not touch its argument) moves as many bytes as an in-place one. In place it
// also beats gloo::allreduce here: a 16 MB float32 sum of 2 ranks took about 0.93 of its time
// (medians of 250 calls each, two runs; Gloo 0.0~git20220518 of Debian 12).
//
// Algorithm: reduce-scatter then all-gather around a ring, each with size-1 steps, one chunk of
// about count/size elements per step (Patarasuk and Yuan, "Bandwidth optimal all-reduce
// algorithms for clusters of workstations", J. Parallel Distrib. Comput. 69(2), 2009). Chunks
// travel in segments of at most 1 MB, two in flight, so reducing one segment overlaps receiving
// the next.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collective/store.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace fleet::collective::detail {

// c[i] = a[i] (+) b[i] for n elements; c may alias a.
using ReduceFn = void (*)(void* c, const void* a, const void* b, size_t n);

// All-reduces `count` elements of `element_size` bytes from `in` into `out` (the same buffer, or
// two that do not overlap) across every rank of `context`. `scratch` holds two segments while the
// call runs and is grown when smaller; the caller keeps it from call to call (a fresh 2 MB
// buffer a call would be page-faulted and zeroed each time). Blocks; throws gloo::IoException
// when `timeout` (for the whole call) passes or a peer is lost. Every rank must pass the same
// count, element size and tag.
void RingAllReduce(const std::shared_ptr<gloo::Context>& context, const void* in, void* out,
                   size_t count, size_t element_size, ReduceFn reduce, uint32_t tag,
                   Duration timeout, std::vector<char>* scratch);

}  // namespace fleet::collective::detail
