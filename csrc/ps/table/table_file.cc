#include "ps/table/table_file.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <new>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ps/table/detail/run_both.h"
#include "ps/table/detail/write_behind.h"

namespace fleet::ps {
namespace {

constexpr char kMagic[8] = {'F', 'L', 'E', 'E', 'T', 'P', 'S', '\0'};
constexpr size_t kBufferBytes = size_t{1} << 20;  // reads
constexpr uint64_t kWritebackBytes = uint64_t{8} << 20;

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// The CRC-32 zlib computes (the format's checksum), by libdeflate's carry-less-multiply folding:
// 12 GB/s a core here against zlib's 3.3, where the check was a sixth of a 10M-row load.
uint32_t Crc(uint32_t crc, const char* data, size_t bytes) {
  return libdeflate_crc32(crc, data, bytes);
}

absl::Status WriteAll(int fd, const char* data, size_t bytes, const std::string& path) {
  while (bytes > 0) {
    ssize_t n = ::write(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError("cannot write", path);
    data += n;
    bytes -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads up to `bytes`; returns the count (0 at end of file) or -1.
ssize_t ReadSome(int fd, char* out, size_t bytes) {
  while (true) {
    ssize_t n = ::read(fd, out, bytes);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

// Reads and checks the header at the start of `fd`.
absl::Status ReadHeader(int fd, const std::string& path, TableFileHeader* header) {
  if (ReadSome(fd, reinterpret_cast<char*>(header), sizeof(*header)) !=
          static_cast<ssize_t>(sizeof(*header)) ||
      std::memcmp(header->magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, " is not a Fleet table file (bad header)"));
  }
  if (header->version != kTableFileVersion) {
    return absl::DataLossError(absl::StrCat(path, ": format version ", header->version,
                                            ", this build reads ", kTableFileVersion));
  }
  return absl::OkStatus();
}

// CRC and length of the bytes of `fd` from `begin` to its end, read with pread (no shared file
// offset, so two threads can each take a range).
absl::StatusOr<std::pair<uint32_t, uint64_t>> RangeCrc(int fd, uint64_t begin, uint64_t end,
                                                       const std::string& path) {
  uint32_t crc = Crc(0, nullptr, 0);
  std::vector<char> buffer(kBufferBytes);
  uint64_t at = begin;
  while (at < end) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), end - at));
    ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("cannot read", path);
    if (n == 0) break;  // the file shrank under us: the length and checksum will disagree
    crc = Crc(crc, buffer.data(), static_cast<size_t>(n));
    at += static_cast<uint64_t>(n);
  }
  return std::make_pair(crc, at - begin);
}

// CRC and length of a part's body. A large body is checked in two halves at once, joined with
// crc32_combine: the check was a fifth of a load, and a load has the machine to itself.
absl::StatusOr<std::pair<uint32_t, uint64_t>> BodyCrc(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError("cannot stat", path);
  const uint64_t begin = sizeof(TableFileHeader);
  const uint64_t end = std::max<uint64_t>(begin, static_cast<uint64_t>(st.st_size));
  constexpr uint64_t kSplitBytes = uint64_t{64} << 20;
  if (end - begin < kSplitBytes || !detail::HaveSecondCore()) {
    return RangeCrc(fd, begin, end, path);
  }
  const uint64_t middle = begin + (end - begin) / 2;
  absl::StatusOr<std::pair<uint32_t, uint64_t>> first, second;
  // Out of memory for a read buffer is a status of its half, never an exception of its thread.
  auto range_crc = [&](uint64_t from,
                       uint64_t to) -> absl::StatusOr<std::pair<uint32_t, uint64_t>> {
    try {
      return RangeCrc(fd, from, to, path);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(absl::StrCat("out of memory checking ", path));
    }
  };
  detail::RunBoth([&] { first = range_crc(begin, middle); },
                  [&] { second = range_crc(middle, end); });
  if (!first.ok()) return first.status();
  if (!second.ok()) return second.status();
  if (first->second != middle - begin) return first;  // shrank: a mismatch follows anyway
  return std::make_pair(CombineCrc(first->first, second->first, second->second),
                        first->second + second->second);
}

}  // namespace

uint32_t ExtendCrc(uint32_t crc, const void* data, size_t bytes) {
  return Crc(crc, static_cast<const char*>(data), bytes);
}

uint32_t CombineCrc(uint32_t first, uint32_t second, uint64_t second_bytes) {
  static_assert(sizeof(z_off_t) >= 8, "part files pass 2 GB");
  return static_cast<uint32_t>(crc32_combine(first, second, static_cast<z_off_t>(second_bytes)));
}

TableFileHeader NewTableFileHeader() {
  TableFileHeader header;
  std::memset(&header, 0, sizeof(header));
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kTableFileVersion;
  return header;
}

// ---- writer ----------------------------------------------------------------------------------

TableFileWriter::TableFileWriter(std::string path, std::string temp_path, int fd,
                                 const TableFileHeader& header)
    : path_(std::move(path)),
      temp_path_(std::move(temp_path)),
      fd_(fd),
      header_(header),
      crc_(Crc(0, nullptr, 0)) {
  buffer_.reset(new char[kWriteBufferBytes]);
}

absl::StatusOr<std::unique_ptr<TableFileWriter>> TableFileWriter::Open(
    const std::string& path, const TableFileHeader& header) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create the directory of ", path, ": ", ec.message()));
  }
  // Distinct per process and thread, so concurrent writers of one path never share a temp file.
  std::string temp = absl::StrCat(path, ".tmp-", ::getpid(), "-",
                                  std::hash<std::thread::id>()(std::this_thread::get_id()));
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", temp);
  auto writer = std::unique_ptr<TableFileWriter>(new TableFileWriter(path, temp, fd, header));
  // Placeholder header; Finish rewrites it with the count and checksum.
  if (auto s = WriteAll(fd, reinterpret_cast<const char*>(&header), sizeof(header), temp);
      !s.ok()) {
    return s;
  }
  return writer;
}

