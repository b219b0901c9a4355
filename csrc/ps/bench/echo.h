#pragma once
// The transport's own limits, measured beside the parameter server by
// benchmarks/ps_throughput.py: a gRPC echo service built like PsService (same gRPC build,
// message limits, protobuf `bytes` payloads, sync server thread pool, callback client) but
// with no table work, and a plain memcpy of the same bytes.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace grpc {
class Channel;
class Server;
}  // namespace grpc

namespace fleet::ps::bench {

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

class EchoClient {
 public:
  // Unavailable naming the endpoint when it cannot be reached within `timeout`.
  static absl::StatusOr<std::unique_ptr<EchoClient>> Connect(const std::string& endpoint,
                                                             absl::Duration timeout);
  ~EchoClient();

  // Sends `request` and copies the reply (reply.size() bytes, built by the server from the
  // request bytes) into `reply`. Blocks up to `timeout`. Thread-safe.
  absl::Status Echo(absl::Span<const char> request, absl::Span<char> reply,
                    absl::Duration timeout);

 private:
  struct Stub;
  EchoClient() = default;
  std::string endpoint_;
  std::unique_ptr<Stub> stub_;
};

// Mean seconds of one memcpy of `bytes` bytes between two buffers (touched first), over
// `iterations` copies.
double MemcpySeconds(size_t bytes, int iterations);

}  // namespace fleet::ps::bench
