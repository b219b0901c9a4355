#include "ps/client/client.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ps/client/detail/client_call.h"
#include "ps/client/detail/dense_share_slots.h"
#include "ps/client/detail/dense_wire.h"
#include "ps/client/detail/key_dedup.h"
#include "ps/client/detail/shm_slots.h"
#include "ps/detail/endpoint.h"
#include "ps/detail/transport.h"

namespace fleet::ps {
namespace detail {

// gRPC and absl share their status code numbering (google.rpc.Code).
absl::Status CallStatus(const grpc::Status& transport, const proto::RpcStatus& reply,
                        const std::string& where) {
  if (!transport.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(transport.error_code()),
                        absl::StrCat(where, ": ", transport.error_message()));
  }
  if (reply.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(reply.code()),
                        absl::StrCat(where, ": ", reply.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckIncarnation(Incarnations* incarnations, size_t server,
                              const grpc::Status& transport, const grpc::ClientContext& context,
                              const std::string& where) {
  if (!transport.ok()) {
    const auto code = transport.error_code();
    if (code == grpc::StatusCode::DEADLINE_EXCEEDED || code == grpc::StatusCode::UNAVAILABLE) {
      absl::MutexLock lock(&incarnations->mu);
      incarnations->unresponsive[server] = true;
    }
  }
  const auto& metadata = context.GetServerInitialMetadata();
  auto it = metadata.find(kIncarnationKey);
  if (it == metadata.end()) return absl::OkStatus();
  const std::string seen(it->second.data(), it->second.size());
  absl::MutexLock lock(&incarnations->mu);
  incarnations->unresponsive[server] = false;
  std::string& first = incarnations->first[server];
  if (first.empty()) first = seen;
  if (seen == first) return absl::OkStatus();
  auto loaded = metadata.find(kLoadedFromKey);
  if (incarnations->accept_reloaded && loaded != metadata.end() && !loaded->second.empty()) {
    const std::string from(loaded->second.data(), loaded->second.size());
    std::fprintf(stderr,
                 "fleet: parameter server %zu restarted under the running job (incarnation %s, "
                 "now %s) and reloaded its tables from checkpoint %s; going on with it (%s)\n",
                 server, first.c_str(), seen.c_str(), from.c_str(), where.c_str());
    first = seen;
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat(
      "parameter server ", server, " restarted under the running job (incarnation ", first,
      ", now ", seen, ")", incarnations->accept_reloaded ? " without loading a checkpoint" : "",
      ": it lost the rows the job had put in its tables, so its replies cannot be trusted; "
      "restart the job from a checkpoint",
      incarnations->accept_reloaded
          ? " (the job takes restarted servers: start the server again with the job's latest "
            "checkpoint, fleet.init_server(dirname))"
          : ""));
}

}  // namespace detail

namespace {

using BarrierCall = detail::Call<proto::BarrierRequest, proto::BarrierReply>;
// The calls that carry a whole dense table: its floats go through dense_wire.h, one copy at each
// end of the call instead of protobuf's two.
using PullDenseCall = detail::Call<
    proto::PullDenseRequest,
    detail::SliceFieldReply<proto::PullDenseReply, proto::PullDenseReply::kValuesFieldNumber>>;
using PushDenseCall = detail::Call<
    detail::SliceFieldRequest<proto::PushDenseRequest, proto::PushDenseRequest::kGradsFieldNumber>,
    detail::SliceFieldReply<proto::PushReply, proto::PushReply::kValuesFieldNumber>>;

using HeartbeatCall = detail::Call<proto::HeartbeatRequest, proto::HeartbeatReply>;

}  // namespace

PsClient::PsClient(ClientOptions options)
    : options_(std::move(options)),
      transport_(std::make_unique<detail::Transport>()),
      accumulate_sent_(new std::atomic<uint32_t>[options_.endpoints.size()]()) {}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(ClientOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("PsClient: no endpoints");
  for (size_t s = 0; s < options.endpoints.size(); ++s) {
    auto status = detail::CheckEndpoint(options.endpoints[s], false,
                                        absl::StrCat("PsClient: endpoint of server ", s));
    if (!status.ok()) return status;
  }
  const std::pair<const char*, absl::Duration> timeouts[] = {
      {"connect_timeout", options.connect_timeout},
      {"rpc_timeout", options.rpc_timeout},
      {"admin_timeout", options.admin_timeout}};
  for (const auto& [name, timeout] : timeouts) {
    if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("PsClient: ", name,
                                                     " must be positive and "
                                                     "finite, got ",
                                                     absl::FormatDuration(timeout)));
    }
  }
  if (options.max_keys_per_request == 0) {
    return absl::InvalidArgumentError("PsClient: max_keys_per_request must be at least 1");
  }
  std::unique_ptr<PsClient> client(new PsClient(std::move(options)));
  client->inflight_ = std::make_shared<detail::Inflight>();
  client->incarnations_ = std::make_shared<detail::Incarnations>();
  {
    absl::MutexLock lock(&client->incarnations_->mu);
    client->incarnations_->first.resize(client->options_.endpoints.size());
    client->incarnations_->unresponsive.resize(client->options_.endpoints.size());
    client->incarnations_->accept_reloaded = client->options_.server_restarts;
  }
  client->presence_ = std::make_unique<detail::Presence>();
  client->dedup_pool_ = std::make_unique<detail::KeyDedupPool>();
  if (auto s = client->Handshake(); !s.ok()) return s;
  return client;
}

PsClient::~PsClient() {
  if (state_.exchange(kClosed) == kOpen) DetachSharedMemory();
  EndPresence();
  WaitForInflight();
}

void PsClient::WaitForInflight() {
  if (!inflight_) return;
  absl::MutexLock lock(&inflight_->mu);
  inflight_->mu.Await(absl::Condition(
      +[](int* count) { return *count == 0; }, &inflight_->count));
}

void PsClient::Close() {
  if (state_.exchange(kClosed) == kOpen) DetachSharedMemory();
  EndPresence();
  WaitForInflight();
}

const std::string& PsClient::target(size_t server) const { return transport_->targets.at(server); }

absl::Status PsClient::CheckUsable(const char* what) const {
  switch (state_.load()) {
    case kOpen:
      return absl::OkStatus();
    case kStopped:
      return absl::UnavailableError(
          absl::StrCat(what, ": the parameter servers were stopped by this client (stop_servers)"));
    case kClosed:
      break;
  }
  return absl::UnavailableError(absl::StrCat(what, ": the client is closed"));
}

absl::Status PsClient::Handshake() {
  const grpc::ChannelArguments args = detail::WorkerChannelArguments();
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  for (const std::string& endpoint : options_.endpoints) {
    transport_->channels.push_back(
        grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args));
    transport_->targets.push_back(endpoint);
  }
  for (size_t s = 0; s < num_servers(); ++s) {
    if (!transport_->channels[s]->WaitForConnected(absl::ToChronoTime(deadline))) {
      return absl::UnavailableError(absl::StrCat("cannot connect to parameter server ", s, " at ",
                                                 options_.endpoints[s], " within ",
                                                 absl::FormatDuration(options_.connect_timeout)));
    }
    // The server is up, so its Unix socket, if it has one, is there now: the connect below
    // succeeds or is refused at once (bounded anyway).
    const std::string& endpoint = options_.endpoints[s];
    const std::string local = detail::LocalTransportAddress(endpoint);
    if (!options_.local_socket || options_.local_host.empty() || local.empty() ||
        detail::EndpointHost(endpoint) != options_.local_host) {
      continue;
    }
    auto channel =
        detail::ConnectLocal(local, args, std::min(deadline, absl::Now() + absl::Seconds(2)));
    if (channel == nullptr) {
      std::fprintf(stderr,
                   "fleet: parameter server %zu at %s is on this host but does not answer on its "
                   "local transport %s (its local_transport is off, or it runs in another "
                   "network namespace): calling it over TCP\n",
                   s, endpoint.c_str(), local.c_str());
      continue;
    }
    transport_->channels[s] = std::move(channel);
    transport_->targets[s] = local;
  }
  for (const auto& channel : transport_->channels) {
    transport_->stubs.push_back(proto::PsService::NewStub(channel));
  }
  std::vector<proto::ServerConfig> configs(num_servers());
  auto status = CallAll<HeartbeatCall>(
      "Heartbeat", options_.rpc_timeout, FLEET_PS_STARTER(Heartbeat), [](HeartbeatCall*) {},
      [&](size_t s, const proto::HeartbeatReply& reply) {
        configs[s] = reply.config();
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  status = AdoptConfigs(configs);
  if (!status.ok()) return status;
  AttachSharedMemory();
  return absl::OkStatus();
}

absl::Status PsClient::AdoptConfigs(const std::vector<proto::ServerConfig>& configs) {
  const uint32_t n = static_cast<uint32_t>(configs.size());
  for (uint32_t s = 0; s < n; ++s) {
    const auto& config = configs[s];
    if (config.server_index() != s || config.num_servers() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter server at ", options_.endpoints[s], " is server ", config.server_index(),
          " of ", config.num_servers(), ", but the client lists it as server ", s, " of ", n));
    }
    if (config.tables_size() != configs[0].tables_size()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter server at ", options_.endpoints[s],
                                                     " holds other tables than server 0"));
    }
    for (int t = 0; t < config.tables_size(); ++t) {
      if (config.tables(t).SerializeAsString() != configs[0].tables(t).SerializeAsString()) {
        return absl::InvalidArgumentError(absl::StrCat("table ", config.tables(t).table_id(),
                                                       " differs between server 0 and server ", s,
                                                       " at ", options_.endpoints[s]));
      }
    }
  }
  for (const auto& table : configs[0].tables()) {
    tables_[table.table_id()] = table;
    if (table.type() != proto::DENSE) continue;
    DenseRoute& route = dense_[table.table_id()];
    route.layout.dim = table.dim();
    route.layout.block_size =
        table.dense_block_size() == 0 ? kDefaultDenseBlockSize : table.dense_block_size();
    route.blocks.resize(n);
    route.local_size.assign(n, 0);
    route.block_server.clear();
    route.block_position.clear();
    for (uint64_t b = 0; b < route.layout.num_blocks(); ++b) {
      const uint32_t s = options_.sharding.block_to_server(b, n);
      if (s >= n) return absl::InvalidArgumentError("block sharding returned a server >= n");
      route.blocks[s].push_back(b);
      route.block_server.push_back(s);
      route.block_position.push_back(route.local_size[s]);
      route.local_size[s] += route.layout.BlockLength(b);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::TableConfig> PsClient::Table(uint32_t table_id) const {
  auto it = tables_.find(table_id);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("the parameter servers have no table ", table_id));
  }
  return it->second;
}

