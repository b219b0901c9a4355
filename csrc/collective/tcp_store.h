#pragma once
// TcpStore: a Store served over TCP by one process of the job (worker 0, or the first server) and
// used by every rank, the serving one included.
//
// TcpStoreServer keeps the keys in memory and answers one request at a time per connection;
// it runs on background threads from construction to destruction, so the owner (the group that
// started it) decides how long the store lives. TcpStore is the client: one connection, one
// request in flight at a time (calls from several threads are serialised), blocking Get/Wait done
// by polling, as a rendezvous makes only a few dozen requests per rank.

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collective/detail/socket.h"
#include "collective/memory_store.h"
#include "collective/store.h"

namespace fleet::collective {

class TcpStoreServer {
 public:
  // Listens on host:port (port 0: a free port, see port()) and serves until destroyed.
  // Throws Unavailable naming the endpoint when the port cannot be bound.
  TcpStoreServer(const std::string& host, int port);
  // Closes every connection and joins the serving threads.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  std::string endpoint() const;

 private:
  void AcceptLoop();
  void Serve(int fd);
  detail::Frame Handle(const detail::Frame& request);

  std::string host_;
  int port_ = 0;
  MemoryStore data_;
  detail::Socket listener_;
  int wake_[2] = {-1, -1};  // a pipe that wakes the accept loop on shutdown

  std::mutex mu_;  // guards the fields below
  bool stopping_ = false;
  std::vector<int> client_fds_;
  std::vector<std::thread> serving_;
  std::thread acceptor_;
};

struct TcpStoreOptions {
  // How long to keep retrying the first connection (the server may start after the client).
  Duration connect_timeout{std::chrono::seconds(30)};
  // How long one request may wait for its reply before the server counts as gone.
  Duration io_timeout{std::chrono::seconds(30)};
};

class TcpStore : public Store {
 public:
  // Connects to a TcpStoreServer at host:port; throws Timeout naming the endpoint when no server
  // accepts within options.connect_timeout.
  TcpStore(const std::string& host, int port, TcpStoreOptions options = {});

  void Set(const std::string& key, const std::string& value) override;
  std::optional<std::string> TryGet(const std::string& key) override;
  int64_t Add(const std::string& key, int64_t delta) override;
  bool Check(const std::vector<std::string>& keys) override;
  std::string Describe() const override;

 private:
  detail::Frame Request(detail::Frame request);

  std::string endpoint_;
  std::mutex mu_;
  detail::Socket socket_;
};

}  // namespace fleet::collective
