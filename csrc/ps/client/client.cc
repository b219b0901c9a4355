#include "ps/client/client.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "ps/client/detail/client_call.h"
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

// A sparse pull's rows stay in the received slices and are copied once, to their callers'
// positions (the reply's values are a few hundred KB a step).
using PullSparseCall = detail::Call<
    proto::PullSparseRequest,
    detail::SliceFieldReply<proto::PullSparseReply, proto::PullSparseReply::kValuesFieldNumber>>;
// A sparse push's gradients are written once, straight into the slice that is sent (a few
// hundred KB a step), not into the request's string and again by protobuf into gRPC's slices.
using PushSparseCall =
    detail::Call<detail::SliceFieldRequest<proto::PushSparseRequest,
                                           proto::PushSparseRequest::kGradsFieldNumber>,
                 proto::PushReply>;
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

void SetRange(proto::ShmRange* range, uint64_t offset, uint64_t length) {
  range->set_offset(offset);
  range->set_length(length);
}

// How many keys ahead the dedup table is prefetched.
constexpr uint32_t kDedupAhead = 64;

// Requests to each server, filled key by key in the caller's order and sent as soon as one
// holds max_keys keys, so that routing the remaining keys overlaps with the servers' work.
// `Pending` holds `call` and raw pointers into its payload, sized by `open(server)` for max_keys
// keys; `send(server, pending, count, positions)` trims the payload to `count` keys and launches
// it.
template <class Pending>
class RequestStream {
 public:
  using OpenFn = std::function<Pending(uint32_t)>;
  using SendFn = std::function<void(uint32_t, Pending&, size_t, std::vector<uint32_t>)>;

  RequestStream(size_t num_servers, size_t max_keys, OpenFn open, SendFn send)
      : max_keys_(max_keys), open_(std::move(open)), send_(std::move(send)), slots_(num_servers) {}
  ~RequestStream() {
    // Unsent after an error: the server never saw them, so their shared memory is free again.
    for (auto& slot : slots_) {
      delete slot.pending.call;
      if (slot.pending.lease != nullptr) slot.pending.lease->Release();
    }
  }

  // The request of `server` with room for one more key, and that key's index in it.
  Pending& Next(uint32_t server, size_t* index) {
    Slot& slot = slots_[server];
    if (slot.pending.call == nullptr) {
      slot.pending = open_(server);
      slot.positions.reserve(max_keys_);
    }
    *index = slot.positions.size();
    return slot.pending;
  }
  // The key at caller position `position` now fills that index; sends the request when full.
  void Commit(uint32_t server, uint32_t position) {
    Slot& slot = slots_[server];
    slot.positions.push_back(position);
    if (slot.positions.size() == max_keys_) Send(server);
  }
  // Sends the requests that are partly filled.
  void Flush() {
    for (uint32_t s = 0; s < slots_.size(); ++s) {
      if (slots_[s].pending.call != nullptr) Send(s);
    }
  }

 private:
  struct Slot {
    Pending pending;
    std::vector<uint32_t> positions;
  };
  void Send(uint32_t server) {
    Slot& slot = slots_[server];
    const size_t count = slot.positions.size();
    send_(server, slot.pending, count, std::move(slot.positions));
    slot = Slot();
  }

  size_t max_keys_;
  OpenFn open_;
  SendFn send_;
  std::vector<Slot> slots_;
};

// Copies the rows of a pull reply to their caller positions.
absl::Status ScatterRows(const detail::FieldBytes& values, absl::Span<const uint32_t> positions,
                         size_t dim, absl::Span<float> out) {
  if (values.size() != positions.size() * dim * sizeof(float)) {
    return absl::InternalError(absl::StrCat("reply holds ", values.size(), " bytes, expected ",
                                            positions.size() * dim * sizeof(float)));
  }
  values.CopyPieces(dim * sizeof(float),
                    [&](size_t j) { return out.data() + size_t{positions[j]} * dim; });
  return absl::OkStatus();
}

// The same from the rows as they lie in shared memory, in request order.
void ScatterRows(const char* rows, absl::Span<const uint32_t> positions, size_t dim,
                 absl::Span<float> out) {
  const size_t row_bytes = dim * sizeof(float);
  for (uint32_t position : positions) {
    std::memcpy(out.data() + size_t{position} * dim, rows, row_bytes);
    rows += row_bytes;
  }
}

