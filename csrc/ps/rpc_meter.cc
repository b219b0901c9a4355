#include "ps/rpc_meter.h"

#include <algorithm>
#include <utility>

namespace fleet::ps {

const char* RpcKindName(RpcKind kind) {
  switch (kind) {
    case RpcKind::kPullSparse:
      return "pull_sparse";
    case RpcKind::kPushSparse:
      return "push_sparse";
    case RpcKind::kPullDense:
      return "pull_dense";
    case RpcKind::kPushDense:
      return "push_dense";
    case RpcKind::kBarrier:
      return "barrier";
    case RpcKind::kOther:
      break;
  }
  return "other";
}

void RpcMeter::End(RpcKind kind, absl::Duration latency, size_t bytes_sent, size_t bytes_received,
                   absl::StatusCode code) {
  constexpr auto relaxed = std::memory_order_relaxed;
  in_flight_.fetch_sub(1, relaxed);
  PerKind& k = kinds_[static_cast<int>(kind)];
  k.calls.fetch_add(1, relaxed);
  k.bytes_sent.fetch_add(bytes_sent, relaxed);
  k.bytes_received.fetch_add(bytes_received, relaxed);
  // A wall clock stepped back during the call reads as zero, not as a huge unsigned sum.
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(latency));
  k.latency_sum_nanos.fetch_add(static_cast<uint64_t>(seconds * 1e9), relaxed);
  const size_t bucket =
      std::lower_bound(kRpcLatencyBounds.begin(), kRpcLatencyBounds.end(), seconds) -
      kRpcLatencyBounds.begin();
  k.buckets[bucket].fetch_add(1, relaxed);
  const int c = static_cast<int>(code);
  if (c != 0)
    k.errors[c > 0 && c < kNumCodes ? c : static_cast<int>(absl::StatusCode::kUnknown)].fetch_add(
        1, relaxed);
}

RpcMeterSnapshot RpcMeter::Snapshot() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  RpcMeterSnapshot snapshot;
  snapshot.latency_bounds.assign(kRpcLatencyBounds.begin(), kRpcLatencyBounds.end());
  for (int i = 0; i < kNumRpcKinds; ++i) {
    const PerKind& k = kinds_[i];
    RpcKindCounts counts;
    counts.kind = RpcKindName(static_cast<RpcKind>(i));
    counts.calls = k.calls.load(relaxed);
    counts.bytes_sent = k.bytes_sent.load(relaxed);
    counts.bytes_received = k.bytes_received.load(relaxed);
    counts.latency_sum_seconds = k.latency_sum_nanos.load(relaxed) * 1e-9;
    for (const auto& bucket : k.buckets) counts.latency_buckets.push_back(bucket.load(relaxed));
    for (int c = 1; c < kNumCodes; ++c) {
      if (uint64_t n = k.errors[c].load(relaxed); n > 0) {
        counts.errors.push_back({absl::StatusCodeToString(static_cast<absl::StatusCode>(c)), n});
      }
    }
    snapshot.kinds.push_back(std::move(counts));
  }
  snapshot.in_flight = in_flight_.load(relaxed);
  return snapshot;
}

ServedRpc::ServedRpc(RpcMeter* meter, RpcKind kind, const google::protobuf::Message& request,
                     const google::protobuf::Message& reply, const proto::RpcStatus& status)
    : ServedRpc(
          meter, kind, request, [&reply] { return reply.ByteSizeLong(); }, status) {}

ServedRpc::ServedRpc(RpcMeter* meter, RpcKind kind, const google::protobuf::Message& request,
                     std::function<size_t()> reply_bytes, const proto::RpcStatus& status)
    : meter_(meter),
      kind_(kind),
      request_(request),
      reply_bytes_(std::move(reply_bytes)),
      status_(status) {
  if (meter_ == nullptr) return;
  start_ = absl::Now();
  meter_->Begin();
}

ServedRpc::~ServedRpc() {
  if (meter_ == nullptr) return;
  // A server receives the request and sends the reply.
  meter_->End(kind_, absl::Now() - start_, reply_bytes_(), request_.ByteSizeLong(),
              static_cast<absl::StatusCode>(status_.code()));
}

}  // namespace fleet::ps
