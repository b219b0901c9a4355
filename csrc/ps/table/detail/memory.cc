#include "ps/table/detail/memory.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fleet::ps::detail {
namespace {

// The value of "<key>: <n> kB" in /proc/meminfo, in bytes.
bool MeminfoBytes(const std::string& key, uint64_t* bytes) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  uint64_t value;
  while (in >> name >> value) {
    std::getline(in, unit);
    if (name == key + ":") {
      *bytes = value * 1024;
      return true;
    }
  }
  return false;
}

bool ReadNumber(const std::string& path, uint64_t* value) {
  std::ifstream in(path);
  std::string text;
  return static_cast<bool>(in >> text) && absl::SimpleAtoi(text, value);  // "max" fails
}

std::string Gib(uint64_t bytes) { return absl::StrFormat("%.2f GiB", bytes / 1073741824.0); }

}  // namespace

uint64_t AvailableMemoryBytes() {
  uint64_t available = UINT64_MAX;
  uint64_t bytes;
  if (MeminfoBytes("MemAvailable", &bytes)) available = bytes;
  uint64_t limit, current;
  if (ReadNumber("/sys/fs/cgroup/memory.max", &limit) &&
      ReadNumber("/sys/fs/cgroup/memory.current", &current)) {
    available = std::min(available, limit > current ? limit - current : 0);
  }
  return available;
}

absl::Status CheckMemory(uint64_t bytes, const std::string& what) {
  const uint64_t available = AvailableMemoryBytes();
  if (bytes <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(what, ": ", Gib(bytes),
                                                   " needed on this server, but only ",
                                                   Gib(available), " of memory available"));
}

}  // namespace fleet::ps::detail
