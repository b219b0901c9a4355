#include "collective/tcp_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <new>

#include "absl/strings/str_cat.h"
#include "collective/detail/store_protocol.h"
#include "core/errors.h"

namespace fleet::collective {

using detail::kStoreAdd;
using detail::kStoreCheck;
using detail::kStoreError;
using detail::kStoreGet;
using detail::kStoreHello;
using detail::kStoreNotFound;
using detail::kStoreOk;
using detail::kStoreSet;

TcpStoreServer::TcpStoreServer(const std::string& host, int port, std::string job_id, ErrorLog log)
    : host_(host), job_id_(std::move(job_id)), log_(std::move(log)) {
  if (!log_) {
    log_ = [](const std::string& line) {
      std::fprintf(stderr, "fleet: %s\n", line.c_str());
      std::fflush(stderr);
    };
  }
  listener_ = detail::Listen(host, port, &port_);
  FLEET_ENFORCE(pipe(wake_) == 0, Unavailable, "TCP store at ", endpoint(),
                ": cannot create a wake-up pipe");
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (int fd : client_fds_) shutdown(fd, SHUT_RDWR);
  }
  char byte = 0;
  if (write(wake_[1], &byte, 1) < 0) {
    // The accept loop also stops on the listener being shut down below.
  }
  shutdown(listener_.fd(), SHUT_RDWR);
  acceptor_.join();
  // No new serving thread can start once the acceptor has exited.
  for (auto& [fd, t] : serving_) t.join();
  close(wake_[0]);
  close(wake_[1]);
}

std::string TcpStoreServer::endpoint() const { return absl::StrCat(host_, ":", port_); }

std::vector<std::string> TcpStoreServer::ServingErrors() const {
  std::lock_guard<std::mutex> lock(errors_mu_);
  return {errors_.begin(), errors_.end()};
}

namespace {

// "host:port" of a connected socket's peer, for messages.
std::string PeerName(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    if (address.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
      port = ntohs(in6->sin6_port);
      return absl::StrCat("[", host, "]:", port);
    }
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  }
  return absl::StrCat(host, ":", port);
}

// Copies an exception's message into `out` without allocating (memory may be what ran out).
template <size_t N>
void Explain(const std::exception& e, char (&out)[N]) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    std::snprintf(out, N, "out of memory (%s)", e.what());
  } else {
    std::snprintf(out, N, "%s", e.what());
  }
}

// Room for `n` elements, grown geometrically, so that the push_backs that follow cannot throw.
template <typename Vector>
void MakeRoom(Vector& v, size_t n) {
  if (v.capacity() < n) v.reserve(std::max(n, 2 * v.capacity()));
}

}  // namespace

void TcpStoreServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listener_.fd(), POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    int fd = accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors (a connection flood): the store must not stop accepting for good.
        try {
          JoinFinished();
        } catch (const std::exception&) {
          // Out of memory too: the next round tries again.
        }
        poll(fds + 1, 1, 100);
        continue;
      }
      return;
    }
    char failure[512] = "";
    try {
      JoinFinished();
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        close(fd);
        return;
      }
      if (client_fds_.size() >= kMaxConnections) {
        close(fd);  // a flood of connections: refuse, keep serving the ones there
        continue;
      }
      detail::SetIoTimeout(fd, kServerIoTimeout);
      // Room first, so that nothing can fail once the thread runs (a std::thread destroyed
      // while joinable would end the process); finished_ never holds more fds than serving_.
      MakeRoom(client_fds_, client_fds_.size() + 1);
      MakeRoom(serving_, serving_.size() + 1);
      MakeRoom(finished_, serving_.size() + 1);
      std::thread serving([this, fd] { Serve(fd); });
      client_fds_.push_back(fd);
      serving_.emplace_back(fd, std::move(serving));
      continue;
    } catch (const std::exception& e) {
      Explain(e, failure);  // out of memory, or of threads (std::system_error)
    }
    // Outside the lock: telling the client may take a moment, and serving threads that end
    // need the lock meanwhile.
    try {
      const std::string message =
          absl::StrCat("TCP store at ", endpoint(), ": cannot start a thread to serve ",
                       PeerName(fd), ": ", failure, "; the store serves the others");
      Report(message);
      Refuse(fd, message);
    } catch (const std::exception&) {
      Report("TCP store: cannot serve a new client (out of memory)");
    }
    close(fd);
  }
}

