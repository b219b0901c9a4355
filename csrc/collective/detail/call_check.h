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
// and from each peer per collective.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collective/store.h"

namespace gloo {
class Context;
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

// Exchanges `mine` with every peer of `context` (slot from `tag`) and compares. Throws:
// - InvalidArgument when a rank's call differs from rank 0's, naming each such rank and both
//   calls (every rank throws the same);
// - Timeout when peers did not arrive within `timeout`, naming them;
// - Unavailable when a peer's connection closed before it arrived (its process exited or it
//   closed the group), naming that rank.
// `where` names the group and this rank ("group 'worker' (rank 0 of 2)").
void CheckCall(const std::shared_ptr<gloo::Context>& context, const CallSignature& mine,
               uint32_t tag, Duration timeout, const std::string& where);

}  // namespace fleet::collective::detail
