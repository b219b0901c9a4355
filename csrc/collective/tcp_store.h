#pragma once
// TcpStore: a Store served over TCP by one process of the job (worker 0, or the first server) and
// used by every rank, the serving one included.
//
// Both ends may carry a job identity (fleet.role_maker's job_id): a client says its own in a
// hello as it connects, and a server of another job refuses it with an error naming both jobs
// and closes the connection, so that a process of a second job started on the same store port
// never joins this job's groups. An empty identity on either side matches any.
//
// TcpStoreServer keeps the keys in memory and answers one request at a time per connection;
// it runs on background threads from construction to destruction, so the owner (the group that
// started it) decides how long the store lives. Whatever connects to its port cannot take it
// down: frames are bounded before anything is allocated (detail/socket.h), a malformed frame
// gets an error reply and its connection is closed, a frame that stalls halfway is dropped
// after kServerIoTimeout, and connections beyond kMaxConnections are closed at once; the other
// clients are served throughout. A failure of the store itself while serving one client (out of
// memory holding its request, no thread to serve a new connection) is sent to that client as an
// error, reported to the owner (see ErrorLog) naming the client, the operation and the key, and
// ends that connection only. TcpStore is the client: one connection, one
// request in flight at a time (calls from several threads are serialised), blocking Get/Wait done
// by polling, as a rendezvous makes only a few dozen requests per rank.

#include <deque>
#include <functional>
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
  // Told each failure of the store while serving a client, one line naming the store, the
  // client, the operation and the key. Called from the store's threads, possibly several at
  // once, never while a lock of the server is held: must be thread-safe and must not block long.
  using ErrorLog = std::function<void(const std::string&)>;

  // Listens on host:port (port 0: a free port, see port()) and serves the clients of job
  // `job_id` until destroyed. Serving failures go to `log` (default: a line on stderr, which
  // fleetrun keeps in the process's log) and to ServingErrors(). Throws Unavailable naming the
  // endpoint when the port cannot be bound.
  TcpStoreServer(const std::string& host, int port, std::string job_id = "", ErrorLog log = {});
  // Closes every connection and joins the serving threads.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  std::string endpoint() const;
  // The last kKeptErrors serving failures, oldest first (as given to the ErrorLog).
  std::vector<std::string> ServingErrors() const;

  // Connections served at once; more are closed on accept (a job has one per rank).
  static constexpr size_t kMaxConnections = 512;
  // How long a frame that has started may take to arrive in full, and a reply to be taken.
  // Waiting for the next frame is not bounded: ranks keep idle connections for the whole job.
  static constexpr Duration kServerIoTimeout{std::chrono::seconds(30)};
  static constexpr size_t kKeptErrors = 32;

 private:
  void AcceptLoop();
  void Serve(int fd);
  // Tells the owner (the ErrorLog and ServingErrors); never throws.
  void Report(const std::string& message) noexcept;
  // Sends `message` to a client as an error reply and lets the client read it (LingerAndDrop);
  // the caller then closes fd. Never throws.
  void Refuse(int fd, const std::string& message) noexcept;
  void JoinFinished();
  // The reply to a client's hello; an error (and the connection closed) for another job.
  detail::Frame Hello(const detail::Frame& request) const;

  std::string host_;
  std::string job_id_;
  ErrorLog log_;
  int port_ = 0;
  MemoryStore data_;
  detail::Socket listener_;
  int wake_[2] = {-1, -1};  // a pipe that wakes the accept loop on shutdown

  std::mutex mu_;  // guards the fields below
  bool stopping_ = false;
  std::vector<int> client_fds_;
  std::vector<std::pair<int, std::thread>> serving_;  // by client fd
  std::vector<int> finished_;                         // fds whose serving thread has ended
  std::thread acceptor_;

  mutable std::mutex errors_mu_;  // guards errors_; Report holds it, never with mu_
  std::deque<std::string> errors_;
};

struct TcpStoreOptions {
  // How long to keep retrying the first connection (the server may start after the client).
  Duration connect_timeout{std::chrono::seconds(30)};
  // How long one request may wait for its reply before the server counts as gone.
  Duration io_timeout{std::chrono::seconds(30)};
  // This process's job identity, said in the hello (empty: unnamed).
  std::string job_id;
};

class TcpStore : public Store {
 public:
  // Connects to a TcpStoreServer at host:port and says hello; throws Timeout naming the endpoint
  // when no server accepts within options.connect_timeout, InvalidArgument naming both jobs when
  // the server serves another job.
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
