#pragma once
// PsClient: a worker's connection to every parameter server.
//
// It routes sparse keys and dense blocks to their servers (sharding.h), deduplicates keys, splits
// large requests, sends to all servers in parallel and assembles the replies in the caller's
// order. Pulls and pushes return a Future at once, so a communicator can overlap them; admin
// calls (save, load, shrink, stats, stop) block. Every RPC carries a deadline, and a dead or
// hung server turns into an error naming its endpoint within that deadline, never a hang.
// All methods are thread-safe.
//
// The header holds no gRPC: the channels and stubs live in detail::Transport (client_call.h),
// so code that only calls the client compiles against ps.proto's messages alone.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "fleet/ps/ps.pb.h"
#include "ps/client/future.h"
#include "ps/rpc_meter.h"
#include "ps/sharding.h"

namespace fleet::ps {
namespace detail {
struct Inflight;
struct Incarnations;
struct Presence;
struct Transport;
class FieldBytes;
class KeyDedupPool;
class ShmSlots;
}  // namespace detail

// What a push does on the servers (see ps.proto's push requests).
enum class PushKind {
  kGradient,    // through the table's update rule
  kDelta,       // added to the values as they are (GEO)
  kAccumulate,  // summed into the servers' pending gradients until the next SyncStep (sync)
  kInitialize,  // dense only: the values, set once while the table is pristine (init_worker)
};

struct ClientOptions {
  std::vector<std::string> endpoints;  // server i listens on endpoints[i]
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration rpc_timeout = absl::Seconds(30);    // deadline of pulls, pushes, stats
  absl::Duration admin_timeout = absl::Minutes(10);  // deadline of save, load and shrink
  Sharding sharding;
  // Sparse requests to one server are split into pieces of at most this many keys, which the
  // server works on in parallel and the transport pipelines.
  size_t max_keys_per_request = 32768;
  // This worker's job identity (fleet.role_maker's job_id), sent with every call: a server of
  // another job refuses the calls (the first, Connect's, fails naming both jobs). Empty: unnamed.
  std::string job_id;
  // The job takes restarted servers (strategy a_sync_configs["server_restarts"]): a server
  // whose incarnation changed is trusted when it reloaded its tables from a checkpoint before
  // its port opened (it says which, call_metadata.h), with one line on stderr saying so; a
  // server that came back empty is still refused. Calls then also wait for a server that is
  // down (up to their deadline) and a call whose connection dropped is sent again within its
  // deadline, so the job goes on across the restart. A push the lost server had applied is
  // replaced by the checkpoint's rows, as a push it never received would be.
  bool server_restarts = false;
  // This process's host as the job lists its addresses (fleet.role_maker's hostname). A server
  // whose endpoint has the same host is called over its local transport, a Unix-domain socket
  // (ServerOptions.local_transport; ps/detail/transport.h says why: less CPU per byte than
  // loopback TCP), once its TCP endpoint answered; when nothing listens there, one line on
  // stderr says so and the calls go over TCP. Same protocol, job checks and errors either way.
  // Empty: TCP to every server. Hosts are compared as written, so "hosts" on different
  // 127.0.0.x addresses of one machine talk TCP.
  std::string local_host;
  // Try the Unix-domain socket of a server on local_host (above).
  bool local_socket = true;
  // The floats of dense pushes, push-pulls and pulls, and the keys, rows and gradients of sparse
  // pulls and pushes, to a server on local_host go through a memory segment this client shares
  // with it (ps/detail/shm_segment.h: why, the protocol, the
  // lifetime and the checks); the calls themselves stay on their channel, with the same
  // deadlines, job checks and errors. When the segment cannot be made or the server cannot map
  // it (another container or host of the same name), one line on stderr says so and the floats
  // go on the wire. Not with server_restarts (a restarted server has lost the mapping).
  bool local_shared_memory = false;
};

class PsClient {
  struct DenseRoute;  // below