// The gradients of keys that occur more than once in a push, summed under the first occurrence.
class MergedRepeats {
 public:
  MergedRepeats(absl::Span<const int64_t> keys, absl::Span<const float> grads, size_t dim,
                detail::KeyDedup* dedup)
      : grads_(grads), dim_(dim) {
    dedup->Reset(keys);
    for (uint32_t i = 0; i < keys.size(); ++i) {
      if (i + kDedupAhead < keys.size()) dedup->Prefetch(i + kDedupAhead);
      const uint32_t head = dedup->FirstOccurrence(i);
      if (head != i) Add(i, head, keys.size());
    }
  }
  // True for every occurrence of a key but its first.
  bool IsRepeat(uint32_t i) const { return !repeat_.empty() && repeat_[i]; }
  // The gradient to send for the key first occurring at position i.
  const float* Row(uint32_t i) const {
    if (!at_.empty()) {
      if (auto it = at_.find(i); it != at_.end()) return sums_.data() + it->second;
    }
    return grads_.data() + size_t{i} * dim_;
  }

 private:
  void Add(uint32_t i, uint32_t head, size_t n) {
    if (repeat_.empty()) repeat_.assign(n, 0);
    repeat_[i] = 1;
    auto [it, added] = at_.try_emplace(head, sums_.size());
    if (added) {
      const float* g = grads_.data() + size_t{head} * dim_;
      sums_.insert(sums_.end(), g, g + dim_);
    }
    const float* g = grads_.data() + size_t{i} * dim_;
    for (size_t k = 0; k < dim_; ++k) sums_[it->second + k] += g[k];
  }

  absl::Span<const float> grads_;
  size_t dim_;
  std::vector<uint8_t> repeat_;               // per position, once a repeat is seen
  absl::flat_hash_map<uint32_t, size_t> at_;  // first position -> offset in sums_
  std::vector<float> sums_;
};

// A slot of the memory shared with a server on this host (`slots`, null for a server on the
// wire) for one sparse request of up to `max_keys` keys: the keys at the start of the slot's
// grads half, a push's gradients (`floats_bytes`) right after them; a pull's rows go into the
// values half. Null, and the request goes on the wire, when no slot is free or it does not fit.
std::shared_ptr<detail::ShmSlots::Lease> SparseLease(const std::shared_ptr<detail::ShmSlots>& slots,
                                                     size_t max_keys, size_t push_bytes,
                                                     size_t pull_bytes) {
  if (slots == nullptr || max_keys * sizeof(int64_t) + push_bytes > slots->half() ||
      pull_bytes > slots->half()) {
    return nullptr;
  }
  return detail::ShmSlots::Acquire(slots);
}

// A sparse request being filled. With `lease` (a server on this host), keys and rows are
// written into a slot of the memory shared with the server (client_sparse_shm.h), else into the
// request.
struct PendingPull {
  PullSparseCall* call = nullptr;
  char* keys = nullptr;
  std::shared_ptr<detail::ShmSlots::Lease> lease;
};
struct PendingPush {
  PushSparseCall* call = nullptr;
  char* keys = nullptr;
  char* grads = nullptr;
  std::shared_ptr<detail::ShmSlots::Lease> lease;
};

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