uint32_t PsClient::ServerOf(int64_t key) const {
  const uint32_t n = static_cast<uint32_t>(num_servers());
  return n == 1 ? 0 : options_.sharding.key_to_server(key, n);
}

Future PsClient::FailSharding(const std::shared_ptr<detail::CallState>& state) const {
  // Requests already sent finish on their own; the call reports the broken sharding function.
  state->Done(absl::InvalidArgumentError(
      absl::StrCat("the key sharding function returned a server index >= ", num_servers())));
  return Future(state);
}

absl::StatusOr<size_t> PsClient::SparseDim(uint32_t table_id) const {
  auto it = tables_.find(table_id);
  if (it == tables_.end() || it->second.type() != proto::SPARSE) {
    return absl::NotFoundError(
        absl::StrCat("the parameter servers have no sparse table ", table_id));
  }
  return it->second.dim();
}

absl::StatusOr<const PsClient::DenseRoute*> PsClient::Dense(uint32_t table_id) const {
  auto it = dense_.find(table_id);
  if (it == dense_.end()) {
    return absl::NotFoundError(
        absl::StrCat("the parameter servers have no dense table ", table_id));
  }
  return &it->second;
}

Future PsClient::PullDense(uint32_t table_id, absl::Span<float> out) {
  if (auto s = CheckUsable("PullDense"); !s.ok()) return Future::Failed(s);
  auto route_or = Dense(table_id);
  if (!route_or.ok()) return Future::Failed(route_or.status());
  const DenseRoute* route = *route_or;
  if (out.size() != route->layout.dim) {
    return Future::Failed(absl::InvalidArgumentError(
        absl::StrCat("PullDense of table ", table_id, ": the table has ", route->layout.dim,
                     " floats, the output ", out.size())));
  }
  std::vector<size_t> servers;
  for (size_t s = 0; s < route->blocks.size(); ++s) {
    if (!route->blocks[s].empty()) servers.push_back(s);
  }
  auto state = std::make_shared<detail::CallState>(static_cast<int>(servers.size()));
  const std::string what = absl::StrCat("PullDense of table ", table_id);
  for (size_t s : servers) {
    auto* call = new PullDenseCall;
    call->request.set_table_id(table_id);
    auto lease = shm_[s] != nullptr ? detail::ShmSlots::Acquire(shm_[s]) : nullptr;
    if (lease != nullptr) {
      call->request.set_shm_segment(lease->segment_id());
      detail::SetShmRange(call->request.mutable_shm_values(), lease->values_offset(),
                          route->local_size[s] * sizeof(float));
    }
    Launch(s, what, options_.rpc_timeout, call,
           detail::WireStarter<PullDenseCall>{transport_->channels[s].get(),
                                              detail::PsMethod("PullDense")},
           state, [out, route, s, lease](const auto& reply) {
             if (lease == nullptr) return CopyDenseBlocks(reply.values(), *route, s, out);
             CopyDenseBlocks(lease->values(), *route, s, out);
             lease->Release();
             return absl::OkStatus();
           });
  }
  return Future(state);
}

