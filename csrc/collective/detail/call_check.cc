#include "collective/detail/call_check.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/errors.h"
#include "gloo/common/error.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace fleet::collective::detail {
namespace {

// Slots of the check, apart from Gloo's prefixes (0x01..0x08) and the ring's (0x46).
constexpr uint8_t kCheckSlotPrefix = 0x47;
const char* const kReduceNames[] = {"sum", "max", "min"};

using Clock = std::chrono::steady_clock;

std::string KindName(uint32_t kind) {
  switch (kind) {
    case kAllReduce:
      return "all-reduce";
    case kAllGather:
      return "all-gather";
    case kBroadcast:
      return "broadcast";
    case kBarrier:
      return "barrier";
  }
  return absl::StrCat("unknown collective ", kind);
}

// Comparable form of a call, without the sequence number (equal by construction of the slot).
std::string Key(const CallSignature& call) {
  CallSignature copy = call;
  copy.sequence = 0;
  return std::string(reinterpret_cast<const char*>(&copy), sizeof(copy));
}

bool IsTimeout(const std::exception& e) { return std::strstr(e.what(), "Timed out") != nullptr; }

}  // namespace

CallSignature MakeSignature(CallKind kind, const std::string& type,
                            const std::vector<int64_t>& shape, uint64_t bytes, int reduce, int root,
                            uint64_t sequence) {
  CallSignature call;
  call.kind = kind;
  call.reduce = reduce;
  call.root = root;
  call.bytes = bytes;
  call.sequence = sequence;
  std::memcpy(call.type, type.data(), std::min<size_t>(type.size(), CallSignature::kTypeChars));
  call.ndim = static_cast<uint32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t slot = std::min<size_t>(i, CallSignature::kMaxDims - 1);
    call.dims[slot] = i < CallSignature::kMaxDims ? shape[i] : call.dims[slot] * shape[i];
  }
  return call;
}

std::string DescribeCall(const CallSignature& call) {
  std::vector<std::string> parts;
  const std::string type(call.type, strnlen(call.type, CallSignature::kTypeChars));
  if (call.kind != kBarrier) {
    std::string what = type;
    if (call.ndim > 0) {
      const size_t shown = std::min<size_t>(call.ndim, CallSignature::kMaxDims);
      std::vector<int64_t> dims(call.dims, call.dims + shown);
      absl::StrAppend(&what, what.empty() ? "" : " ", "[", absl::StrJoin(dims, ", "),
                      call.ndim > shown ? ", ..." : "", "]");
    } else {
      absl::StrAppend(&what, what.empty() ? "" : " ", call.bytes, " bytes");
    }
    parts.push_back(what);
  }
  if (call.reduce >= 0 && call.reduce < 3) parts.push_back(kReduceNames[call.reduce]);
  if (call.root >= 0) parts.push_back(absl::StrCat("root ", call.root));
  return absl::StrCat(KindName(call.kind), "(", absl::StrJoin(parts, ", "), ")");
}

CallChecker::CallChecker(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {
  send_ = context_->createUnboundBuffer(&outgoing_, sizeof(CallSignature));
}

// The receives still posted ahead are dropped with their buffers (see PostReceives).
CallChecker::~CallChecker() = default;

void CallChecker::PostReceives(uint32_t tag) {
  const int rank = context_->rank, size = context_->size;
  const uint64_t slot = gloo::Slot::build(kCheckSlotPrefix, tag);
  // Buffers before their memory: destroying a Gloo buffer waits for a read into it that is
  // under way, and a description that arrives for it later is dropped (its connection fails).
  // So a receive a failed check left pending never writes into reused memory.
  receives_.clear();
  receives_.resize(size);
  incoming_.assign(size, CallSignature{});
  lost_.assign(size, "");
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    receives_[peer] = context_->createUnboundBuffer(&incoming_[peer], sizeof(CallSignature));
    try {
      receives_[peer]->recv(peer, slot);
    } catch (const std::exception& e) {
      // The connection is closed already (a peer that left after its last call): reported by
      // the check that needs this description, not here, which may be the end of the last.
      lost_[peer] = e.what();
      receives_[peer].reset();
    }
  }
  posted_tag_ = tag;
}

