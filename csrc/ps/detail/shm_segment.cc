#include "ps/detail/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fleet::ps::detail {
namespace {

std::string RandomToken() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) absl::StrAppendFormat(&token, "%08x", device());
  return token;
}

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

}  // namespace

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(uint64_t size) {
  if (size == 0) return absl::InvalidArgumentError("a shared-memory segment of 0 bytes");
  std::string token = RandomToken();
  const std::string name = absl::StrCat(kShmNamePrefix, token);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Errno(absl::StrCat("memfd_create(", name, ")"));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    auto status = Errno(absl::StrCat("ftruncate of memfd ", name, " to ", size, " bytes"));
    close(fd);
    return status;
  }
  if (fcntl(fd, F_ADD_SEALS, kRequiredSeals) != 0) {
    auto status = Errno(absl::StrCat("sealing memfd ", name));
    close(fd);
    return status;
  }
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    auto status = Errno(absl::StrCat("mmap of memfd ", name, " (", size, " bytes)"));
    close(fd);
    return status;
  }
  return std::unique_ptr<ShmSegment>(
      new ShmSegment(fd, static_cast<char*>(data), size, std::move(token)));
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Attach(int64_t pid, int64_t fd,
                                                               const std::string& token,
                                                               uint64_t size) {
  const std::string expected = absl::StrCat("/memfd:", kShmNamePrefix, token, " (deleted)");
  if (pid <= 0 || fd < 0 || token.size() != 32 ||
      token.find_first_not_of("0123456789abcdef") != std::string::npos || size == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("malformed shared-memory segment: pid %d, fd %d, token '%s', %d bytes", pid,
                        fd, token, size));
  }
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
  const int own = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (own < 0) return Errno(absl::StrCat("opening the worker's segment ", path));
  // Checked on the descriptor opened, not on the path: the worker's descriptor may have
  // changed between a check of its path and the open.
  auto fail = [own](absl::Status status) {
    close(own);
    return status;
  };
  char link[256];
  const std::string self = absl::StrCat("/proc/self/fd/", own);
  const ssize_t n = readlink(self.c_str(), link, sizeof(link) - 1);
  if (n < 0) return fail(Errno(absl::StrCat("readlink ", self)));
  const std::string target(link, static_cast<size_t>(n));
  if (target != expected) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat(path, " is '", target, "', not the segment '", expected, "'")));
  }
  struct stat st;
  if (fstat(own, &st) != 0) return fail(Errno(absl::StrCat("fstat ", path)));
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != size) {
    return fail(absl::InvalidArgumentError(absl::StrCat("segment ", expected, " holds ", st.st_size,
                                                        " bytes, the worker said ", size)));
  }
  const int seals = fcntl(own, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("segment ", expected, " is not sealed against resizing (seals ", seals,
                     "): a worker could shrink it under the server")));
  }
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  if (data == MAP_FAILED) return fail(Errno(absl::StrCat("mmap of ", path)));
  return std::unique_ptr<ShmSegment>(new ShmSegment(own, static_cast<char*>(data), size, token));
}

ShmSegment::~ShmSegment() {
  munmap(data_, size_);
  close(fd_);
}

std::string ShmSegment::Describe() const {
  return absl::StrCat("shared-memory segment ", kShmNamePrefix, token_, " (", size_, " bytes)");
}

absl::StatusOr<absl::Span<float>> ShmSegment::Floats(uint64_t offset, uint64_t length,
                                                     const char* what) const {
  if (offset > size_ || length > size_ - offset || offset % alignof(float) != 0 ||
      length % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bytes [", offset, ", +", length,
                                                   ") are not a float-aligned range of ",
                                                   Describe()));
  }
  return absl::Span<float>(reinterpret_cast<float*>(data_ + offset), length / sizeof(float));
}

}  // namespace fleet::ps::detail