absl::Status PsClient::CopyDenseBlocks(const detail::FieldBytes& values, const DenseRoute& route,
                                       size_t server, absl::Span<float> out) {
  if (values.size() != route.local_size[server] * sizeof(float)) {
    return absl::InternalError(absl::StrCat("reply holds ", values.size(), " bytes, expected ",
                                            route.local_size[server] * sizeof(float)));
  }
  size_t offset = 0;
  for (uint64_t b : route.blocks[server]) {
    const size_t bytes = route.layout.BlockLength(b) * sizeof(float);
    values.CopyOut(offset, bytes, out.data() + route.layout.BlockBegin(b));
    offset += bytes;
  }
  return absl::OkStatus();
}

void PsClient::CopyDenseBlocks(const char* values, const DenseRoute& route, size_t server,
                               absl::Span<float> out) {
  for (uint64_t b : route.blocks[server]) {
    const size_t bytes = route.layout.BlockLength(b) * sizeof(float);
    std::memcpy(out.data() + route.layout.BlockBegin(b), values, bytes);
    values += bytes;
  }
}

Future PsClient::PushDense(uint32_t table_id, absl::Span<const float> grads, PushKind kind) {
  return PushDenseAndMaybePull(table_id, grads, kind, {});
}

Future PsClient::PushPullDense(uint32_t table_id, absl::Span<const float> grads,
                               absl::Span<float> out, PushKind kind) {
  if (kind != PushKind::kGradient && kind != PushKind::kDelta) {
    return Future::Failed(absl::InvalidArgumentError(absl::StrCat(
        "PushPullDense of table ", table_id, " as ", detail::PushCallName(kind, "PushDense"),
        ": only a push of gradients or deltas returns values")));
  }
  return PushDenseAndMaybePull(table_id, grads, kind, out);
}

