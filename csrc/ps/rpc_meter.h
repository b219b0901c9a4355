#pragma once
// RpcMeter: what the RPCs of one client or one server did, for live metrics (fleet/monitoring
// reads Snapshot() when Prometheus scrapes). Counted per kind of call: calls, payload bytes each
// way, a latency histogram with fixed buckets, and failures by status code; plus the calls in
// flight.
//
// Cost: recording is lock-free (relaxed atomic adds, one cache-line-aligned block per kind), so
// the data path pays a few adds and one clock read per RPC, never a lock or an allocation.
// Thread safety: every method may be called from any thread at once. A snapshot taken while
// calls complete may mix counts of consecutive calls (each counter is read once), which a
// scrape tolerates.
//
// Bytes are the protobuf-encoded sizes of requests and replies (ByteSizeLong), without gRPC's
// framing and compression: what the job asked the network to carry.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "fleet/ps/ps.pb.h"

namespace fleet::ps {

enum class RpcKind : int {
  kPullSparse,
  kPushSparse,
  kPullDense,
  kPushDense,
  kBarrier,  // barriers, sync steps, presence
  kOther,    // connect, save, load, shrink, stats, heartbeat, stop
};
inline constexpr int kNumRpcKinds = 6;

// "pull_sparse", "push_sparse", "pull_dense", "push_dense", "barrier", "other".
const char* RpcKindName(RpcKind kind);

// The kind of a call, from its request type (the exact overload wins over the Message one).
inline RpcKind RpcKindOf(const proto::PullSparseRequest&) { return RpcKind::kPullSparse; }
inline RpcKind RpcKindOf(const proto::PushSparseRequest&) { return RpcKind::kPushSparse; }
inline RpcKind RpcKindOf(const proto::PullDenseRequest&) { return RpcKind::kPullDense; }
inline RpcKind RpcKindOf(const proto::PushDenseRequest&) { return RpcKind::kPushDense; }
inline RpcKind RpcKindOf(const proto::BarrierRequest&) { return RpcKind::kBarrier; }
inline RpcKind RpcKindOf(const google::protobuf::Message&) { return RpcKind::kOther; }

// Upper bounds of the latency buckets, in seconds (a last bucket, +Inf, catches the rest): from
// a loopback round trip (~100 us) to an RPC deadline (tens of seconds).
inline constexpr std::array<double, 16> kRpcLatencyBounds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};

// Failed calls of one status code.
struct RpcErrorCount {
  std::string code;  // absl::StatusCodeToString: "UNAVAILABLE", ...
  uint64_t count = 0;
};

// One kind's counters at one moment.
struct RpcKindCounts {
  std::string kind;  // RpcKindName
  uint64_t calls = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  double latency_sum_seconds = 0;
  // Calls per latency bucket (not cumulative): bucket i holds latencies <= kRpcLatencyBounds[i]
  // and above the previous bound; the last one those above every bound.
  std::vector<uint64_t> latency_buckets;
  // Failed calls by status code, only codes seen.
  std::vector<RpcErrorCount> errors;
};

struct RpcMeterSnapshot {
  std::vector<double> latency_bounds;  // kRpcLatencyBounds
  std::vector<RpcKindCounts> kinds;    // one per RpcKind, in enum order
  int64_t in_flight = 0;               // calls begun and not ended
};

class RpcMeter {
 public:
  // A call starts (counts it in flight).
  void Begin() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  // A call begun with Begin() ended after `latency` with `code` (OK or the failure's).
  void End(RpcKind kind, absl::Duration latency, size_t bytes_sent, size_t bytes_received,
           absl::StatusCode code);
  RpcMeterSnapshot Snapshot() const;

 private:
  static constexpr int kNumCodes = 17;  // absl::StatusCode 0 (OK) .. 16 (UNAUTHENTICATED)
  struct alignas(64) PerKind {
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> bytes_sent{0};
    std::atomic<uint64_t> bytes_received{0};
    std::atomic<uint64_t> latency_sum_nanos{0};
    std::array<std::atomic<uint64_t>, kRpcLatencyBounds.size() + 1> buckets{};
    std::array<std::atomic<uint64_t>, kNumCodes> errors{};  // index: the code; [0] unused
  };
  std::array<PerKind, kNumRpcKinds> kinds_;
  std::atomic<int64_t> in_flight_{0};
};

// Meters one call served by a server: Begin() now, End() when this goes out of scope with the
// sizes of `request` and `reply` and the code in `status` (the reply's RpcStatus, read then).
// `meter` null: meters nothing.
class ServedRpc {
 public:
  ServedRpc(RpcMeter* meter, RpcKind kind, const google::protobuf::Message& request,
            const google::protobuf::Message& reply, const proto::RpcStatus& status);
  // The same for a reply that is not one protobuf message: `reply_bytes` gives its size then.
  ServedRpc(RpcMeter* meter, RpcKind kind, const google::protobuf::Message& request,
            std::function<size_t()> reply_bytes, const proto::RpcStatus& status);
  ~ServedRpc();
  ServedRpc(const ServedRpc&) = delete;
  ServedRpc& operator=(const ServedRpc&) = delete;

 private:
  RpcMeter* meter_;
  RpcKind kind_;
  const google::protobuf::Message& request_;
  std::function<size_t()> reply_bytes_;
  const proto::RpcStatus& status_;
  absl::Time start_;
};

}  // namespace fleet::ps
