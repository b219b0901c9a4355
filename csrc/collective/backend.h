#pragma once
// CollectiveBackend: the collectives a group of ranks runs together (Gloo on CPU here; NCCL on GPU
// behind the same interface).
//
// Contract shared by every backend and call:
// - Blocking: a call returns when this rank's part is done and its output buffer is final.
// - Every rank of the group issues the same collectives, with the same sizes, in the same order.
//   Calls from several threads of one rank are serialised by the backend, so the program must
//   still fix their order. A backend checks this before any data moves: a rank whose call
//   differs (operation, dtype, size or the optional shape, reduce mode, root) makes every rank
//   throw fleet::InvalidArgument naming it, instead of a wrong result or an abort.
// - Each call takes an options struct whose timeout bounds the whole call. On timeout the call
//   throws fleet::Timeout naming the ranks that did not arrive; when a peer disappears it throws
//   fleet::Unavailable naming it; both name the group and this rank. After either, the group is
//   broken and must be recreated.
// - Buffers belong to the caller and are only used during the call.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "collective/store.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace fleet::collective {

enum class ReduceOp { kSum, kMax, kMin };

// "sum", "max" or "min"; InvalidArgument naming the mode otherwise.
ReduceOp ReduceOpFromName(const std::string& name);
const char* ReduceOpName(ReduceOp op);

// Collectives wait for the slowest rank (which may be finishing an epoch), hence the long default.
inline constexpr Duration kDefaultCollectiveTimeout = std::chrono::minutes(30);

// `shape` (optional, the caller's view of the buffer) is compared across ranks with the size
// and named in errors; `element_type` (optional, e.g. NumPy's "<f4") likewise for the byte-wise
// collectives.
struct AllReduceOptions {
  ReduceOp op = ReduceOp::kSum;
  Duration timeout = kDefaultCollectiveTimeout;
  std::vector<int64_t> shape;
};

struct AllGatherOptions {
  Duration timeout = kDefaultCollectiveTimeout;
  std::vector<int64_t> shape;
  std::string element_type;
};

struct BroadcastOptions {
  int root = 0;
  Duration timeout = kDefaultCollectiveTimeout;
  std::vector<int64_t> shape;
  std::string element_type;
};

struct BarrierOptions {
  Duration timeout = kDefaultCollectiveTimeout;
};

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The group's name, as used in error messages and store keys.
  virtual const std::string& name() const = 0;

  // out[i] = op over ranks of in[i], for `count` elements of `dtype` (float32, float64, int32,
  // int64). `in` and `out` may be the same buffer; otherwise they must not overlap.
  virtual void AllReduce(const void* in, void* out, size_t count, DType dtype,
                         const AllReduceOptions& options) = 0;
  // out holds size() * bytes_per_rank bytes: rank r's `in` lands at offset r * bytes_per_rank.
  virtual void AllGather(const void* in, void* out, size_t bytes_per_rank,
                         const AllGatherOptions& options) = 0;
  // Copies `bytes` bytes of the root's `data` into `data` on every other rank.
  virtual void Broadcast(void* data, size_t bytes, const BroadcastOptions& options) = 0;
  // Returns once every rank has entered the barrier.
  virtual void Barrier(const BarrierOptions& options) = 0;

  // In-place all-reduce of an initialised tensor.
  void AllReduce(Tensor* tensor, const AllReduceOptions& options);
};

}  // namespace fleet::collective
