// PsClient's shared memory with the servers of its host: a segment per server, attached at the
// handshake and detached at close (ps/detail/shm_segment.h says why and how).

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "ps/client/client.h"
#include "ps/client/detail/client_call.h"
#include "ps/client/detail/shm_slots.h"
#include "ps/detail/endpoint.h"

namespace fleet::ps {
namespace {

using AttachSegmentCall = detail::Call<proto::AttachSegmentRequest, proto::AttachSegmentReply>;

// The most a slot's half grows for sparse requests: a larger request (more keys than fit)
// goes on the wire, so a job with wide rows or huge requests does not map tens of MB per server.
constexpr uint64_t kSparseSlotBytes = uint64_t{4} << 20;

}  // namespace

bool PsClient::shared_memory(size_t server) const {
  return server < shm_.size() && shm_[server] != nullptr;
}

void PsClient::AttachSharedMemory() {
  shm_.resize(num_servers());
  if (!options_.local_shared_memory || options_.local_host.empty() || options_.server_restarts) {
    return;
  }
  for (size_t s = 0; s < num_servers(); ++s) {
    const std::string& endpoint = options_.endpoints[s];
    if (detail::EndpointHost(endpoint) != options_.local_host) continue;
    // A slot's half holds the server's largest share of a dense table, or a sparse request's
    // keys and gradients (PushSparse's max_keys_per_request, up to kSparseSlotBytes).
    uint64_t bytes = 0;
    for (const auto& [id, route] : dense_) {
      bytes = std::max<uint64_t>(bytes, route.local_size[s] * sizeof(float));
    }
    for (const auto& [id, table] : tables_) {
      if (table.type() != proto::SPARSE) continue;
      const uint64_t key_bytes = sizeof(int64_t) + uint64_t{table.dim()} * sizeof(float);
      bytes = std::max<uint64_t>(
          bytes, std::min<uint64_t>(options_.max_keys_per_request * key_bytes, kSparseSlotBytes));
    }
    if (bytes == 0) continue;
    const uint64_t half = (bytes + 63) / 64 * 64;  // slots on cache lines
    auto segment = detail::ShmSegment::Create(detail::ShmSlots::SegmentBytes(half));
    absl::Status status = segment.status();
    uint64_t segment_id = 0;
    if (status.ok()) {
      const detail::ShmSegment& created = **segment;
      status = CallServers<AttachSegmentCall>(
          "AttachSegment", options_.rpc_timeout, {s}, FLEET_PS_STARTER(AttachSegment),
          [&created](AttachSegmentCall* call) {
            call->request.set_pid(static_cast<uint64_t>(getpid()));
            call->request.set_fd(static_cast<uint64_t>(created.fd()));
            call->request.set_token(created.token());
            call->request.set_size(created.size());
          },
          [&segment_id](size_t, const proto::AttachSegmentReply& reply) {
            segment_id = reply.segment_id();
            return absl::OkStatus();
          });
    }
    if (!status.ok()) {
      std::fprintf(stderr,
                   "fleet: parameter server %zu at %s is on this host but shares no memory with "
                   "this worker (%s): its dense and sparse values go over the wire\n",
                   s, endpoint.c_str(), std::string(status.message()).c_str());
      continue;
    }
    shm_[s] = std::make_shared<detail::ShmSlots>(*std::move(segment), segment_id, half);
  }
}

void PsClient::DetachSharedMemory() {
  const absl::Duration timeout = std::min(options_.rpc_timeout, absl::Seconds(2));
  for (size_t s = 0; s < shm_.size(); ++s) {
    if (shm_[s] == nullptr) continue;
    const uint64_t id = shm_[s]->segment_id();
    // Best effort: a server that is gone has dropped the mapping with its process.
    CallServers<AttachSegmentCall>(
        "AttachSegment (detach)", timeout, {s}, FLEET_PS_STARTER(AttachSegment),
        [id](AttachSegmentCall* call) { call->request.set_detach(id); },
        [](size_t, const proto::AttachSegmentReply&) { return absl::OkStatus(); })
        .IgnoreError();
  }
}

}  // namespace fleet::ps
