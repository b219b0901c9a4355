#include "ps/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace fleet::ps {
namespace {

template <class Request, class Reply>
struct Call {
  grpc::ClientContext context;
  Request request;
  Reply reply;
};
using PullSparseCall = Call<proto::PullSparseRequest, proto::PullSparseReply>;
using PushSparseCall = Call<proto::PushSparseRequest, proto::PushReply>;
using PullDenseCall = Call<proto::PullDenseRequest, proto::PullDenseReply>;
using PushDenseCall = Call<proto::PushDenseRequest, proto::PushReply>;
using BarrierCall = Call<proto::BarrierRequest, proto::BarrierReply>;
using SaveCall = Call<proto::SaveRequest, proto::SaveLoadReply>;
using LoadCall = Call<proto::LoadRequest, proto::SaveLoadReply>;
using ShrinkCall = Call<proto::ShrinkRequest, proto::ShrinkReply>;
using StatsCall = Call<proto::StatsRequest, proto::StatsReply>;
using HeartbeatCall = Call<proto::HeartbeatRequest, proto::HeartbeatReply>;
using StopCall = Call<proto::StopRequest, proto::StopReply>;

// Each starts one RPC through the stub's callback interface.
#define FLEET_PS_STARTER(Method)                                                     \
  [](auto* async, auto* context, auto* request, auto* reply, auto done) {           \
    async->Method(context, request, reply, std::move(done));                         \
  }

// The one place where a gRPC status (transport) and a reply's RpcStatus (application) become an
// absl::Status; `where` names the call, the server and its endpoint. gRPC and absl share their
// status code numbering (google.rpc.Code).
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

}  // namespace

namespace detail {
// Counts the RPCs in flight; each callback holds a reference, so the count outlives the client
// for as long as a callback still touches it.
struct Inflight {
  absl::Mutex mu;
  int count ABSL_GUARDED_BY(mu) = 0;
};
}  // namespace detail

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(ClientOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("PsClient: no endpoints");
  if (options.max_keys_per_request == 0) options.max_keys_per_request = 1;
  std::unique_ptr<PsClient> client(new PsClient(std::move(options)));
  client->inflight_ = std::make_shared<detail::Inflight>();
  if (auto s = client->Handshake(); !s.ok()) return s;
  return client;
}

PsClient::~PsClient() {
  if (!inflight_) return;
  absl::MutexLock lock(&inflight_->mu);
  inflight_->mu.Await(absl::Condition(
      +[](int* count) { return *count == 0; }, &inflight_->count));
}