Future PsClient::PushDenseAndMaybePull(uint32_t table_id, absl::Span<const float> grads,
                                       PushKind kind, absl::Span<float> out,
                                       std::unique_ptr<DenseShares> shares) {
  const bool pull = !out.empty();
  const char* name = pull ? "PushPullDense" : "PushDense";
  if (auto s = CheckUsable(name); !s.ok()) return Future::Failed(s);
  const bool is_delta = kind == PushKind::kDelta;
  auto route_or = Dense(table_id);
  if (!route_or.ok()) return Future::Failed(route_or.status());
  const DenseRoute* route = *route_or;
  if (shares != nullptr && shares->route_ != route) {
    return Future::Failed(absl::InvalidArgumentError(
        absl::StrCat(name, " of table ", table_id, ": the gradients were written for table ",
                     shares->table_id_)));
  }
  // Gradients written into shares have the table's size by construction.
  const size_t pushed = shares != nullptr ? route->layout.dim : grads.size();
  if (pushed != route->layout.dim || (pull && out.size() != route->layout.dim)) {
    return Future::Failed(absl::InvalidArgumentError(absl::StrCat(
        name, " of table ", table_id, ": the table has ", route->layout.dim, " floats, the push ",
        grads.size(), pull ? ", the output " : "", pull ? absl::StrCat(out.size()) : "")));
  }
  std::vector<size_t> servers;
  for (size_t s = 0; s < route->blocks.size(); ++s) {
    if (!route->blocks[s].empty()) servers.push_back(s);
  }
  auto state = std::make_shared<detail::CallState>(static_cast<int>(servers.size()));
  const std::string what = absl::StrCat(detail::PushCallName(kind, name), " of table ", table_id);
  for (size_t s : servers) {
    auto* call = new PushDenseCall;
    proto::PushDenseRequest& header = call->request.header;
    header.set_table_id(table_id);
    header.set_is_delta(is_delta);
    header.set_accumulate(kind == PushKind::kAccumulate);
    header.set_initialize(kind == PushKind::kInitialize);
    header.set_return_values(pull);
    // The one copy of the gradients on this side: into the memory shared with a server on this
    // host (its values come back there too), else straight into the slice that is sent.
    const size_t local_bytes = route->local_size[s] * sizeof(float);
    // Shares hold this server's gradients in their slot already (DenseShares::Write).
    std::shared_ptr<detail::ShmSlots::Lease> lease;
    if (shares != nullptr) {
      lease = shares->slots_->leases[s];
    } else if (shm_[s] != nullptr) {
      lease = detail::ShmSlots::Acquire(shm_[s]);
    }
    char* bytes = lease != nullptr ? lease->grads() : call->request.AllocatePayload(local_bytes);
    if (lease != nullptr) {
      header.set_shm_segment(lease->segment_id());
      detail::SetShmRange(header.mutable_shm_grads(), lease->grads_offset(), local_bytes);
      if (pull)
        detail::SetShmRange(header.mutable_shm_values(), lease->values_offset(), local_bytes);
    }
    for (size_t i = 0; shares == nullptr && i < route->blocks[s].size(); ++i) {
      const uint64_t b = route->blocks[s][i];
      const size_t length = route->layout.BlockLength(b) * sizeof(float);
      std::memcpy(bytes, grads.data() + route->layout.BlockBegin(b), length);
      bytes += length;
    }
    if (kind == PushKind::kAccumulate) accumulate_sent_[s].fetch_add(1);
    Launch(s, what, options_.rpc_timeout, call,
           detail::WireStarter<PushDenseCall>{transport_->channels[s].get(),
                                              detail::PsMethod("PushDense")},
           state, [pull, out, route, s, lease](const auto& reply) {
             if (lease == nullptr) {
               return pull ? CopyDenseBlocks(reply.values(), *route, s, out) : absl::OkStatus();
             }
             if (pull) CopyDenseBlocks(lease->values(), *route, s, out);
             lease->Release();
             return absl::OkStatus();
           });
  }
  // The calls release the slots on their replies.
  if (shares != nullptr) shares->slots_->pushed = true;
  return Future(state);
}

