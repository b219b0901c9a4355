#include "collective/liveness.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective {
namespace {

// The first stream address of host:port, or false when it does not resolve.
bool Resolve(const std::string& endpoint, sockaddr_storage* address, socklen_t* length) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = endpoint.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), endpoint.substr(colon + 1).c_str(), &hints, &found) != 0) {
    return false;
  }
  std::memcpy(address, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  freeaddrinfo(found);
  return true;
}

}  // namespace

LivenessListener::LivenessListener(const std::string& host, int port)
    : socket_(detail::Listen(host, port, &port_)) {
  // Non-blocking, so that the thread takes every queued probe and then waits in poll.
  const int flags = fcntl(socket_.fd(), F_GETFL);
  FLEET_ENFORCE(flags >= 0 && fcntl(socket_.fd(), F_SETFL, flags | O_NONBLOCK) == 0, Unavailable,
                "liveness listener on ", host, ":", port_,
                ": cannot make it non-blocking: ", std::strerror(errno));
  FLEET_ENFORCE(pipe2(wake_, O_CLOEXEC) == 0, Unavailable, "liveness listener on ", host, ":",
                port_, ": cannot create a wake-up pipe: ", std::strerror(errno));
  try {
    answering_ = std::thread([this] { AnswerProbes(); });
  } catch (const std::system_error& e) {
    close(wake_[0]);
    close(wake_[1]);
    throw Unavailable(absl::StrCat("liveness listener on ", host, ":", port_,
                                   ": cannot start its thread: ", e.what()));
  }
}

LivenessListener::~LivenessListener() {
  char byte = 0;
  if (write(wake_[1], &byte, 1) < 0) {
    // A full pipe already holds a wake-up.
  }
  answering_.join();
  close(wake_[0]);
  close(wake_[1]);
}

void LivenessListener::AnswerProbes() {
  while (true) {
    pollfd fds[2] = {{socket_.fd(), POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    // Take every queued probe; closing it unread is the answer (the prober sent nothing).
    while (true) {
      const int fd = accept4(socket_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        close(fd);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // No descriptor to accept with: wait a moment (or for the wake-up) rather than spin.
        poll(fds + 1, 1, 100);
      }
      break;  // EAGAIN: the queue is empty
    }
  }
}

std::vector<int> UnreachableRanks(const std::vector<std::string>& endpoints, int self,
                                  Duration timeout) {
  // One non-blocking connect per peer, all at once: a refusal (the process is gone) is known at
  // once, a silent host after `timeout`, so the probe takes at most `timeout` for any number
  // of peers and answers while the survivors of a failure are still alive.
  std::vector<detail::Socket> sockets;
  std::vector<pollfd> polls;
  std::vector<int> ranks;
  std::vector<int> unreachable;
  for (int r = 0; r < static_cast<int>(endpoints.size()); ++r) {
    if (r == self) continue;
    sockaddr_storage address{};
    socklen_t length = 0;
    if (!Resolve(endpoints[r], &address, &length)) continue;  // nothing to say about that rank
    detail::Socket s(socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (s.fd() < 0) continue;
    if (connect(s.fd(), reinterpret_cast<sockaddr*>(&address), length) == 0) continue;  // alive
    if (errno != EINPROGRESS) {
      unreachable.push_back(r);
      continue;
    }
    polls.push_back(pollfd{s.fd(), POLLOUT, 0});
    ranks.push_back(r);
    sockets.push_back(std::move(s));
  }
  std::vector<bool> answered(polls.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t pending = polls.size();
  while (pending > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const int n = poll(polls.data(), polls.size(), static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (size_t i = 0; i < polls.size(); ++i) {
      if (answered[i] || polls[i].revents == 0) continue;
      answered[i] = true;
      --pending;
      int error = 0;
      socklen_t size = sizeof(error);
      getsockopt(polls[i].fd, SOL_SOCKET, SO_ERROR, &error, &size);
      if (error != 0) unreachable.push_back(ranks[i]);
      polls[i].fd = -1;  // poll skips it from now on
    }
  }
  for (size_t i = 0; i < polls.size(); ++i) {
    if (!answered[i]) unreachable.push_back(ranks[i]);  // silent until the timeout
  }
  std::sort(unreachable.begin(), unreachable.end());
  return unreachable;
}

}  // namespace fleet::collective