absl::Status PsClient::Handshake() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect soon after a server comes (back) up rather than after gRPC's default backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  for (const std::string& endpoint : options_.endpoints) {
    channels_.push_back(
        grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(proto::PsService::NewStub(channels_.back()));
  }
  for (size_t s = 0; s < channels_.size(); ++s) {
    if (!channels_[s]->WaitForConnected(absl::ToChronoTime(deadline))) {
      return absl::UnavailableError(absl::StrCat(
          "cannot connect to parameter server ", s, " at ", options_.endpoints[s], " within ",
          absl::FormatDuration(options_.connect_timeout)));
    }
  }
  std::vector<proto::ServerConfig> configs(stubs_.size());
  auto status = CallAll<HeartbeatCall>(
      "Heartbeat", options_.rpc_timeout, FLEET_PS_STARTER(Heartbeat), [](HeartbeatCall*) {},
      [&](size_t s, const proto::HeartbeatReply& reply) {
        configs[s] = reply.config();
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return AdoptConfigs(configs);
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
      return absl::InvalidArgumentError(absl::StrCat("parameter server at ",
                                                     options_.endpoints[s],
                                                     " holds other tables than server 0"));
    }
    for (int t = 0; t < config.tables_size(); ++t) {
      if (config.tables(t).SerializeAsString() != configs[0].tables(t).SerializeAsString()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table ", config.tables(t).table_id(), " differs between server 0 and server ", s,
            " at ", options_.endpoints[s]));
      }
    }
  }
  for (const auto& table : configs[0].tables()) {
    tables_[table.table_id()] = table;
    if (table.type() != proto::DENSE) continue;
    DenseRoute& route = dense_[table.table_id()];
    route.layout.dim = table.dim();
    route.layout.block_size = table.dense_block_size() == 0 ? 8192 : table.dense_block_size();
    route.blocks.resize(n);
    route.local_size.assign(n, 0);
    for (uint64_t b = 0; b < route.layout.num_blocks(); ++b) {
      const uint32_t s = options_.sharding.block_to_server(b, n);
      if (s >= n) return absl::InvalidArgumentError("block sharding returned a server >= n");
      route.blocks[s].push_back(b);
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

template <class CallT, class Start, class OnReply>
void PsClient::Launch(size_t server, std::string what, absl::Duration timeout, CallT* call,
                      Start start, std::shared_ptr<detail::CallState> state, OnReply on_reply) {
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  {
    absl::MutexLock lock(&inflight_->mu);
    ++inflight_->count;
  }
  std::string where = absl::StrCat(what, " on parameter server ", server, " at ",
                                   options_.endpoints[server]);
  start(stubs_[server]->async(), &call->context, &call->request, &call->reply,
        [call, where = std::move(where), state = std::move(state), inflight = inflight_,
         on_reply = std::move(on_reply)](grpc::Status transport) {
          absl::Status status = CallStatus(transport, call->reply.status(), where);
          if (status.ok()) {
            status = on_reply(call->reply);
            if (!status.ok()) status = absl::Status(status.code(),
                                                    absl::StrCat(where, ": ", status.message()));
          }
          delete call;
          state->Done(std::move(status));
          absl::MutexLock lock(&inflight->mu);
          --inflight->count;
        });
}

template <class CallT, class Start, class OnReply>
absl::Status PsClient::CallAll(const char* what, absl::Duration timeout, Start start,
                               const std::function<void(CallT*)>& fill, OnReply on_reply) {
  auto state = std::make_shared<detail::CallState>(static_cast<int>(stubs_.size()));
  for (size_t s = 0; s < stubs_.size(); ++s) {
    auto* call = new CallT;
    fill(call);
    Launch(s, what, timeout, call, start, state,
           [s, &on_reply](const auto& reply) { return on_reply(s, reply); });
  }
  // The callbacks reference on_reply: wait for all of them before returning.
  return state->Wait();
}

Future PsClient::PullSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                            absl::Span<float> out) {
  auto dim_or = SparseDim(table_id);
  if (!dim_or.ok()) return Future::Failed(dim_or.status());
  const size_t dim = *dim_or;
  if (out.size() != keys.size() * dim) {
    return Future::Failed(absl::InvalidArgumentError(absl::StrCat(
        "PullSparse of table ", table_id, ": ", keys.size(), " keys of dim ", dim, " need ",
        keys.size() * dim, " output floats, got ", out.size())));
  }
  // Requests are sent as soon as they fill up, so routing the rest of the keys overlaps with
  // the servers' work. The state's initial count of 1 keeps the call open until all are sent.
  auto state = std::make_shared<detail::CallState>(1);
  const std::string what = absl::StrCat("PullSparse of table ", table_id);
  const uint32_t num_servers = static_cast<uint32_t>(stubs_.size());
  const size_t max_keys = std::min(options_.max_keys_per_request, keys.size());
  struct Open {
    PullSparseCall* call = nullptr;
    char* keys = nullptr;             // into the request's keys bytes, sized for max_keys
    std::vector<uint32_t> positions;  // caller position of each key of the request
  };
  std::vector<Open> open(num_servers);
  auto send = [&](uint32_t s) {
    open[s].call->request.mutable_keys()->resize(open[s].positions.size() * sizeof(int64_t));
    state->AddPending(1);
    Launch(s, what, options_.rpc_timeout, open[s].call, FLEET_PS_STARTER(PullSparse), state,
           [out, dim, positions = std::move(open[s].positions)](
               const proto::PullSparseReply& reply) {
             const std::string& values = reply.values();
             if (values.size() != positions.size() * dim * sizeof(float)) {
               return absl::InternalError(absl::StrCat("reply holds ", values.size(),
                                                       " bytes, expected ",
                                                       positions.size() * dim * 4));
             }
             const float* v = reinterpret_cast<const float*>(values.data());
             for (size_t j = 0; j < positions.size(); ++j) {
               std::memcpy(out.data() + positions[j] * dim, v + j * dim, dim * sizeof(float));
             }
             return absl::OkStatus();
           });
    open[s] = Open();
  };
  absl::flat_hash_map<int64_t, uint32_t> first;  // key -> first caller position
  first.reserve(keys.size());
  std::vector<std::pair<uint32_t, uint32_t>> repeats;  // (caller position, first position)
  for (uint32_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] = first.try_emplace(keys[i], i);
    if (!inserted) {
      repeats.emplace_back(i, it->second);
      continue;
    }
    const uint32_t s = num_servers == 1 ? 0 : options_.sharding.key_to_server(keys[i], num_servers);
    if (s >= num_servers) {
      state->Done(absl::InvalidArgumentError("key sharding returned a server >= n"));
      for (auto& o : open) delete o.call;
      return Future(state);
    }
    Open& o = open[s];
    if (o.call == nullptr) {
      o.call = new PullSparseCall;
      o.call->request.set_table_id(table_id);
      o.call->request.mutable_keys()->resize(max_keys * sizeof(int64_t));
      o.keys = o.call->request.mutable_keys()->data();
      o.positions.reserve(max_keys);
    }
    std::memcpy(o.keys + o.positions.size() * sizeof(int64_t), &keys[i], sizeof(int64_t));
    o.positions.push_back(i);
    if (o.positions.size() == max_keys) send(s);
  }
  for (uint32_t s = 0; s < num_servers; ++s) {
    if (open[s].call != nullptr) send(s);
  }
  if (!repeats.empty()) {
    state->SetFinisher([out, dim, repeats = std::move(repeats)] {
      for (auto [pos, src] : repeats) {
        std::memcpy(out.data() + pos * dim, out.data() + src * dim, dim * sizeof(float));
      }
    });
  }
  state->Done(absl::OkStatus());
  return Future(state);
}

