#pragma once
// The transport's own limit, measured beside the parameter server by
// benchmarks/ps_throughput.py: a gRPC echo service built like PsService (same gRPC build,
// message limits, protobuf `bytes` payloads, sync server thread pool, callback client) but
// with no table work. Benchmark-only: built into fleet_bench._bench, never into the wheel.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace grpc {
class Channel;
class Server;
}  // namespace grpc

namespace fleet::bench {

class EchoServiceImpl;

class EchoServer {
 public:
  // Unavailable naming the address when it cannot be bound (port 0 picks a free port).
  static absl::StatusOr<std::unique_ptr<EchoServer>> Start(const std::string& address);
  ~EchoServer();

  const std::string& endpoint() const { return endpoint_; }
  void RequestStop();
  bool WaitForStopRequest(absl::Duration timeout);
  void Shutdown(absl::Duration grace);

 private:
  EchoServer() = default;
  std::string endpoint_;
  std::unique_ptr<EchoServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
};

// Echoes to one or more servers, as a PsClient talks to its servers.
class EchoClient {
 public:
  // Unavailable naming the endpoint that cannot be reached within `timeout`.
  static absl::StatusOr<std::unique_ptr<EchoClient>> Connect(
      const std::vector<std::string>& endpoints, absl::Duration timeout);
  ~EchoClient();

  // Splits `request` and `reply` into one even piece per server, sends all pieces in parallel,
  // and copies each server's reply (built from its request bytes) into its piece of `reply`.
  // Blocks up to `timeout`. Thread-safe.
  absl::Status Echo(absl::Span<const char> request, absl::Span<char> reply, absl::Duration timeout);

 private:
  struct Stub;
  EchoClient() = default;
  std::vector<std::string> endpoints_;
  std::vector<std::unique_ptr<Stub>> stubs_;
};

}  // namespace fleet::bench
