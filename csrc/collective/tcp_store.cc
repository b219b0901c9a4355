#include "collective/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective {
namespace {

// Request opcodes; a reply carries kOk, kNotFound or kError (with the message as its one part).
enum Op : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCheck = 4,
  kOk = 100,
  kNotFound = 101,
  kError = 102
};

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, int port) : host_(host) {
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
  for (auto& t : serving_) t.join();
  close(wake_[0]);
  close(wake_[1]);
}

std::string TcpStoreServer::endpoint() const { return absl::StrCat(host_, ":", port_); }

void TcpStoreServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listener_.fd(), POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    int fd = accept(listener_.fd(), nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    client_fds_.push_back(fd);
    serving_.emplace_back([this, fd] { Serve(fd); });
  }
}

void TcpStoreServer::Serve(int fd) {
  const std::string peer = absl::StrCat("a client of the TCP store at ", endpoint());
  try {
    detail::Frame request;
    while (detail::RecvFrame(fd, &request, peer)) {
      detail::SendFrame(fd, Handle(request), peer);
    }
  } catch (const Error&) {
    // A client that vanished mid-request: its rank reports its own error; the store lives on.
  }
  std::lock_guard<std::mutex> lock(mu_);
  client_fds_.erase(std::find(client_fds_.begin(), client_fds_.end(), fd));
  close(fd);
}

detail::Frame TcpStoreServer::Handle(const detail::Frame& request) {
  const auto& parts = request.parts;
  try {
    switch (request.op) {
      case kSet:
        FLEET_ENFORCE(parts.size() == 2, InvalidArgument, "SET takes a key and a value");
        data_.Set(parts[0], parts[1]);
        return {kOk, {}};
      case kGet: {
        FLEET_ENFORCE(parts.size() == 1, InvalidArgument, "GET takes one key");
        auto value = data_.TryGet(parts[0]);
        if (!value) return {kNotFound, {}};
        return {kOk, {*std::move(value)}};
      }
      case kAdd:
        FLEET_ENFORCE(parts.size() == 2, InvalidArgument, "ADD takes a key and a delta");
        return {kOk, {absl::StrCat(data_.Add(parts[0], ParseCounter(parts[0], parts[1])))}};
      case kCheck:
        return {kOk, {data_.Check(parts) ? "1" : "0"}};
      default:
        throw InvalidArgument(absl::StrCat("unknown request code ", int{request.op}));
    }
  } catch (const Error& e) {
    return {kError, {e.what()}};
  }
}

TcpStore::TcpStore(const std::string& host, int port, TcpStoreOptions options)
    : endpoint_(absl::StrCat(host, ":", port)) {
  socket_ = detail::Connect(host, port, options.connect_timeout, options.io_timeout);
}

std::string TcpStore::Describe() const { return absl::StrCat("TCP store at ", endpoint_); }

detail::Frame TcpStore::Request(detail::Frame request) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string peer = Describe();
  detail::SendFrame(socket_.fd(), request, peer);
  detail::Frame reply;
  FLEET_ENFORCE(detail::RecvFrame(socket_.fd(), &reply, peer), Unavailable, peer,
                " closed the connection (the process serving it has exited)");
  FLEET_ENFORCE(reply.op != kError, InvalidArgument, peer, ": ",
                reply.parts.empty() ? "request failed" : reply.parts[0]);
  return reply;
}

void TcpStore::Set(const std::string& key, const std::string& value) {
  Request({kSet, {key, value}});
}

std::optional<std::string> TcpStore::TryGet(const std::string& key) {
  detail::Frame reply = Request({kGet, {key}});
  if (reply.op == kNotFound) return std::nullopt;
  return std::move(reply.parts.at(0));
}

int64_t TcpStore::Add(const std::string& key, int64_t delta) {
  detail::Frame reply = Request({kAdd, {key, absl::StrCat(delta)}});
  return ParseCounter(key, reply.parts.at(0));
}

bool TcpStore::Check(const std::vector<std::string>& keys) {
  return Request({kCheck, keys}).parts.at(0) == "1";
}

}  // namespace fleet::collective