Future PsClient::PushSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                            absl::Span<const float> grads, bool is_delta) {
  auto dim_or = SparseDim(table_id);
  if (!dim_or.ok()) return Future::Failed(dim_or.status());
  const size_t dim = *dim_or;
  const size_t row_bytes = dim * sizeof(float);
  if (grads.size() != keys.size() * dim) {
    return Future::Failed(absl::InvalidArgumentError(absl::StrCat(
        "PushSparse of table ", table_id, ": ", keys.size(), " keys of dim ", dim, " need ",
        keys.size() * dim, " floats, got ", grads.size())));
  }
  // Pass 1: the gradients of a repeated key are summed into `merged`, under its first position.
  absl::flat_hash_map<int64_t, uint32_t> first;
  first.reserve(keys.size());
  std::vector<uint8_t> repeated;                  // per position, once a repeat is seen
  absl::flat_hash_map<uint32_t, size_t> merged_at;  // first position -> offset in merged
  std::vector<float> merged;
  for (uint32_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] = first.try_emplace(keys[i], i);
    if (inserted) continue;
    if (repeated.empty()) repeated.assign(keys.size(), 0);
    repeated[i] = 1;
    auto [m, added] = merged_at.try_emplace(it->second, merged.size());
    const float* src = grads.data() + size_t{i} * dim;
    if (added) {
      const float* head = grads.data() + size_t{it->second} * dim;
      merged.insert(merged.end(), head, head + dim);
    }
    for (size_t k = 0; k < dim; ++k) merged[m->second + k] += src[k];
  }
  // Pass 2: requests in the caller's key order, each sent as soon as it is full.
  auto state = std::make_shared<detail::CallState>(1);
  const std::string what = absl::StrCat(is_delta ? "PushSparse (delta)" : "PushSparse",
                                        " of table ", table_id);
  const uint32_t num_servers = static_cast<uint32_t>(stubs_.size());
  const size_t max_keys = std::min(options_.max_keys_per_request, keys.size());
  struct Open {
    PushSparseCall* call = nullptr;
    char* keys = nullptr;   // into the request's keys bytes, sized for max_keys
    char* grads = nullptr;  // into the request's grads bytes, likewise
    size_t count = 0;
  };
  std::vector<Open> open(num_servers);
  auto send = [&](uint32_t s) {
    Open& o = open[s];
    o.call->request.mutable_keys()->resize(o.count * sizeof(int64_t));
    o.call->request.mutable_grads()->resize(o.count * row_bytes);
    state->AddPending(1);
    Launch(s, what, options_.rpc_timeout, o.call, FLEET_PS_STARTER(PushSparse), state,
           [](const proto::PushReply&) { return absl::OkStatus(); });
    o = Open();
  };
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (!repeated.empty() && repeated[i]) continue;
    const uint32_t s = num_servers == 1 ? 0 : options_.sharding.key_to_server(keys[i], num_servers);
    if (s >= num_servers) {
      state->Done(absl::InvalidArgumentError("key sharding returned a server >= n"));
      for (auto& o : open) delete o.call;
      return Future(state);
    }
    Open& o = open[s];
    if (o.call == nullptr) {
      o.call = new PushSparseCall;
      o.call->request.set_table_id(table_id);
      o.call->request.set_is_delta(is_delta);
      o.call->request.mutable_keys()->resize(max_keys * sizeof(int64_t));
      o.call->request.mutable_grads()->resize(max_keys * row_bytes);
      o.keys = o.call->request.mutable_keys()->data();
      o.grads = o.call->request.mutable_grads()->data();
    }
    const float* src = grads.data() + size_t{i} * dim;
    if (!merged_at.empty()) {
      if (auto m = merged_at.find(i); m != merged_at.end()) src = merged.data() + m->second;
    }
    std::memcpy(o.keys + o.count * sizeof(int64_t), &keys[i], sizeof(int64_t));
    std::memcpy(o.grads + o.count * row_bytes, src, row_bytes);
    if (++o.count == max_keys) send(s);
  }
  for (uint32_t s = 0; s < num_servers; ++s) {
    if (open[s].call != nullptr) send(s);
  }
  state->Done(absl::OkStatus());
  return Future(state);
}

