#pragma once
// GlooBackend: CollectiveBackend over Gloo's TCP transport (Debian's libgloo), for CPU jobs and
// for the worker utilities (fleet.util.all_reduce / all_gather / barrier).
//
// A group is an object: Connect() makes one, its owner keeps it as long as it needs it, and
// destroying it closes its connections. Several groups may live in one process (tests run the
// ranks of a group as threads over a MemoryStore).

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collective/backend.h"
#include "collective/detail/call_check.h"
#include "collective/liveness.h"
#include "collective/store.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace fleet::collective {

struct GlooOptions {
  // The address the TCP transport listens on and advertises to peers: this node's IP as the other
  // ranks reach it (127.0.0.1 when the whole group is on one machine).
  std::string hostname = "127.0.0.1";
  // Names the group in store keys and messages; unique among the groups sharing one store.
  std::string name = "default";
  // Bounds the rendezvous: all ranks joining, exchanging addresses and connecting.
  Duration timeout = std::chrono::seconds(120);
  // Where each rank runs, by rank ("host:port" as the job lists it): a rendezvous that times
  // out names the missing ranks' addresses too. Empty: ranks are named by number only.
  std::vector<std::string> rank_addresses;
  // A failed call (Unavailable or Timeout) names the ranks that are gone and their hosts: each
  // rank listens on an ephemeral port of `hostname` (a LivenessListener, see liveness.h) and
  // the survivors probe those after a failure. Off where the owner names them itself
  // (distributed::CollectiveGroup with its job endpoints).
  bool name_gone_ranks = true;
};

class GlooBackend : public CollectiveBackend {
 public:
  // Joins the group of `size` ranks as `rank` through `store`, which is only used during the
  // call. Blocks until every rank has joined and connected, then runs one barrier so no rank
  // returns (and possibly takes the store down with it) while a peer still reads from it.
  // Throws Timeout naming the ranks that did not join within options.timeout, InvalidArgument
  // for a bad rank or size, Unavailable when the transport cannot connect.
  static std::unique_ptr<GlooBackend> Connect(Store* store, int rank, int size,
                                              const GlooOptions& options);
  ~GlooBackend() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  using CollectiveBackend::AllReduce;
  void AllReduce(const void* in, void* out, size_t count, DType dtype,
                 const AllReduceOptions& options) override;
  void AllGather(const void* in, void* out, size_t bytes_per_rank,
                 const AllGatherOptions& options) override;
  void Broadcast(void* data, size_t bytes, const BroadcastOptions& options) override;
  void Barrier(const BarrierOptions& options) override;

 private:
  GlooBackend(int rank, int size, std::string name, std::shared_ptr<gloo::Context> context);
  // "; rank(s) 2, 3 of 4 are gone (host 127.0.0.3: ...)" after a failed call, or "" when the
  // group does not name gone ranks (see GlooOptions::name_gone_ranks).
  std::string GoneRanks(bool peer_failed) const;
  // Runs one Gloo call under the mutex with a fresh tag: first the call check (every rank makes
  // the same call, see detail/call_check.h), then `fn(tag)`, turning Gloo's exceptions into
  // Fleet's.
  template <typename Fn>
  void Run(const detail::CallSignature& call, Duration timeout, Fn&& fn);

  int rank_;
  int size_;
  std::string name_;
  std::mutex mu_;  // one collective at a time; guards next_tag_ and the context's slots
  uint32_t next_tag_ = 0;
  std::shared_ptr<gloo::Context> context_;
  std::string where_;               // "group 'worker' (rank 0 of 2)", for messages
  detail::CallChecker checker_;     // after context_: built from it
  std::vector<char> ring_scratch_;  // RingAllReduce's segments, kept between calls
  // Liveness (see GlooOptions::name_gone_ranks): this rank's listener and every rank's
  // "host:port" of its listener, by rank; both empty when off.
  std::unique_ptr<LivenessListener> liveness_;
  std::vector<std::string> liveness_endpoints_;
};

}  // namespace fleet::collective