TableFileWriter::~TableFileWriter() {
  write_behind_.reset();  // no write in flight once fd_ closes
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(temp_path_.c_str());
}

absl::Status TableFileWriter::Flush(bool last) {
  // The checksum here, the write there: a save's packing and CRC (user time) then overlap the
  // kernel's copy into the page cache (system time), a 10M-row save 0.43 s -> 0.33 s.
  crc_ = Crc(crc_, buffer_.get(), used_);
  const size_t bytes = used_;
  used_ = 0;
  if (write_behind_ == nullptr) {
    if (last || !detail::HaveSecondCore()) return WriteOut(buffer_.get(), bytes);
    write_behind_ = std::make_unique<detail::WriteBehind>(
        kWriteBufferBytes, [this](const char* data, size_t n) { return WriteOut(data, n); });
  }
  if (bytes > 0) {
    if (auto s = write_behind_->Submit(&buffer_, bytes); !s.ok()) return s;
  }
  return last ? write_behind_->Drain() : absl::OkStatus();
}

absl::Status TableFileWriter::WriteOut(const char* data, size_t bytes) {
  absl::Status s = WriteAll(fd_, data, bytes, temp_path_);
  written_ += bytes;
  if (s.ok()) StartWriteback();
  return s;
}

void TableFileWriter::StartWriteback() {
  if (written_ - writeback_begin_ < kWritebackBytes) return;
#ifdef SYNC_FILE_RANGE_WRITE
  // Asynchronous: queues the range for writing and returns. Advice only, as the fsync in
  // Finish is what makes the file durable; an error here would show there too.
  const off_t offset = static_cast<off_t>(sizeof(TableFileHeader) + writeback_begin_);
  ::sync_file_range(fd_, offset, static_cast<off_t>(written_ - writeback_begin_),
                    SYNC_FILE_RANGE_WRITE);
#endif
  writeback_begin_ = written_;
}