// Joins the threads of closed connections, so that a long job whose port sees many short
// connections (health checks, scanners) does not keep a thread per connection it ever had.
void TcpStoreServer::JoinFinished() {
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.reserve(finished_.size());  // a moved thread must never be dropped unjoined
    for (int fd : finished_) {
      auto it = std::find_if(serving_.begin(), serving_.end(),
                             [fd](const auto& entry) { return entry.first == fd; });
      if (it == serving_.end()) continue;
      done.push_back(std::move(it->second));
      serving_.erase(it);
    }
    finished_.clear();
  }
  for (auto& t : done) t.join();
}

void TcpStoreServer::Report(const std::string& message) noexcept {
  try {
    log_(message);
  } catch (...) {
    // The owner's log failed; the record below still holds the message.
  }
  try {
    std::lock_guard<std::mutex> lock(errors_mu_);
    if (errors_.size() == kKeptErrors) errors_.pop_front();
    errors_.push_back(message);
  } catch (...) {
    // Out of memory for the record: the log above has the message.
  }
}

namespace {

// Closing a socket with unread input resets the connection, and the peer may then lose the
// error reply just sent. So: stop sending, discard what the peer still sends for a moment
// (bounded in bytes and time), then let the caller close.
void LingerAndDrop(int fd) {
  shutdown(fd, SHUT_WR);
  char sink[4096];
  size_t discarded = 0;
  pollfd wait = {fd, POLLIN, 0};
  while (discarded < (size_t{1} << 20) && poll(&wait, 1, 200) > 0) {
    ssize_t n = recv(fd, sink, sizeof(sink), 0);
    if (n <= 0) break;
    discarded += static_cast<size_t>(n);
  }
}

// What a request was, for a message: "SET of key 'k'", or its operation alone when its key had
// not arrived in full.
std::string DescribeRequest(uint8_t op, const std::string* key) {
  const char* name = op == kStoreSet     ? "SET"
                     : op == kStoreGet   ? "GET"
                     : op == kStoreAdd   ? "ADD"
                     : op == kStoreCheck ? "CHECK"
                     : op == kStoreHello ? "HELLO"
                                         : nullptr;
  if (name == nullptr) return absl::StrCat("a request of code ", int{op});
  if (key == nullptr || op == kStoreCheck || op == kStoreHello) return absl::StrCat("a ", name);
  return absl::StrCat(name, " of key '", *key, "'");
}

}  // namespace

void TcpStoreServer::Refuse(int fd, const std::string& message) noexcept {
  try {
    detail::SendFrame(fd, {kStoreError, {message}}, "a client");
  } catch (...) {
    // The client is gone or stalled: nobody to tell.
  }
  LingerAndDrop(fd);
}

