#pragma once
// Internals of PsClient shared by its .cc files (client, admin, shared memory, sync step): the
// state of one RPC, the RPCs in flight, the conversion of RPC outcomes to absl::Status, and the
// Launch / CallAll member templates that every call goes through.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fleet/ps/ps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/detail/call_metadata.h"

namespace fleet::ps::detail {

// The gRPC side of PsClient, kept out of its header: one channel and stub per server, in the
// order of ClientOptions.endpoints, filled by Handshake.
struct Transport {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<proto::PsService::Stub>> stubs;
  std::vector<std::string> targets;  // what each channel connects to (PsClient::target)
};

// One RPC: owned by Launch from the start of the call until its callback ends.
template <class Request, class Reply>
struct Call {
  grpc::ClientContext context;
  Request request;
  Reply reply;
};

// Counts the RPCs in flight; each callback holds a reference, so the count outlives the client
// for as long as a callback still touches it.
struct Inflight {
  absl::Mutex mu;
  int count ABSL_GUARDED_BY(mu) = 0;
};

// The one place where a gRPC status (transport) and a reply's RpcStatus (application) become an
// absl::Status; `where` names the call, the server and its endpoint.
absl::Status CallStatus(const grpc::Status& transport, const proto::RpcStatus& reply,
                        const std::string& where);

// What the calls' outcomes tell of each server, indexed by server: its incarnation
// (call_metadata.h) as the client first saw it (or adopted it after a reload), and whether its
// last call ended without an answer.
struct Incarnations {
  absl::Mutex mu;
  std::vector<std::string> first ABSL_GUARDED_BY(mu);  // empty until seen
  // The last call's transport failed with DEADLINE_EXCEEDED or UNAVAILABLE (a frozen or dead
  // server); cleared by the next reply.
  std::vector<bool> unresponsive ABSL_GUARDED_BY(mu);
  bool accept_reloaded = false;  // ClientOptions.server_restarts
};

// Records the outcome of a completed call to `server` (`where` names it) and returns OK when
// its reply comes from the server's incarnation first seen (recorded on a first reply), or
// from a new one that reloaded a checkpoint when accept_reloaded (adopted, with one line on
// stderr); ABORTED naming the server otherwise. A reply without an incarnation (a transport
// failure) is not checked.
absl::Status CheckIncarnation(Incarnations* incarnations, size_t server,
                              const grpc::Status& transport, const grpc::ClientContext& context,
                              const std::string& where);

// A request's byte range of the memory shared with a server on this host.
inline void SetShmRange(proto::ShmRange* range, uint64_t offset, uint64_t length) {
  range->set_offset(offset);
  range->set_length(length);
}

// The name a push call's errors give it: `base` ("PushSparse" or "PushDense") and its kind.
inline const char* PushCallName(PushKind kind, const char* base) {
  const bool sparse = base[4] == 'S';
  switch (kind) {
    case PushKind::kDelta:
      return sparse ? "PushSparse (delta)" : "PushDense (delta)";
    case PushKind::kAccumulate:
      return sparse ? "PushSparse (accumulate)" : "PushDense (accumulate)";
    case PushKind::kInitialize:
      return sparse ? "PushSparse (initialize)" : "PushDense (initialize)";
    case PushKind::kGradient:
      break;
  }
  return base;
}

// Open presence calls (PsClient::Attend), one per server, and those that ended.
struct Presence {
  absl::Mutex mu;
  std::vector<std::unique_ptr<Call<proto::BarrierRequest, proto::BarrierReply>>> calls
      ABSL_GUARDED_BY(mu);
  int open ABSL_GUARDED_BY(mu) = 0;  // calls whose callback has not run
  uint32_t worker_id ABSL_GUARDED_BY(mu) = 0;
  bool ending ABSL_GUARDED_BY(mu) = false;  // EndPresence ran: no call is opened again
};

// Starts a call of PsService's `method` on `channel` for the request and reply types of
// dense_wire.h, through a generic stub: the same channel, deadline and metadata as the
// generated stub's calls (Launch passes that stub, which is not needed here).
//
// The starter travels in the call's callback (Launch sends a call again with it), so it must not
// own the channel: a callback that dropped the last reference would destroy the channel on the
// channel's own callback thread, which gRPC refuses by aborting (grpc_cq_internal_unref). The
// client's transport owns the channels and outlives every call (~PsClient waits for them).
template <class CallT>
struct WireStarter {
  grpc::Channel* channel;
  std::string method;

  template <class Stub, class Request, class Reply, class Done>
  void operator()(Stub*, grpc::ClientContext* context, const Request* request, Reply* reply,
                  Done done) const {
    // A shared_ptr that shares no ownership (aliasing an empty one): the stub only borrows it.
    std::shared_ptr<grpc::ChannelInterface> borrowed(std::shared_ptr<void>(), channel);
    grpc::TemplatedGenericStub<decltype(CallT::request), decltype(CallT::reply)>(borrowed)
        .UnaryCall(context, method, grpc::StubOptions(), request, reply, std::move(done));
  }
};

}  // namespace fleet::ps::detail

