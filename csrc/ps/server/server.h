#pragma once
// A parameter server: the tables of one ServerConfig behind a gRPC PsService.
//
// Start() builds the tables and serves on a gRPC thread pool, so RPCs run concurrently (tables
// lock per shard or block). Stopping is two-step so that neither a Stop RPC nor a signal
// handler ever waits on the RPCs in flight: RequestStop() (the Stop RPC, or the owner's SIGTERM
// handler) only wakes WaitForStopRequest() and the server's own stopper thread, which then
// calls Shutdown(stop_grace), letting the RPCs in flight finish. So a server stops serving
// after a Stop RPC whether or not its owner waits for it (an in-process server too).

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fleet/ps/ps.pb.h"
#include "ps/rpc_meter.h"
#include "ps/sharding.h"

namespace grpc {
class Server;
}

namespace fleet::ps {
namespace detail {
class BarrierSet;
class PsServiceImpl;
class TableSet;
}  // namespace detail

struct ServerOptions {
  proto::ServerConfig config;
  // host:port to listen on; port 0 picks a free port (see PsServer::endpoint()).
  std::string address = "127.0.0.1:0";
  // Also listen on a Unix-domain socket named after `address` (detail::LocalTransportAddress;
  // not for port 0, whose name no client could derive), for workers on the same host
  // (ClientOptions.local_host). The protocol, job checks and errors are the same as over TCP.
  bool local_transport = false;
  Sharding sharding;
  // Most RPCs served at once (each holds a thread; barrier waiters too). At least 2: gRPC's
  // synchronous server keeps one thread polling.
  int max_threads = 256;
  // How long the RPCs in flight may run on after a Stop RPC.
  absl::Duration stop_grace = absl::Seconds(5);
  // When set, every table is loaded from this checkpoint directory (checkpoint.h; any number of
  // servers may have written it) before the port opens, so no client can pull a value that the
  // load is about to replace. A failed load fails Start with the load's error.
  std::string load_dirname;
  // The job this server serves (fleet.role_maker's job_id): a call of a client of another job
  // is refused (FAILED_PRECONDITION naming both jobs) before it reaches a table or a barrier.
  // Empty: every caller is served.
  std::string job_id;
  // The job takes restarted workers (its a_sync_configs["worker_restarts"]): a worker whose
  // presence call dropped is waited for, not failed, and rejoins when it attends again
  // (detail/barrier.h).
  bool worker_restarts = false;
  // Threads that apply a sync round's summed gradients while the workers wait at the step
  // barrier (detail/round_pool.h): the handler's own thread and round_threads - 1 helpers.
  // 0: the host's core count, at most 4. The result is the same bit for bit for any count.
  int round_threads = 0;
  // Progress lines of long barrier waits ("waiting for worker(s) 1 at barrier ..."); stderr
  // when unset.
  std::function<void(const std::string&)> log;
};

class PsServer {
 public:
  // InvalidArgument for a bad config, a malformed address or max_threads below 2 (checked before
  // anything is allocated); ResourceExhausted when its dense tables do not fit in memory;
  // Unavailable naming the address when it cannot be bound; the load's error (NotFound,
  // InvalidArgument, DataLoss naming the file) when options.load_dirname cannot be loaded.
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(const ServerOptions& options);
  // Shutdown(absl::Seconds(5)) when not done yet.
  ~PsServer();

  // host:port actually listened on.
  const std::string& endpoint() const { return endpoint_; }
  // The Unix-domain address also listened on (ServerOptions.local_transport); "" when none.
  const std::string& local_endpoint() const { return local_endpoint_; }
  // Drawn at Start and sent with every reply: a client that sees it change knows this server
  // restarted (and lost what the job had put in its tables).
  const std::string& incarnation() const { return incarnation_; }
  const proto::ServerConfig& config() const;
  // A multi-line description: endpoint, then one line per table. For the start-up log.
  std::string Describe() const;
  // For live metrics (fleet/monitoring, read at each scrape; thread-safe): each table's rows
  // and memory, as the Stats RPC reports them, and the pulls and pushes served so far.
  std::vector<proto::TableStats> TableStats() const;
  const RpcMeter& rpc_meter() const;

  // Wakes WaitForStopRequest. Thread-safe, returns at once.
  void RequestStop();
  // Blocks up to `timeout` for RequestStop(); true when it came.
  bool WaitForStopRequest(absl::Duration timeout);
  // Stops accepting RPCs, lets those in flight finish for up to `grace` (then cancels them) and
  // fails barrier waiters with Unavailable. Idempotent: a call while another is under way waits
  // for it to finish. Not to be called from an RPC handler.
  void Shutdown(absl::Duration grace);

 private:
  PsServer() = default;

  std::string endpoint_;
  std::string local_endpoint_;
  std::string incarnation_;
  std::unique_ptr<detail::TableSet> tables_;
  std::unique_ptr<detail::BarrierSet> barriers_;
  std::unique_ptr<detail::PsServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::thread stopper_;  // waits for a stop request, then shuts down
  absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fleet::ps
