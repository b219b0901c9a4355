#pragma once
// The check that runs before every collective of a Gloo group: each rank sends every other rank
// a fixed-size description of the call it is about to make (operation, element type, shape or
// size, reduce mode, root), and waits for theirs, before any data moves.
//
// Why: Gloo trusts its callers. Ranks that disagree on the size abort inside Gloo's assertions,
// different reduce modes silently give a wrong result, and a rank in a different collective (or
// in none) leaves the others waiting for the whole timeout with no rank named. Exchanging the
// descriptions peer by peer (not through a ring) tells each rank exactly which peers arrived,
// which one closed its connection, and which call each peer makes; every rank receives every
// description, so all of them raise the same error. The cost is one message of 112 bytes to
// and from each peer per collective (see CallChecker for how its latency is kept to one trip).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collective/detail/wait_progress.h"
#include "collective/store.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace fleet::collective::detail {

// What one rank calls. Plain data with a fixed layout: it travels as raw bytes between ranks of
// the same build.
struct CallSignature {
  static constexpr int kMaxDims = 8;
  static constexpr int kTypeChars = 8;
  uint32_t kind = 0;            // CallKind
  int32_t reduce = -1;          // ReduceOp, or -1
  int32_t root = -1;            // broadcast root, or -1
  uint32_t ndim = 0;            // 0: no shape given (then `bytes` alone describes the size)
  uint64_t bytes = 0;           // payload bytes of this rank
  char type[kTypeChars] = {};   // element type name, may be empty
  int64_t dims[kMaxDims] = {};  // a shape of more than kMaxDims dims keeps its product in the last
  uint64_t sequence = 0;        // the group's call counter
};

enum CallKind : uint32_t { kAllReduce = 1, kAllGather = 2, kBroadcast = 3, kBarrier = 4 };

// Fills a signature; `shape` may be empty, `type` is cut to kTypeChars.
CallSignature MakeSignature(CallKind kind, const std::string& type,
                            const std::vector<int64_t>& shape, uint64_t bytes, int reduce, int root,
                            uint64_t sequence);

// "all-reduce(float32 [2, 3], sum)", for messages.
std::string DescribeCall(const CallSignature& call);

// The check of every collective of one Gloo context, in call order. Not thread-safe: the
// backend runs one collective at a time.
//
// Each check sends this rank's description to every peer and waits for theirs. Gloo moves an
// unbound buffer only after the receiver has posted it, which costs a notice from receiver to
// sender before the description travels; so once a check passes, the receives of the next
// call's descriptions are posted at once, and the next check's descriptions travel as soon as
// they are sent: one one-way trip per check instead of two. Measured on 2 ranks of this 2-core
// machine, 16 MB float32 all-reduces through a c_allreduce_sum program, 250 calls each, as a
// fraction of raw gloo::allreduce's bandwidth: 0.87-0.89 before; 0.95-0.98 with the check
// switched off; 0.97-1.00 with this and CommThread::RunIfIdle (the call on the caller's thread).
class CallChecker {
 public:
  explicit CallChecker(std::shared_ptr<gloo::Context> context);
  ~CallChecker();
  CallChecker(const CallChecker&) = delete;
  CallChecker& operator=(const CallChecker&) = delete;

  // Exchanges `mine` with every peer (slot from `tag`; each check's tag is the previous one's
  // plus one) and compares. Throws:
  // - InvalidArgument when a rank's call differs from rank 0's, naming each such rank and both
  //   calls (every rank throws the same);
  // - Timeout when peers did not arrive within `timeout`, naming them;
  // - Unavailable when a peer's connection closed before it arrived (its process exited or it
  //   closed the group), naming that rank.
  // `where` names the group and this rank ("group 'worker' (rank 0 of 2)").
  void Check(const CallSignature& mine, uint32_t tag, Duration timeout, const std::string& where);

 private:
  // Posts a receive of each peer's description for the call with `tag`, into fresh buffers.
  void PostReceives(uint32_t tag);

  std::shared_ptr<gloo::Context> context_;
  // The tag whose receives are posted; none after a check that failed, so that the next check
  // (if any) posts fresh buffers.
  std::optional<uint32_t> posted_tag_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> receives_;  // null where lost
  std::vector<CallSignature> incoming_;  // one per rank, received into; this rank's unused
  // Per rank, why its connection is known closed (Gloo's message), or empty: found when a
  // receive could not be posted or a send not started.
  std::vector<std::string> lost_;
  CallSignature outgoing_;
  std::unique_ptr<gloo::transport::UnboundBuffer> send_;
  WaitProgress progress_;  // progress lines of long waits for a peer
};

}  // namespace fleet::collective::detail