absl::Status TableFileWriter::Append(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    size_t n = std::min(bytes, kWriteBufferBytes - used_);
    std::memcpy(buffer_.get() + used_, p, n);
    used_ += n;
    p += n;
    bytes -= n;
    if (used_ == kWriteBufferBytes) {
      if (auto s = Flush(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status TableFileWriter::Finish(uint64_t row_count) {
  if (auto s = Flush(/*last=*/true); !s.ok()) return s;
  write_behind_.reset();
  header_.row_count = row_count;
  header_.checksum = crc_;
  if (::pwrite(fd_, &header_, sizeof(header_), 0) != static_cast<ssize_t>(sizeof(header_))) {
    return IoError("cannot write the header of", temp_path_);
  }
  if (::fsync(fd_) != 0) return IoError("cannot sync", temp_path_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return IoError("cannot close", temp_path_);
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return IoError(absl::StrCat("cannot rename ", temp_path_, " to"), path_);
  }
  finished_ = true;
  return absl::OkStatus();
}

// ---- reader ----------------------------------------------------------------------------------

TableFileReader::TableFileReader(std::string path, int fd, const TableFileHeader& header)
    : path_(std::move(path)), fd_(fd), header_(header) {}

TableFileReader::~TableFileReader() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<TableFileReader>> TableFileReader::Open(const std::string& path,
                                                                       Check check) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " is missing"));
    return IoError("cannot open", path);
  }
  TableFileHeader header;
  auto reader = std::unique_ptr<TableFileReader>(new TableFileReader(path, fd, header));
  if (auto s = ReadHeader(fd, path, &header); !s.ok()) return s;
  reader->header_ = header;
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError("cannot stat", path);
  reader->body_bytes_ = static_cast<uint64_t>(st.st_size) - sizeof(header);
  // The read buffer comes with the first read of records, so that a load can hold every part
  // open (checked) at little cost.
  if (check == Check::kNow) {
    if (auto s = reader->CheckNow(); !s.ok()) return s;
  }
  return reader;
}

absl::Status TableFileReader::CheckNow() {
  if (checked_) return absl::OkStatus();
  // Checksum pass, then rewind to the first record.
  auto body = BodyCrc(fd_, path_);
  if (!body.ok()) return body.status();
  body_bytes_ = body->second;
  if (auto s = CheckContent(body->first); !s.ok()) return s;
  if (::lseek(fd_, sizeof(header_), SEEK_SET) < 0) return IoError("cannot seek in", path_);
  return absl::OkStatus();
}

absl::Status TableFileReader::CheckContent(uint32_t crc) {
  if (crc != header_.checksum) {
    return absl::DataLossError(absl::StrCat(path_, ": checksum mismatch (file ", header_.checksum,
                                            ", content ", crc, "); the file is damaged"));
  }
  checked_ = true;
  return absl::OkStatus();
}

absl::Status TableFileReader::Fill() {
  if (buffer_.empty()) buffer_.resize(kBufferBytes);
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  ssize_t n = ReadSome(fd_, buffer_.data() + end_, buffer_.size() - end_);
  if (n < 0) return IoError("cannot read", path_);
  if (n == 0) return absl::DataLossError(absl::StrCat(path_, " ends before its last record"));
  end_ += static_cast<size_t>(n);
  return absl::OkStatus();
}

absl::Status TableFileReader::Read(void* out, size_t bytes) {
  char* dst = static_cast<char*>(out);
  while (bytes > 0) {
    if (begin_ == end_) {
      if (auto s = Fill(); !s.ok()) return s;
    }
    size_t n = std::min(bytes, end_ - begin_);
    std::memcpy(dst, buffer_.data() + begin_, n);
    begin_ += n;
    dst += n;
    bytes -= n;
  }
  return absl::OkStatus();
}

absl::Status TableFileReader::ReadAt(uint64_t offset, void* out, size_t bytes) const {
  char* dst = static_cast<char*>(out);
  uint64_t at = sizeof(TableFileHeader) + offset;
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, dst, bytes, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("cannot read", path_);
    if (n == 0) return absl::DataLossError(absl::StrCat(path_, " ends before its last record"));
    dst += n;
    at += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// ---- header only -----------------------------------------------------------------------------

absl::StatusOr<TableFileHeader> ReadTableFileHeader(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " is missing"));
    return IoError("cannot open", path);
  }
  TableFileHeader header;
  auto status = ReadHeader(fd, path, &header);
  ::close(fd);
  if (!status.ok()) return status;
  return header;
}

}  // namespace fleet::ps