Future PsClient::PullDense(uint32_t table_id, absl::Span<float> out) {
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
    Launch(s, what, options_.rpc_timeout, call, FLEET_PS_STARTER(PullDense), state,
           [out, route, s](const proto::PullDenseReply& reply) {
             const std::string& values = reply.values();
             if (values.size() != route->local_size[s] * sizeof(float)) {
               return absl::InternalError(absl::StrCat("reply holds ", values.size(),
                                                       " bytes, expected ",
                                                       route->local_size[s] * 4));
             }
             const float* v = reinterpret_cast<const float*>(values.data());
             for (uint64_t b : route->blocks[s]) {
               const size_t length = route->layout.BlockLength(b);
               std::memcpy(out.data() + route->layout.BlockBegin(b), v, length * sizeof(float));
               v += length;
             }
             return absl::OkStatus();
           });
  }
  return Future(state);
}

Future PsClient::PushDense(uint32_t table_id, absl::Span<const float> grads, bool is_delta) {
  auto route_or = Dense(table_id);
  if (!route_or.ok()) return Future::Failed(route_or.status());
  const DenseRoute* route = *route_or;
  if (grads.size() != route->layout.dim) {
    return Future::Failed(absl::InvalidArgumentError(
        absl::StrCat("PushDense of table ", table_id, ": the table has ", route->layout.dim,
                     " floats, the push ", grads.size())));
  }
  std::vector<size_t> servers;
  for (size_t s = 0; s < route->blocks.size(); ++s) {
    if (!route->blocks[s].empty()) servers.push_back(s);
  }
  auto state = std::make_shared<detail::CallState>(static_cast<int>(servers.size()));
  const std::string what = absl::StrCat(is_delta ? "PushDense (delta)" : "PushDense",
                                        " of table ", table_id);
  for (size_t s : servers) {
    auto* call = new PushDenseCall;
    call->request.set_table_id(table_id);
    call->request.set_is_delta(is_delta);
    std::string* bytes = call->request.mutable_grads();
    bytes->reserve(route->local_size[s] * sizeof(float));
    for (uint64_t b : route->blocks[s]) {
      bytes->append(reinterpret_cast<const char*>(grads.data() + route->layout.BlockBegin(b)),
                    route->layout.BlockLength(b) * sizeof(float));
    }
    Launch(s, what, options_.rpc_timeout, call, FLEET_PS_STARTER(PushDense), state,
           [](const proto::PushReply&) { return absl::OkStatus(); });
  }
  return Future(state);
}