void TcpStoreServer::Serve(int fd) {
  std::string client = "a client";
  detail::Frame request;
  bool reading = true;     // whether the failure below came while a request was arriving
  char failure[512] = "";  // a failure of the store itself; empty: the client left or stalled
  try {
    client = PeerName(fd);
    const std::string peer = absl::StrCat(client, ", a client of the TCP store at ", endpoint());
    while (true) {
      // The next request may be long in coming; only a started frame is bounded in time.
      pollfd wait = {fd, POLLIN, 0};
      int rc = poll(&wait, 1, -1);
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) break;
      reading = true;
      try {
        if (!detail::RecvFrame(fd, &request, peer)) break;
      } catch (const InvalidArgument& e) {
        // Not a store client (or a broken one): say why, then drop it, since the stream is
        // out of step with the frames.
        detail::SendFrame(fd, {kStoreError, {e.what()}}, peer);
        LingerAndDrop(fd);
        break;
      }
      reading = false;
      if (request.op == kStoreHello) {
        const detail::Frame reply = Hello(request);
        detail::SendFrame(fd, reply, peer);
        if (reply.op == kStoreError) {
          LingerAndDrop(fd);  // another job: nothing it sends may reach this job's keys
          break;
        }
        continue;
      }
      detail::SendFrame(fd, detail::HandleStoreRequest(&data_, request), peer);
    }
  } catch (const Error&) {
    // A client that vanished or stalled mid-request: its rank reports its own error; the store
    // lives on.
  } catch (const std::exception& e) {
    Explain(e, failure);
  } catch (...) {
    std::snprintf(failure, sizeof(failure), "an exception of unknown type");
  }
  if (failure[0] != '\0') {
    // The key is kept (a move allocates nothing); the rest of the request is freed before the
    // message is made, as memory may be what ran out.
    const uint8_t op = request.op;
    std::string key;
    const bool has_key = !request.parts.empty() && (!reading || request.parts.size() > 1);
    if (has_key) key = std::move(request.parts[0]);
    request = detail::Frame{};
    try {
      const std::string message =
          absl::StrCat("TCP store at ", endpoint(), ": serving ", client, " failed in ",
                       DescribeRequest(op, has_key ? &key : nullptr),
                       reading ? " (reading the request): " : " (answering it): ", failure,
                       "; that connection is closed, the store serves the others");
      Report(message);
      Refuse(fd, message);
    } catch (const std::exception&) {
      Report("TCP store: a serving thread ran out of memory; that connection is closed");
      LingerAndDrop(fd);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  client_fds_.erase(std::find(client_fds_.begin(), client_fds_.end(), fd));
  close(fd);
  finished_.push_back(fd);
}

detail::Frame TcpStoreServer::Hello(const detail::Frame& request) const {
  if (request.parts.size() != 1) {
    return {kStoreError,
            {absl::StrCat("HELLO takes one job identity, got ", request.parts.size(), " parts")}};
  }
  const std::string& theirs = request.parts[0];
  if (job_id_.empty() || theirs.empty() || theirs == job_id_) return {kStoreOk, {job_id_}};
  return {
      kStoreError,
      {absl::StrCat("this store serves job '", job_id_, "', and this process is of job '", theirs,
                    "': two jobs were given the same store port (refused: nothing of this "
                    "process reaches the other job's groups)")}};
}

TcpStore::TcpStore(const std::string& host, int port, TcpStoreOptions options)
    : endpoint_(absl::StrCat(host, ":", port)) {
  socket_ = detail::Connect(host, port, options.connect_timeout, options.io_timeout);
  Request({kStoreHello, {options.job_id}});
}

std::string TcpStore::Describe() const { return absl::StrCat("TCP store at ", endpoint_); }

detail::Frame TcpStore::Request(detail::Frame request) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string peer = Describe();
  detail::SendFrame(socket_.fd(), request, peer);
  detail::Frame reply;
  FLEET_ENFORCE(detail::RecvFrame(socket_.fd(), &reply, peer), Unavailable, peer,
                " closed the connection (the process serving it has exited, or the store ended "
                "this connection after an error it sent and reported)");
  FLEET_ENFORCE(reply.op != kStoreError, InvalidArgument, peer, ": ",
                reply.parts.empty() ? "request failed" : reply.parts[0]);
  return reply;
}

void TcpStore::Set(const std::string& key, const std::string& value) {
  Request({kStoreSet, {key, value}});
}

std::optional<std::string> TcpStore::TryGet(const std::string& key) {
  detail::Frame reply = Request({kStoreGet, {key}});
  if (reply.op == kStoreNotFound) return std::nullopt;
  return std::move(reply.parts.at(0));
}

int64_t TcpStore::Add(const std::string& key, int64_t delta) {
  detail::Frame reply = Request({kStoreAdd, {key, absl::StrCat(delta)}});
  return ParseCounter(key, reply.parts.at(0));
}

bool TcpStore::Check(const std::vector<std::string>& keys) {
  return Request({kStoreCheck, keys}).parts.at(0) == "1";
}

}  // namespace fleet::collective