Future PsClient::PullSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                            absl::Span<float> out) {
  if (auto s = CheckUsable("PullSparse"); !s.ok()) return Future::Failed(s);
  auto dim_or = SparseDim(table_id);
  if (!dim_or.ok()) return Future::Failed(dim_or.status());
  const size_t dim = *dim_or;
  if (out.size() != keys.size() * dim) {
    return Future::Failed(absl::InvalidArgumentError(
        absl::StrCat("PullSparse of table ", table_id, ": ", keys.size(), " keys of dim ", dim,
                     " need ", keys.size() * dim, " output floats, got ", out.size())));
  }
  // The initial count of 1 keeps the call open until every request is sent.
  auto state = std::make_shared<detail::CallState>(1);
  const std::string what = absl::StrCat("PullSparse of table ", table_id);
  const size_t max_keys = std::min(options_.max_keys_per_request, keys.size());
  RequestStream<PendingPull> stream(
      num_servers(), max_keys,
      [&](uint32_t s) {
        PendingPull p;
        p.call = new PullSparseCall;
        p.call->request.set_table_id(table_id);
        p.lease = SparseLease(shm_[s], max_keys, 0, max_keys * dim * sizeof(float));
        if (p.lease != nullptr) {
          p.keys = p.lease->grads();
        } else {
          p.call->request.mutable_keys()->resize(max_keys * sizeof(int64_t));
          p.keys = p.call->request.mutable_keys()->data();
        }
        return p;
      },
      [&](uint32_t s, PendingPull& p, size_t count, std::vector<uint32_t> positions) {
        proto::PullSparseRequest& request = p.call->request;
        if (p.lease == nullptr) {
          request.mutable_keys()->resize(count * sizeof(int64_t));
        } else {
          // The keys are in the slot and the server writes the rows into it; the request holds
          // only where.
          request.set_shm_segment(p.lease->segment_id());
          SetRange(request.mutable_shm_keys(), p.lease->grads_offset(), count * sizeof(int64_t));
          SetRange(request.mutable_shm_values(), p.lease->values_offset(),
                   count * dim * sizeof(float));
        }
        state->AddPending(1);
        Launch(s, what, options_.rpc_timeout, p.call,
               detail::WireStarter<PullSparseCall>{transport_->channels[s].get(),
                                                   detail::PsMethod("PullSparse")},
               state,
               [out, dim, positions = std::move(positions),
                lease = std::move(p.lease)](const auto& reply) {
                 if (lease == nullptr) return ScatterRows(reply.values(), positions, dim, out);
                 ScatterRows(lease->values(), positions, dim, out);
                 lease->Release();
                 return absl::OkStatus();
               });
        p.call = nullptr;
      });
  std::unique_ptr<detail::KeyDedup> dedup = dedup_pool_->Acquire();
  dedup->Reset(keys);
  std::vector<std::pair<uint32_t, uint32_t>> repeats;  // (caller position, first position)
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (i + kDedupAhead < keys.size()) dedup->Prefetch(i + kDedupAhead);
    const uint32_t head = dedup->FirstOccurrence(i);
    if (head != i) {
      repeats.emplace_back(i, head);
      continue;
    }
    const uint32_t s = ServerOf(keys[i]);
    if (s >= num_servers()) return FailSharding(state);
    size_t index;
    PendingPull& p = stream.Next(s, &index);
    std::memcpy(p.keys + index * sizeof(int64_t), &keys[i], sizeof(int64_t));
    stream.Commit(s, i);
  }
  dedup_pool_->Release(std::move(dedup));
  stream.Flush();
  if (!repeats.empty()) {
    state->SetFinisher([out, dim, repeats = std::move(repeats)] {
      for (auto [pos, src] : repeats) {
        std::memcpy(out.data() + size_t{pos} * dim, out.data() + size_t{src} * dim,
                    dim * sizeof(float));
      }
    });
  }
  state->Done(absl::OkStatus());
  return Future(state);
}

namespace {

const char* PushName(PushKind kind, const char* base) {
  switch (kind) {
    case PushKind::kDelta:
      return base[4] == 'S' ? "PushSparse (delta)" : "PushDense (delta)";
    case PushKind::kAccumulate:
      return base[4] == 'S' ? "PushSparse (accumulate)" : "PushDense (accumulate)";
    case PushKind::kInitialize:
      return base[4] == 'S' ? "PushSparse (initialize)" : "PushDense (initialize)";
    case PushKind::kGradient:
      break;
  }
  return base;
}

}  // namespace