Future PsClient::Barrier(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                         absl::Duration timeout) {
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

absl::StatusOr<uint64_t> PsClient::Save(const std::string& dirname,
                                        std::optional<uint32_t> table_id, proto::SaveMode mode) {
  std::atomic<uint64_t> rows{0};
  auto status = CallAll<SaveCall>(
      "Save", options_.admin_timeout, FLEET_PS_STARTER(Save),
      [&](SaveCall* call) {
        call->request.set_dirname(dirname);
        call->request.set_all_tables(!table_id.has_value());
        call->request.set_table_id(table_id.value_or(0));
        call->request.set_mode(mode);
      },
      [&](size_t, const proto::SaveLoadReply& reply) {
        rows += reply.rows();
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return rows.load();
}

absl::StatusOr<uint64_t> PsClient::Load(const std::string& dirname,
                                        std::optional<uint32_t> table_id) {
  std::atomic<uint64_t> rows{0};
  auto status = CallAll<LoadCall>(
      "Load", options_.admin_timeout, FLEET_PS_STARTER(Load),
      [&](LoadCall* call) {
        call->request.set_dirname(dirname);
        call->request.set_all_tables(!table_id.has_value());
        call->request.set_table_id(table_id.value_or(0));
      },
      [&](size_t, const proto::SaveLoadReply& reply) {
        rows += reply.rows();
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return rows.load();
}

absl::StatusOr<uint64_t> PsClient::Shrink(uint32_t table_id, uint32_t max_unseen_saves) {
  std::atomic<uint64_t> removed{0};
  auto status = CallAll<ShrinkCall>(
      "Shrink", options_.admin_timeout, FLEET_PS_STARTER(Shrink),
      [&](ShrinkCall* call) {
        call->request.set_table_id(table_id);
        call->request.set_max_unseen_saves(max_unseen_saves);
      },
      [&](size_t, const proto::ShrinkReply& reply) {
        removed += reply.rows_removed();
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return removed.load();
}

absl::StatusOr<std::vector<std::vector<proto::TableStats>>> PsClient::Stats() {
  std::vector<std::vector<proto::TableStats>> stats(stubs_.size());
  auto status = CallAll<StatsCall>(
      "Stats", options_.rpc_timeout, FLEET_PS_STARTER(Stats), [](StatsCall*) {},
      [&](size_t s, const proto::StatsReply& reply) {
        stats[s].assign(reply.tables().begin(), reply.tables().end());
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return stats;
}

absl::Status PsClient::Heartbeat() {
  return CallAll<HeartbeatCall>("Heartbeat", options_.rpc_timeout, FLEET_PS_STARTER(Heartbeat),
                                [](HeartbeatCall*) {},
                                [](size_t, const proto::HeartbeatReply&) {
                                  return absl::OkStatus();
                                });
}

absl::Status PsClient::StopServers() {
  return CallAll<StopCall>("Stop", options_.rpc_timeout, FLEET_PS_STARTER(Stop),
                           [](StopCall*) {},
                           [](size_t, const proto::StopReply&) { return absl::OkStatus(); });
}

}  // namespace fleet::ps
