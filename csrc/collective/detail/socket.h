#pragma once
// Blocking TCP helpers for the TCP store: listen, connect with retry, and length-prefixed frames.
// Internal to fleet::collective. Every function throws fleet::Unavailable or fleet::Timeout naming
// the endpoint; none of them aborts.

#include <cstdint>
#include <string>
#include <vector>

#include "collective/store.h"

namespace fleet::collective::detail {

// A socket closed on destruction; movable, not copyable.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept : fd_(other.Release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  int Release();

 private:
  int fd_ = -1;
};

// Listens on host:port (port 0: an ephemeral port); the bound port is written to *bound_port.
Socket Listen(const std::string& host, int port, int* bound_port);
// Connects to host:port, retrying refused connections until `timeout` passes (the peer may not
// have started listening yet). Reads and writes on the result time out after `io_timeout`.
Socket Connect(const std::string& host, int port, Duration timeout, Duration io_timeout);

// A message: an opcode and a list of byte strings. Wire format (native byte order, both ends run
// the same build): u8 op, u32 part count, then per part u64 length and the bytes.
struct Frame {
  uint8_t op = 0;
  std::vector<std::string> parts;
};

// Writes a frame; throws Unavailable naming `peer` on failure.
void SendFrame(int fd, const Frame& frame, const std::string& peer);
// Reads a frame. Returns false on a clean end of stream before the first byte; throws
// Unavailable (or Timeout when the socket's receive timeout passes) naming `peer` otherwise.
bool RecvFrame(int fd, Frame* frame, const std::string& peer);

}  // namespace fleet::collective::detail