// Each starts one RPC through the stub's callback interface.
#define FLEET_PS_STARTER(Method)                                          \
  [](auto* async, auto* context, auto* request, auto* reply, auto done) { \
    async->Method(context, request, reply, std::move(done));              \
  }

namespace fleet::ps {

template <class CallT, class Start, class OnReply>
void PsClient::Launch(size_t server, std::string what, absl::Duration timeout, CallT* call,
                      Start start, std::shared_ptr<detail::CallState> state, OnReply on_reply) {
  const absl::Time deadline = absl::Now() + timeout;
  call->context.set_deadline(absl::ToChronoTime(deadline));
  // A job that takes restarted servers waits for a server that is down instead of failing at
  // once (bounded by the deadline all the same).
  if (options_.server_restarts) call->context.set_wait_for_ready(true);
  if (!options_.job_id.empty()) call->context.AddMetadata(detail::kJobIdKey, options_.job_id);
  {
    absl::MutexLock lock(&inflight_->mu);
    ++inflight_->count;
  }
  std::string where =
      absl::StrCat(what, " on parameter server ", server, " at ", options_.endpoints[server]);
  const RpcKind kind = RpcKindOf(call->request);
  const size_t bytes_sent = call->request.ByteSizeLong();
  const absl::Time begun = absl::Now();
  meter_->Begin();
  if (state->cancellable()) {
    state->Track(call, [context = &call->context] { context->TryCancel(); });
  }
  start(transport_->stubs[server]->async(), &call->context, &call->request, &call->reply,
        [this, call, server, what = std::move(what), deadline, start, where = std::move(where),
         state = std::move(state), inflight = inflight_, incarnations = incarnations_,
         on_reply = std::move(on_reply), meter = meter_, kind, bytes_sent, begun,
         timeout](grpc::Status transport) mutable {
          meter->End(kind, absl::Now() - begun, bytes_sent, call->reply.ByteSizeLong(),
                     transport.ok() ? static_cast<absl::StatusCode>(call->reply.status().code())
                                    : static_cast<absl::StatusCode>(transport.error_code()));
          if (options_.server_restarts && transport.error_code() == grpc::StatusCode::UNAVAILABLE &&
              absl::Now() < deadline) {
            // The connection dropped under the call (the server died): send it again, to wait
            // for the server's restart within the same deadline. The new call holds the
            // in-flight count before this one gives it back, so the client outlives both.
            auto* again = new CallT;
            again->request = std::move(call->request);
            if (state->cancellable()) state->Untrack(call);
            delete call;
            Launch(server, std::move(what), deadline - absl::Now(), again, start, std::move(state),
                   std::move(on_reply));
            absl::MutexLock lock(&inflight->mu);
            --inflight->count;
            return;
          }
          absl::Status status = detail::CallStatus(transport, call->reply.status(), where);
          if (transport.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
            // Say which wait ran out: a frozen or overloaded server shows only as this.
            status = absl::Status(
                status.code(),
                absl::StrCat(status.message(), " (no reply within the call's deadline of ",
                             absl::FormatDuration(timeout),
                             ": the server is frozen, overloaded or cut off; a worker's "
                             "deadline is a_sync_configs['rpc_timeout_s'], a barrier's the step "
                             "timeout on top)"));
          }
          // A reply of a restarted server is refused whatever it says.
          if (auto same = detail::CheckIncarnation(incarnations.get(), server, transport,
                                                   call->context, where);
              !same.ok()) {
            status = absl::Status(same.code(), absl::StrCat(where, ": ", same.message()));
          }
          if (status.ok()) {
            status = on_reply(call->reply);
            if (!status.ok())
              status = absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
          }
          if (state->cancellable()) state->Untrack(call);
          delete call;
          state->Done(std::move(status));
          absl::MutexLock lock(&inflight->mu);
          --inflight->count;
        });
}

template <class CallT, class Start, class OnReply>
absl::Status PsClient::CallAll(const std::string& what, absl::Duration timeout, Start start,
                               const std::function<void(CallT*)>& fill, OnReply on_reply) {
  std::vector<size_t> servers(num_servers());
  for (size_t s = 0; s < servers.size(); ++s) servers[s] = s;
  return CallServers<CallT>(what, timeout, servers, start, fill, on_reply);
}

template <class CallT, class Start, class OnReply>
absl::Status PsClient::CallServers(const std::string& what, absl::Duration timeout,
                                   const std::vector<size_t>& servers, Start start,
                                   const std::function<void(CallT*)>& fill, OnReply on_reply) {
  if (servers.empty()) return absl::OkStatus();
  auto state = std::make_shared<detail::CallState>(static_cast<int>(servers.size()));
  for (size_t s : servers) {
    auto* call = new CallT;
    fill(call);
    Launch(s, what, timeout, call, start, state,
           [s, &on_reply](const auto& reply) { return on_reply(s, reply); });
  }
  // The callbacks reference on_reply: wait for all of them before returning.
  return state->Wait();
}

}  // namespace fleet::ps
