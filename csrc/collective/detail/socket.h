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

// What a frame may claim. Anything can connect to a store's port (a port scanner, an HTTP
// health check, a fuzzer), so every length is checked before memory is reserved for it, and a
// part's bytes are stored as they arrive rather than reserved from its claimed length. A
// rendezvous only moves keys and addresses; these leave room for large user values.
inline constexpr uint32_t kMaxFrameParts = 1 << 16;
inline constexpr uint64_t kMaxPartBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxFrameBytes = uint64_t{256} << 20;

// Where frame bytes come from: a socket, or memory (tests and the fuzz target).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads exactly n bytes into data. Returns false when the source ends before the first byte
  // and `eof_ok` is set; throws Unavailable (or Timeout) naming the peer otherwise.
  virtual bool ReadExact(void* data, size_t n, bool eof_ok) = 0;
};

// Reads one frame from `source`. Returns false on a clean end before the first byte. A frame
// whose header breaks the limits above throws InvalidArgument naming `peer` and what it
// claimed (the stream is then out of step: the caller drops the connection).
bool ReadFrame(ByteSource* source, Frame* frame, const std::string& peer);
// The wire bytes of a frame.
std::string EncodeFrame(const Frame& frame);

// Writes a frame; throws Unavailable naming `peer` on failure.
void SendFrame(int fd, const Frame& frame, const std::string& peer);
// Reads a frame from a socket, as ReadFrame. Throws Unavailable (or Timeout when the socket's
// receive timeout passes) naming `peer` when the stream breaks.
bool RecvFrame(int fd, Frame* frame, const std::string& peer);
// Sets the send and receive timeouts of a connected socket (and TCP_NODELAY).
void SetIoTimeout(int fd, Duration timeout);

}  // namespace fleet::collective::detail
