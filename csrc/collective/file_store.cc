#include "collective/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective {
namespace {

// Makes temporary file names unique across threads of one process (pid covers processes).
std::atomic<uint64_t> temp_counter{0};

// Holds an exclusive flock(2) on a file for the lifetime of the object.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(open(path.c_str(), O_CREAT | O_RDWR, 0644)) {
    FLEET_ENFORCE(fd_ >= 0, Unavailable, "cannot open lock file ", path, ": ",
                  std::strerror(errno));
    while (flock(fd_, LOCK_EX) != 0) {
      FLEET_ENFORCE(errno == EINTR, Unavailable, "cannot lock ", path, ": ", std::strerror(errno));
    }
  }
  ~FileLock() {
    flock(fd_, LOCK_UN);
    close(fd_);
  }

 private:
  int fd_;
};

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  FLEET_ENFORCE(!ec && std::filesystem::is_directory(dir_), Unavailable, "file store directory ",
                dir_, " cannot be created: ", ec.message());
}

std::string FileStore::Describe() const { return absl::StrCat("file store at ", dir_); }

std::string FileStore::PathOf(const std::string& key) const {
  return absl::StrCat(dir_, "/", absl::BytesToHexString(key));
}

void FileStore::WriteAtomically(const std::string& path, const std::string& value) {
  const std::string temp = absl::StrCat(path, ".tmp.", getpid(), ".", temp_counter++);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    out.close();
    FLEET_ENFORCE(out.good(), Unavailable, Describe(), ": cannot write ", temp);
  }
  FLEET_ENFORCE(std::rename(temp.c_str(), path.c_str()) == 0, Unavailable, Describe(),
                ": cannot rename ", temp, " to ", path, ": ", std::strerror(errno));
}

void FileStore::Set(const std::string& key, const std::string& value) {
  WriteAtomically(PathOf(key), value);
}

std::optional<std::string> FileStore::TryGet(const std::string& key) {
  std::ifstream in(PathOf(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

int64_t FileStore::Add(const std::string& key, int64_t delta) {
  FileLock lock(PathOf(key) + ".lock");
  auto current = TryGet(key);
  int64_t n = (current ? ParseCounter(key, *current) : 0) + delta;
  WriteAtomically(PathOf(key), absl::StrCat(n));
  return n;
}

bool FileStore::Check(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (access(PathOf(key).c_str(), F_OK) != 0) return false;
  }
  return true;
}

}  // namespace fleet::collective