void CallChecker::Check(const CallSignature& mine, uint32_t tag, Duration timeout,
                        const std::string& where) {
  const int rank = context_->rank, size = context_->size;
  if (size == 1) return;
  const auto deadline = Clock::now() + timeout;
  auto remaining = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  };
  if (posted_tag_ != tag) PostReceives(tag);
  posted_tag_.reset();  // until this check passes
  const uint64_t slot = gloo::Slot::build(kCheckSlotPrefix, tag);
  outgoing_ = mine;
  int sent = 0;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank || !lost_[peer].empty()) continue;
    try {
      send_->send(peer, slot);
      ++sent;
    } catch (const std::exception& e) {
      lost_[peer] = e.what();
    }
  }
  std::vector<int> missing, arrived;
  std::vector<std::string> closed;
  bool timed_out = false;
  const auto started = deadline - timeout;
  auto describe = [&] {
    return absl::StrCat(DescribeCall(mine), " #", mine.sequence, " in ", where);
  };
  struct ProgressOff {
    WaitProgress& progress;
    ~ProgressOff() { progress.Done(); }
  } progress_off{progress_};
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    if (!lost_[peer].empty()) {
      closed.push_back(absl::StrCat("rank ", peer, " (", lost_[peer], ")"));
      continue;
    }
    try {
      progress_.Waiting(peer, started, timeout, describe);
      // A description that already arrived is returned even after a timeout; Gloo's timeout
      // closes every connection of the context, so any later failure means "did not arrive".
      receives_[peer]->waitRecv(remaining());
      arrived.push_back(peer);
    } catch (const std::exception& e) {
      if (timed_out || IsTimeout(e)) {
        timed_out = true;
        missing.push_back(peer);
      } else {
        closed.push_back(absl::StrCat("rank ", peer, " (", e.what(), ")"));
      }
    }
  }
  // Messages only: built when a check fails.
  auto call = [&] { return absl::StrCat(DescribeCall(mine), " #", mine.sequence); };
  if (!closed.empty()) {
    throw Unavailable(absl::StrCat(
        call(), " in ", where, ": the connection to ", absl::StrJoin(closed, ", "),
        " closed before it called this collective: its process exited or closed the group "
        "without taking part"));
  }
  if (!missing.empty()) {
    throw Timeout(absl::StrCat(call(), " in ", where, ": rank(s) [", absl::StrJoin(missing, ", "),
                               "] did not arrive within ", timeout.count() / 1000.0,
                               " s (arrived: this rank", arrived.empty() ? "" : ", ",
                               absl::StrJoin(arrived, ", "), ")"));
  }
  try {
    for (int i = 0; i < sent; ++i) send_->waitSend(remaining());
  } catch (const std::exception& e) {
    throw Unavailable(
        absl::StrCat(call(), " in ", where, ": sending the call check failed: ", e.what()));
  }
  // Everyone now holds the same list of calls; compare each with rank 0's.
  std::vector<CallSignature>& calls = incoming_;
  calls[rank] = mine;
  const std::string reference = Key(calls[0]);
  std::vector<std::string> differing;
  for (int r = 1; r < size; ++r) {
    if (Key(calls[r]) != reference) {
      differing.push_back(absl::StrCat("rank ", r, " calls ", DescribeCall(calls[r])));
    }
  }
  if (!differing.empty()) {
    throw InvalidArgument(absl::StrCat(
        "mismatched collective #", mine.sequence, " in ", where, ": rank 0 calls ",
        DescribeCall(calls[0]), " but ", absl::StrJoin(differing, "; "),
        ". Every rank must issue the same collectives (operation, dtype, shape, mode, root) in "
        "the same order"));
  }
  PostReceives(tag + 1);
}

}  // namespace fleet::collective::detail
