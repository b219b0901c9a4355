#pragma once
// NcclBackend: CollectiveBackend over NCCL for buffers in GPU memory (built only with CUDA and
// NCCL; see nccl_available()). Same contract as backend.h, with these specifics:
// - Set-up goes through the group's store: rank 0 creates the ncclUniqueId of each communicator
//   and publishes it (unique_id_exchange.h); every rank then initialises its communicators with
//   NCCL's non-blocking init and polls them against the timeout.
// - Every call is enqueued on the communicator's own CUDA stream and waited for by polling the
//   stream and the communicator's asynchronous error, never by a blocking synchronise: when the
//   deadline passes or a peer fails, the communicator is aborted (ncclCommAbort) and the call
//   throws Timeout or Unavailable naming the group, this rank and the operation. The group is
//   broken after that.
// - comm_num > 1 makes that many communicators (own id, own stream); calls take them round
//   robin, so that consecutive gradient buckets run on different streams.
// - Before any data moves, each call all-gathers the ranks' call descriptions (a few hundred
//   bytes, as the Gloo backend's check does) and every rank throws InvalidArgument naming the
//   ranks whose call differs from rank 0's.
// The header includes no CUDA header: host code compiles the same with and without CUDA.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collective/backend.h"
#include "collective/store.h"

namespace fleet::collective {
namespace detail {
struct CallSignature;
}  // namespace detail

// Whether this build has the NCCL backend, and whether this machine has a CUDA device for it.
bool nccl_compiled();
int cuda_device_count();

struct NcclOptions {
  // Names the group in store keys and messages; unique among the groups sharing one store.
  std::string name = "default";
  // The CUDA device this rank uses (usually its local rank).
  int device = 0;
  // Communicators (each with its own stream), used round robin by the calls.
  int comm_num = 1;
  // Bounds the set-up: the id exchange and every communicator's init.
  Duration timeout = std::chrono::seconds(120);
};

class NcclBackend : public CollectiveBackend {
 public:
  // Joins the group as `rank` of `size` through `store`. Unavailable when this build has no
  // NCCL or the machine no CUDA device (naming the group, the rank and the device asked for);
  // InvalidArgument for a bad rank, size, device or comm_num; Timeout when a rank is missing.
  static std::unique_ptr<NcclBackend> Connect(Store* store, int rank, int size,
                                              const NcclOptions& options);
  ~NcclBackend() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  int comm_num() const;

  using CollectiveBackend::AllReduce;
  // `in` and `out` are device pointers.
  void AllReduce(const void* in, void* out, size_t count, DType dtype,
                 const AllReduceOptions& options) override;
  void AllGather(const void* in, void* out, size_t bytes_per_rank,
                 const AllGatherOptions& options) override;
  void Broadcast(void* data, size_t bytes, const BroadcastOptions& options) override;
  void Barrier(const BarrierOptions& options) override;

 private:
  struct State;  // CUDA and NCCL handles, in nccl_backend.cc
  NcclBackend(int rank, int size, std::string name, std::unique_ptr<State> state);
  // One call: takes the next communicator, runs the call check on it, lets `enqueue` put the
  // operation on that communicator (by index) and waits for it against `timeout`.
  void Call(const detail::CallSignature& mine, Duration timeout, const std::string& what,
            const std::function<int(size_t comm)>& enqueue);

  int rank_;
  int size_;
  std::string name_;
  std::unique_ptr<State> state_;
};

}  // namespace fleet::collective