Future PsClient::Barrier(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                         absl::Duration timeout) {
  if (auto s = CheckUsable("Barrier"); !s.ok()) return Future::Failed(s);
  if (num_workers == 0 || worker_id >= num_workers) {
    return Future::Failed(absl::InvalidArgumentError(absl::StrCat(
        "Barrier '", name, "': worker id ", worker_id, " is not in [0, ", num_workers, ")")));
  }
  if (timeout <= absl::ZeroDuration() || timeout > absl::Hours(24 * 24)) {
    // The request carries milliseconds in 32 bits: 24 days at most.
    return Future::Failed(absl::InvalidArgumentError(
        absl::StrCat("Barrier '", name, "': timeout must be in (0, 24 days], got ",
                     absl::FormatDuration(timeout))));
  }
  auto state = std::make_shared<detail::CallState>(1);
  auto* call = new BarrierCall;
  call->request.set_name(name);
  call->request.set_num_workers(num_workers);
  call->request.set_worker_id(worker_id);
  call->request.set_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(timeout)));
  Launch(0, absl::StrCat("Barrier '", name, "' (worker ", worker_id, ")"),
         timeout + options_.rpc_timeout, call, FLEET_PS_STARTER(Barrier), state,
         [](const proto::BarrierReply&) { return absl::OkStatus(); });
  return Future(state);
}

}  // namespace fleet::ps
