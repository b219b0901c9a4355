#pragma once
// A shared-memory segment between a worker and a parameter server on the same host, for the
// dense floats of a push, push-pull or pull (ps.proto's ShmRange fields).
//
// Why: a dense push-pull of CTR-DNN's table (1.7 MB each way) cost about 3.3 ms of CPU per
// round trip over loopback gRPC (framing, two kernel copies per direction, slices), against
// 0.17 ms to copy the bytes once at each end; the Unix-domain socket kept both kernel copies
// and HTTP/2 (ps/detail/transport.h). With a segment, the floats are written once by the
// worker and read in place by the server's table, which writes its values back in place.
//
// Protocol: the control messages stay gRPC on the same channel (deadline, job metadata,
// incarnation checks, errors as before); only the floats move. The worker creates the segment
// (Create), tells the server (AttachSegmentRequest: its pid, the descriptor number, the
// segment's random token and size); the server maps it (Attach) and answers with an id. A
// request then names byte ranges of that segment (ShmRange), which the server checks against
// the segment before touching them (Floats: out of bounds, misaligned or overflowing ranges are
// refused naming the range and the segment; nothing of the peer is trusted).
//
// Lifetime: the segment is a memfd, a file with no name in any directory, so nothing can be
// left behind in /dev/shm: its memory is freed when the last process that maps it or holds
// its descriptor unmaps or exits, including when the worker or the server is killed. The
// server opens it through /proc/<pid>/fd/<fd> of the worker and checks, on the descriptor it
// opened, that it is the memfd of that token (so a reused pid or descriptor number cannot make
// it map another file) and that it is sealed against shrinking and growing (a segment shrunk
// under the server would turn its reads into SIGBUS).
//
// Failure modes: memfd_create fails (old kernel, seccomp) or the server cannot open the
// worker's /proc entry (another pid namespace or container, another user, another host with
// the same name): the worker says so once on stderr and keeps the floats on the wire. A worker
// that dies leaves the server's mapping until the server drops it (client detach, or its stop).
//
// Thread safety: a segment is immutable after construction; its bytes are shared, and callers
// partition them (the client gives each call in flight a slot of its own).

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fleet::ps::detail {

class ShmSegment {
 public:
  // A new segment of `size` bytes (> 0), mapped read-write and sealed at that size.
  // Unavailable naming the call that failed (memfd_create, ftruncate, seals, mmap).
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Create(uint64_t size);
  // Maps the segment that process `pid` holds as descriptor `fd`, after checking that it is the
  // memfd named after `token`, of exactly `size` bytes, sealed against shrinking. Unavailable
  // when the descriptor cannot be opened (another host, container or user), InvalidArgument
  // naming what does not match.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Attach(int64_t pid, int64_t fd,
                                                            const std::string& token,
                                                            uint64_t size);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  char* data() const { return data_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }
  // The random part of the memfd's name (32 hex digits).
  const std::string& token() const { return token_; }
  // "shared-memory segment fleet-ps-<token> (<size> bytes)", for errors.
  std::string Describe() const;

  // The bytes [offset, offset + length) as floats. InvalidArgument naming `what`, the range and
  // the segment when the range is not inside the segment or not float-aligned.
  absl::StatusOr<absl::Span<float>> Floats(uint64_t offset, uint64_t length,
                                           const char* what) const;

 private:
  ShmSegment(int fd, char* data, uint64_t size, std::string token)
      : fd_(fd), data_(data), size_(size), token_(std::move(token)) {}

  int fd_;
  char* data_;
  uint64_t size_;
  std::string token_;
};

// The memfd name prefix of every segment ("fleet-ps-"); the kernel shows it as
// "/memfd:fleet-ps-<token> (deleted)" in /proc/<pid>/fd.
inline constexpr char kShmNamePrefix[] = "fleet-ps-";

}  // namespace fleet::ps::detail