Future PsClient::PushSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                            absl::Span<const float> grads, PushKind kind) {
  if (auto s = CheckUsable("PushSparse"); !s.ok()) return Future::Failed(s);
  if (kind == PushKind::kInitialize) {
    return Future::Failed(
        absl::InvalidArgumentError(absl::StrCat("PushSparse of table ", table_id,
                                                ": sparse rows are initialised by the "
                                                "table's initializer, not by an initialize push")));
  }
  const bool is_delta = kind == PushKind::kDelta;
  auto dim_or = SparseDim(table_id);
  if (!dim_or.ok()) return Future::Failed(dim_or.status());
  const size_t dim = *dim_or;
  const size_t row_bytes = dim * sizeof(float);
  if (grads.size() != keys.size() * dim) {
    return Future::Failed(absl::InvalidArgumentError(
        absl::StrCat("PushSparse of table ", table_id, ": ", keys.size(), " keys of dim ", dim,
                     " need ", keys.size() * dim, " floats, got ", grads.size())));
  }
  std::unique_ptr<detail::KeyDedup> dedup = dedup_pool_->Acquire();
  const MergedRepeats merged(keys, grads, dim, dedup.get());
  dedup_pool_->Release(std::move(dedup));
  auto state = std::make_shared<detail::CallState>(1);
  const std::string what = absl::StrCat(PushName(kind, "PushSparse"), " of table ", table_id);
  const size_t max_keys = std::min(options_.max_keys_per_request, keys.size());
  RequestStream<PendingPush> stream(
      num_servers(), max_keys,
      [&](uint32_t s) {
        PendingPush p;
        p.call = new PushSparseCall;
        proto::PushSparseRequest& header = p.call->request.header;
        header.set_table_id(table_id);
        header.set_is_delta(is_delta);
        header.set_accumulate(kind == PushKind::kAccumulate);
        p.lease = SparseLease(shm_[s], max_keys, max_keys * row_bytes, 0);
        if (p.lease != nullptr) {
          p.keys = p.lease->grads();
          p.grads = p.keys + max_keys * sizeof(int64_t);
        } else {
          header.mutable_keys()->resize(max_keys * sizeof(int64_t));
          p.keys = header.mutable_keys()->data();
          p.grads = p.call->request.AllocatePayload(max_keys * row_bytes);
        }
        return p;
      },
      [&](uint32_t s, PendingPush& p, size_t count, std::vector<uint32_t>) {
        proto::PushSparseRequest& header = p.call->request.header;
        if (p.lease == nullptr) {
          header.mutable_keys()->resize(count * sizeof(int64_t));
          // The rows written so far (a slice of the same bytes: nothing is copied).
          p.call->request.payload = p.call->request.payload.sub(0, count * row_bytes);
        } else {
          header.set_shm_segment(p.lease->segment_id());
          SetRange(header.mutable_shm_keys(), p.lease->grads_offset(), count * sizeof(int64_t));
          SetRange(header.mutable_shm_grads(), p.lease->grads_offset() + max_keys * sizeof(int64_t),
                   count * row_bytes);
        }
        if (kind == PushKind::kAccumulate) accumulate_sent_[s].fetch_add(1);
        state->AddPending(1);
        Launch(s, what, options_.rpc_timeout, p.call,
               detail::WireStarter<PushSparseCall>{transport_->channels[s].get(),
                                                   detail::PsMethod("PushSparse")},
               state, [lease = std::move(p.lease)](const proto::PushReply&) {
                 if (lease != nullptr) lease->Release();
                 return absl::OkStatus();
               });
        p.call = nullptr;
      });
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (merged.IsRepeat(i)) continue;
    const uint32_t s = ServerOf(keys[i]);
    if (s >= num_servers()) return FailSharding(state);
    size_t index;
    PendingPush& p = stream.Next(s, &index);
    std::memcpy(p.keys + index * sizeof(int64_t), &keys[i], sizeof(int64_t));
    std::memcpy(p.grads + index * row_bytes, merged.Row(i), row_bytes);
    stream.Commit(s, i);
  }
  stream.Flush();
  state->Done(absl::OkStatus());
  return Future(state);
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
      SetRange(call->request.mutable_shm_values(), lease->values_offset(),
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
    return Future::Failed(absl::InvalidArgumentError(
        absl::StrCat("PushPullDense of table ", table_id, " as ", PushName(kind, "PushDense"),
                     ": only a push of gradients or deltas returns values")));
  }
  return PushDenseAndMaybePull(table_id, grads, kind, out);
}

Future PsClient::PushDenseAndMaybePull(uint32_t table_id, absl::Span<const float> grads,
                                       PushKind kind, absl::Span<float> out) {
  const bool pull = !out.empty();
  const char* name = pull ? "PushPullDense" : "PushDense";
  if (auto s = CheckUsable(name); !s.ok()) return Future::Failed(s);
  const bool is_delta = kind == PushKind::kDelta;
  auto route_or = Dense(table_id);
  if (!route_or.ok()) return Future::Failed(route_or.status());
  const DenseRoute* route = *route_or;
  if (grads.size() != route->layout.dim || (pull && out.size() != route->layout.dim)) {
    return Future::Failed(absl::InvalidArgumentError(absl::StrCat(
        name, " of table ", table_id, ": the table has ", route->layout.dim, " floats, the push ",
        grads.size(), pull ? ", the output " : "", pull ? absl::StrCat(out.size()) : "")));
  }
  std::vector<size_t> servers;
  for (size_t s = 0; s < route->blocks.size(); ++s) {
    if (!route->blocks[s].empty()) servers.push_back(s);
  }
  auto state = std::make_shared<detail::CallState>(static_cast<int>(servers.size()));
  const std::string what = absl::StrCat(PushName(kind, name), " of table ", table_id);
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
    auto lease = shm_[s] != nullptr ? detail::ShmSlots::Acquire(shm_[s]) : nullptr;
    char* bytes = lease != nullptr ? lease->grads() : call->request.AllocatePayload(local_bytes);
    if (lease != nullptr) {
      header.set_shm_segment(lease->segment_id());
      SetRange(header.mutable_shm_grads(), lease->grads_offset(), local_bytes);
      if (pull) SetRange(header.mutable_shm_values(), lease->values_offset(), local_bytes);
    }
    for (uint64_t b : route->blocks[s]) {
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