 public:
  // Connects to every endpoint, waiting up to connect_timeout, and checks that server i reports
  // index i of endpoints.size(), serves this job, and that all servers hold the same tables.
  // Every later reply must come from the same start of its server (its incarnation, see
  // ps/detail/call_metadata.h): a server restarted under the job has lost the job's rows, and
  // every call to it fails with ABORTED naming it (unless options.server_restarts and it
  // reloaded a checkpoint). InvalidArgument,
  // before connecting, for a malformed endpoint, a timeout that is not positive or a zero
  // max_keys_per_request; Unavailable naming the endpoint that cannot be reached;
  // InvalidArgument for inconsistent servers.
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(ClientOptions options);
  // Waits for the RPCs in flight (bounded by their deadlines).
  ~PsClient();

  // Refuses every later call (Unavailable: "the client is closed") and waits for the RPCs in
  // flight. Idempotent; thread-safe.
  void Close();

  const std::vector<std::string>& endpoints() const { return options_.endpoints; }
  // The gRPC target the calls to `server` go to: its endpoint, or its local transport address
  // (ClientOptions.local_host). `server` < endpoints().size().
  const std::string& target(size_t server) const;
  // Whether dense and sparse values to `server` go through shared memory
  // (ClientOptions.local_shared_memory).
  bool shared_memory(size_t server) const;
  // What this client's RPCs did so far (rpc_meter.h), for live metrics; each attempt of a call
  // counts once.
  const RpcMeter& rpc_meter() const { return *meter_; }
  // The config of table `table_id` as the servers reported it; NotFound when there is none.
  absl::StatusOr<proto::TableConfig> Table(uint32_t table_id) const;

