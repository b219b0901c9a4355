#pragma once
// The limit fleet.util.all_reduce is measured against (benchmarks/launch_and_collective.py):
// gloo::allreduce called straight from C++, float32 sum, in place, Gloo's default algorithm, on
// a Gloo group of its own. Only Gloo is involved: its FileStore for the rendezvous, its TCP
// transport, its algorithm; no Fleet code, NumPy or Python in the timed loop.
// Benchmark-only: built into fleet_bench._bench, never into the wheel.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace gloo {
class Context;
}  // namespace gloo

namespace fleet::bench {

class RawGlooGroup {
 public:
  // Joins a group of `size` ranks as `rank` through Gloo's FileStore in `store_dir` (a directory
  // every rank sees: one machine, or a shared file system), under keys prefixed by `name`. The
  // TCP transport listens on `hostname`. Blocks until every rank has connected or `timeout`
  // passes; throws gloo::IoException on failure.
  RawGlooGroup(const std::string& store_dir, const std::string& name, int rank, int size,
               const std::string& hostname, std::chrono::milliseconds timeout);
  ~RawGlooGroup();

  int rank() const;
  int size() const;

  // Runs `iters` back-to-back in-place float32 sum all-reduces of `data[0, count)` on every
  // rank (all ranks must call it with the same count and iters) and returns the mean seconds
  // per call. Blocking; not thread-safe.
  double AllReduceSeconds(float* data, size_t count, int iters);

 private:
  std::shared_ptr<gloo::Context> context_;
  uint32_t next_tag_ = 0;
};

}  // namespace fleet::bench
