#include "collective/detail/socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string Endpoint(const std::string& host, int port) { return absl::StrCat(host, ":", port); }

// Resolves host:port to IPv4/IPv6 stream addresses; the caller frees the list.
addrinfo* Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  FLEET_ENFORCE(rc == 0, Unavailable, "cannot resolve ", Endpoint(host, port), ": ",
                gai_strerror(rc));
  return result;
}

}  // namespace

void SetIoTimeout(int fd, Duration timeout) {
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

namespace {

void SendAll(int fd, const void* data, size_t n, const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    FLEET_ENFORCE(w > 0, Unavailable, "sending to ", peer, " failed: ", std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Reads exactly n bytes. Returns false when the stream ends before the first byte and
// `eof_ok` is set.
bool RecvAll(int fd, void* data, size_t n, const std::string& peer, bool eof_ok) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && got == 0 && eof_ok) return false;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      throw Timeout(absl::StrCat("no reply from ", peer, " within the socket timeout"));
    }
    FLEET_ENFORCE(r > 0, Unavailable, "connection to ", peer,
                  " lost: ", r == 0 ? "closed by peer" : std::strerror(errno));
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

Socket::~Socket() {
  if (fd_ >= 0) close(fd_);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.Release();
  }
  return *this;
}

int Socket::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

Socket Listen(const std::string& host, int port, int* bound_port) {
  addrinfo* addrs = Resolve(host, port, /*passive=*/true);
  std::string error = "no address";
  for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
    Socket s(socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (s.fd() < 0) continue;
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s.fd(), a->ai_addr, a->ai_addrlen) != 0 || listen(s.fd(), 128) != 0) {
      error = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    getsockname(s.fd(), reinterpret_cast<sockaddr*>(&local), &len);
    *bound_port =
        ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
    freeaddrinfo(addrs);
    return s;
  }
  freeaddrinfo(addrs);
  throw Unavailable(absl::StrCat("cannot listen on ", Endpoint(host, port), ": ", error));
}

Socket Connect(const std::string& host, int port, Duration timeout, Duration io_timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string error;
  while (true) {
    addrinfo* addrs = Resolve(host, port, /*passive=*/false);
    for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
      Socket s(socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (s.fd() < 0) continue;
      if (connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(addrs);
        SetIoTimeout(s.fd(), io_timeout);
        return s;
      }
      error = std::strerror(errno);
    }
    freeaddrinfo(addrs);
    if (Clock::now() >= deadline) {
      throw Timeout(absl::StrCat("could not connect to ", Endpoint(host, port), " within ",
                                 timeout.count() / 1000.0, " s (last error: ", error, ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string EncodeFrame(const Frame& frame) {
  std::string buf;
  buf.push_back(static_cast<char>(frame.op));
  const uint32_t count = static_cast<uint32_t>(frame.parts.size());
  buf.append(reinterpret_cast<const char*>(&count), sizeof(count));
  for (const auto& part : frame.parts) {
    const uint64_t len = part.size();
    buf.append(reinterpret_cast<const char*>(&len), sizeof(len));
    buf.append(part);
  }
  return buf;
}

void SendFrame(int fd, const Frame& frame, const std::string& peer) {
  const std::string buf = EncodeFrame(frame);
  SendAll(fd, buf.data(), buf.size(), peer);
}

bool ReadFrame(ByteSource* source, Frame* frame, const std::string& peer) {
  // Bytes are appended at most this many at a time, so a claimed length costs memory only once
  // its bytes have arrived.
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  frame->parts.clear();
  if (!source->ReadExact(&frame->op, 1, /*eof_ok=*/true)) return false;
  uint32_t count = 0;
  source->ReadExact(&count, sizeof(count), false);
  FLEET_ENFORCE(count <= kMaxFrameParts, InvalidArgument, "malformed frame from ", peer,
                ": it claims ", count, " parts (at most ", kMaxFrameParts, ")");
  frame->parts.reserve(std::min<uint32_t>(count, 64));
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t len = 0;
    source->ReadExact(&len, sizeof(len), false);
    FLEET_ENFORCE(len <= kMaxPartBytes && total + len <= kMaxFrameBytes, InvalidArgument,
                  "malformed frame from ", peer, ": part ", i, " claims ", len, " bytes (at most ",
                  kMaxPartBytes, " per part and ", kMaxFrameBytes, " per frame)");
    total += len;
    std::string& part = frame->parts.emplace_back();
    while (part.size() < len) {
      const size_t have = part.size();
      const size_t chunk = static_cast<size_t>(std::min(len - have, kChunk));
      part.resize(have + chunk);
      source->ReadExact(part.data() + have, chunk, false);
    }
  }
  return true;
}

bool RecvFrame(int fd, Frame* frame, const std::string& peer) {
  class SocketSource : public ByteSource {
   public:
    SocketSource(int fd, const std::string& peer) : fd_(fd), peer_(peer) {}
    bool ReadExact(void* data, size_t n, bool eof_ok) override {
      return RecvAll(fd_, data, n, peer_, eof_ok);
    }

   private:
    int fd_;
    const std::string& peer_;
  };
  SocketSource source(fd, peer);
  return ReadFrame(&source, frame, peer);
}

}  // namespace fleet::collective::detail