  // Pulls the rows of `keys` into out[i * dim, (i + 1) * dim), creating missing rows on the
  // servers. Repeated keys are fetched once. `keys` may be reused when this returns; `out` must
  // stay valid and untouched until the future completes.
  Future PullSparse(uint32_t table_id, absl::Span<const int64_t> keys, absl::Span<float> out);
  // Pushes gradients through the servers' update rule, or with is_delta (GEO) adds deltas to
  // the rows. Gradients of repeated keys are summed first. Both buffers are copied before this
  // returns.
  Future PushSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                    absl::Span<const float> grads, bool is_delta = false) {
    return PushSparse(table_id, keys, grads, is_delta ? PushKind::kDelta : PushKind::kGradient);
  }
  Future PushSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                    absl::Span<const float> grads, PushKind kind);
  // A push of gradients (kGradient) or deltas (kDelta, GEO) whose replies carry each key's row
  // after it, written into out[i * dim, (i + 1) * dim): PushSparse and then PullSparse of the
  // same keys in one round trip per request and one pass over the rows on the servers. As with
  // a pull, `out` may include other workers' pushes applied meanwhile. Gradients of repeated
  // keys are summed first, and every occurrence reads the same row. `keys` and `grads` are
  // copied before this returns; `out` must stay valid and untouched until the future completes.
  // InvalidArgument for another kind, or when `grads` or `out` is not keys x dim floats.
  Future PushPullSparse(uint32_t table_id, absl::Span<const int64_t> keys,
                        absl::Span<const float> grads, absl::Span<float> out,
                        PushKind kind = PushKind::kGradient);
  // Pulls the whole dense table (dim floats) into `out`, which must stay valid until the future
  // completes.
  Future PullDense(uint32_t table_id, absl::Span<float> out);
  // Pushes gradients (or deltas) for the whole dense table; copied before this returns.
  Future PushDense(uint32_t table_id, absl::Span<const float> grads, bool is_delta = false) {
    return PushDense(table_id, grads, is_delta ? PushKind::kDelta : PushKind::kGradient);
  }
  Future PushDense(uint32_t table_id, absl::Span<const float> grads, PushKind kind);
  // A push of gradients (kGradient) or deltas (kDelta, GEO) for the whole dense table (copied
  // before this returns) whose replies carry each server's values after its update, written into
  // `out` (dim floats, valid until the future completes): PushDense and PullDense in one round
  // trip per server. As with a pull, `out` may include other workers' pushes applied meanwhile.
  // InvalidArgument for another kind (an accumulated or initial push leaves no values to return).
  Future PushPullDense(uint32_t table_id, absl::Span<const float> grads, absl::Span<float> out,
                       PushKind kind = PushKind::kGradient);

  // A dense push's gradients written by the caller where the push sends them from: each
  // server's share in a slot of the memory shared with it, so the push copies nothing. The
  // caller writes every float of the table before pushing; one writer at a time. The slots stay
  // taken until the push's replies, or until the shares are destroyed unpushed.
  class DenseShares {
   public:
    ~DenseShares();
    DenseShares(const DenseShares&) = delete;
    DenseShares& operator=(const DenseShares&) = delete;
    // Writes values[0, n) at float `offset` of the packed table, or adds them to what is there
    // with `add`; InvalidArgument past the table's end.
    absl::Status Write(uint64_t offset, const float* values, uint64_t n, bool add = false);
    // Sets every float of the table to `value`, or multiplies each by `factor`.
    void Fill(float value);
    void Scale(float factor);

   private:
    friend class PsClient;
    struct Slots;  // per server, its slot's lease (client.cc)
    DenseShares(uint32_t table_id, const DenseRoute* route);
    uint32_t table_id_;
    const DenseRoute* route_;
    std::unique_ptr<Slots> slots_;
  };
  // Shares for one push of dense table `table_id`, or null when a server holding part of it
  // shares no memory with this client or has no free slot (push a span then), or there is no
  // such table.
  std::unique_ptr<DenseShares> TakeDenseShares(uint32_t table_id);
  // PushDense and PushPullDense of gradients written in `grads` (TakeDenseShares of the same
  // table; its slots go with the push). InvalidArgument for shares of another table.
  Future PushDense(uint32_t table_id, std::unique_ptr<DenseShares> grads,
                   PushKind kind = PushKind::kGradient);
  Future PushPullDense(uint32_t table_id, std::unique_ptr<DenseShares> grads, absl::Span<float> out,
                       PushKind kind = PushKind::kGradient);
  // Waits with `num_workers` workers at barrier `name` (served by server 0). The future fails
  // with DeadlineExceeded when not all arrive within `timeout`.
  Future Barrier(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                 absl::Duration timeout);
  // Sync training's step: waits on every server until all `num_workers` workers arrived, the
  // last arrival applying the gradients accumulated since the previous step (PushKind
  // kAccumulate) averaged over the workers not `done`. A worker whose pass ended arrives with
  // `done` until this returns num_workers (every worker is done). Blocks; DeadlineExceeded
  // naming the count that arrived when `timeout` passes first.
  //
  // `pushes`: the step's accumulate pushes, sent just before and not waited for yet. The step
  // goes out beside them (each server arrives once the pushes this client announced to it are
  // in), so a step waits once instead of twice. A failed push's error is returned rather than
  // the step's (it is the cause); the pushes are waited for once the step has waited an RPC
  // timeout, and a failed one (a frozen server answers neither) cancels the step instead of
  // leaving it to wait out the step timeout.
  absl::StatusOr<uint32_t> SyncStep(uint32_t num_workers, uint32_t worker_id, bool done,
                                    absl::Duration timeout, absl::Span<const Future> pushes = {});
  // A SyncStep of a worker still training that also pulls dense table `table_id` into `out`
  // (dim floats): each server's reply carries its blocks as the step's update left them, which
  // no push can change before this worker's next arrival, so no PullDense need follow the step.
  // NotFound for a table that is not dense, InvalidArgument for an output of the wrong size,
  // both before any call.
  // `pushes` as SyncStep's.
  absl::StatusOr<uint32_t> SyncStepAndPullDense(uint32_t num_workers, uint32_t worker_id,
                                                absl::Duration timeout, uint32_t table_id,
                                                absl::Span<float> out,
                                                absl::Span<const Future> pushes = {});

  // Saves one table (or all, when table_id is empty) on every server into the checkpoint
  // directory `dirname` (checkpoint.h) and returns the rows written. Two phases: every server
  // writes its parts, then server 0 commits the manifest; the save becomes visible only when
  // every server succeeded, and a failure (naming the server, its endpoint and the directory)
  // leaves the previous checkpoint there loadable. InvalidArgument for an empty dirname.
  // Without `end_save_cycle` (an export of the values) the save does not count as one for the
  // next delta save or for shrink (SaveRequest.keep_cycle).
  absl::StatusOr<uint64_t> Save(const std::string& dirname, std::optional<uint32_t> table_id,
                                proto::SaveMode mode, bool end_save_cycle = true);
  // Loads one table (or all) on every server from the checkpoint in `dirname`, whatever number
  // of servers saved it; returns the rows loaded. Refuses (naming the file, table and what is
  // wrong) a checkpoint without a committed manifest, with a missing or damaged part, or with a
  // table of another type or dim.
  absl::StatusOr<uint64_t> Load(const std::string& dirname, std::optional<uint32_t> table_id);
  // Drops stale sparse rows on every server (see ShrinkRequest); returns the rows removed.
  absl::StatusOr<uint64_t> Shrink(uint32_t table_id, uint32_t max_unseen_saves);
  // Statistics of every table on every server, indexed by server.
  absl::StatusOr<std::vector<std::vector<proto::TableStats>>> Stats();
  // OK when every server answers within rpc_timeout.
  absl::Status Heartbeat();
  // Asks every server to stop (each finishes the RPCs in flight first). Later calls of this
  // client, but Close and StopServers, fail at once with Unavailable.
  absl::Status StopServers();

  // Worker liveness (see ps.proto's BarrierRequest). ReportFailure tells every server that
  // worker `worker_id` failed (`why`): their barriers fail at once, now and later, naming it.
  // Blocks up to min(rpc_timeout, 5 s); a server that cannot be told is returned as an error.
  // Servers whose last call ended without an answer (deadline passed or unreachable: frozen or
  // dead) are skipped, so a frozen server does not hold the failing worker 5 s more.
  absl::Status ReportFailure(uint32_t worker_id, const std::string& why);
  // Keeps one call open to every server while this worker lives: when its process dies, the
  // servers see the connection drop and fail their barriers naming it. Returns at once;
  // idempotent. Close() (or the destructor) ends the calls.
  void Attend(uint32_t worker_id);
  // The worker ends normally: tells every server (bounded by rpc_timeout), then ends the calls
  // of Attend.
  absl::Status Leave(uint32_t worker_id);

 private:
  struct DenseRoute {
    DenseLayout layout;
    std::vector<std::vector<uint64_t>> blocks;  // per server, its blocks in increasing order
    std::vector<size_t> local_size;             // per server
    // Per block, its server and its first float's place among that server's floats.
    std::vector<uint32_t> block_server;
    std::vector<uint64_t> block_position;
  };

  enum State { kOpen, kStopped, kClosed };

  explicit PsClient(ClientOptions options);
  // OK while the client is open; Unavailable naming `what` once closed or stopped.
  absl::Status CheckUsable(const char* what) const;
  void WaitForInflight();
  absl::Status Handshake();
  absl::Status AdoptConfigs(const std::vector<proto::ServerConfig>& configs);
  absl::StatusOr<size_t> SparseDim(uint32_t table_id) const;
  // The server of a key under the sharding function (checked by the caller against the count).
  uint32_t ServerOf(int64_t key) const;
  Future FailSharding(const std::shared_ptr<detail::CallState>& state) const;
  absl::StatusOr<const DenseRoute*> Dense(uint32_t table_id) const;
  // PushSparse, and PushPullSparse into `out` with `pull`.
  Future PushSparseAndMaybePull(uint32_t table_id, absl::Span<const int64_t> keys,
                                absl::Span<const float> grads, PushKind kind, absl::Span<float> out,
                                bool pull);
  // PushDense, and PushPullDense when `out` is not empty; of `shares` when set (then `grads`
  // is empty).
  Future PushDenseAndMaybePull(uint32_t table_id, absl::Span<const float> grads, PushKind kind,
                               absl::Span<float> out,
                               std::unique_ptr<DenseShares> shares = nullptr);
  // SyncStep, and SyncStepAndPullDense when `table_id` is set.
  absl::StatusOr<uint32_t> SyncStepAndMaybePull(uint32_t num_workers, uint32_t worker_id, bool done,
                                                absl::Duration timeout,
                                                std::optional<uint32_t> table_id,
                                                absl::Span<float> out,
                                                absl::Span<const Future> pushes);
  // Writes server `server`'s blocks in `values` (the values of a PullDense, PushPullDense or
  // sync-step reply) into `out`.
  static absl::Status CopyDenseBlocks(const detail::FieldBytes& values, const DenseRoute& route,
                                      size_t server, absl::Span<float> out);
  // The same from server `server`'s values as they lie in shared memory.
  static void CopyDenseBlocks(const char* values, const DenseRoute& route, size_t server,
                              absl::Span<float> out);
  // Shares a memory segment with each server on this host (ClientOptions.local_shared_memory),
  // after the handshake; a server that cannot take one is said on stderr and keeps the wire.
  void AttachSharedMemory();
  // Tells the servers to drop this client's segments (bounded by rpc_timeout, at most 2 s).
  void DetachSharedMemory();
  // Starts one RPC to `server` with a deadline of `timeout`; when it completes, on_reply(reply)
  // runs if it succeeded and the outcome goes to `state`. Takes ownership of `call`.
  template <class Call, class Start, class OnReply>
  void Launch(size_t server, std::string what, absl::Duration timeout, Call* call, Start start,
              std::shared_ptr<detail::CallState> state, OnReply on_reply);
  // One RPC to every server in parallel, on_reply(server, reply) for each; blocks until all end.
  template <class Call, class Start, class OnReply>
  absl::Status CallAll(const std::string& what, absl::Duration timeout, Start start,
                       const std::function<void(Call*)>& fill, OnReply on_reply);
  // The same to `servers` only.
  template <class Call, class Start, class OnReply>
  absl::Status CallServers(const std::string& what, absl::Duration timeout,
                           const std::vector<size_t>& servers, Start start,
                           const std::function<void(Call*)>& fill, OnReply on_reply);

  ClientOptions options_;
  // The number of servers (one channel and stub each in transport_).
  size_t num_servers() const { return options_.endpoints.size(); }

  std::unique_ptr<detail::Transport> transport_;  // channels and stubs, one per server
  absl::flat_hash_map<uint32_t, proto::TableConfig> tables_;
  absl::flat_hash_map<uint32_t, DenseRoute> dense_;
  // Ends the presence calls of Attend and waits for their callbacks.
  void EndPresence();
  // Opens the presence call to `server` (Attend). `counted`: presence_->open already counts it
  // (a call reopened by the callback of the one that ended). `wait_for_server`: the call waits
  // for the server to listen again instead of failing at once.
  void StartPresence(size_t server, bool counted, bool wait_for_server);
  // A presence call to `server` ended (`server_went_away`: with UNAVAILABLE): in a job that
  // takes restarted servers, one whose server went away is opened again, waiting for the server
  // to come back with the job's checkpoint, so that the new server sees this worker too.
  void OnPresenceEnded(size_t server, bool server_went_away);

  std::shared_ptr<detail::Inflight> inflight_;  // RPCs in flight, shared with their callbacks
  std::shared_ptr<RpcMeter> meter_ = std::make_shared<RpcMeter>();  // shared with the callbacks
  // Each server's incarnation as first seen, shared with the callbacks.
  std::shared_ptr<detail::Incarnations> incarnations_;
  std::unique_ptr<detail::Presence> presence_;
  std::unique_ptr<detail::KeyDedupPool> dedup_pool_;
  // Per server, the slots of the memory shared with it; null for a server reached on the wire.
  std::vector<std::shared_ptr<detail::ShmSlots>> shm_;
  // Per server: accumulate pushes sent since the last sync step, which announces them
  // (BarrierRequest.accumulate_pushes) so that a worker need not wait for their replies first.
  std::unique_ptr<std::atomic<uint32_t>[]> accumulate_sent_;
  std::atomic<State> state_{kOpen};
};

}  // namespace fleet::ps
