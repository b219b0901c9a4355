#include "collective/liveness.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

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
    : socket_(detail::Listen(host, port, &port_)) {}

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
