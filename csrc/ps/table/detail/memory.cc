#include "ps/table/detail/memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fleet::ps::detail {
namespace {

// The value of a "<key>: <n> kB" line of `path` (/proc/meminfo, /proc/self/status), in bytes.
bool MeminfoBytes(const std::string& key, uint64_t* bytes, const char* path) {
  std::ifstream in(path);
  std::string line;
  const std::string prefix = key + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    uint64_t value;
    std::string text = line.substr(prefix.size());
    const size_t kb = text.find("kB");
    if (kb != std::string::npos) text.resize(kb);
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) return false;
    *bytes = value * 1024;
    return true;
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

uint64_t AvailableMemoryBytes(std::string* source) {
  uint64_t available = UINT64_MAX;
  std::string why = "no limit found";
  auto consider = [&](uint64_t bytes, const char* what) {
    if (bytes < available) {
      available = bytes;
      why = what;
    }
  };
  uint64_t bytes;
  if (MeminfoBytes("MemAvailable", &bytes, "/proc/meminfo")) {
    consider(bytes, "the machine's available memory (MemAvailable)");
  }
  uint64_t limit, current;
  if (ReadNumber("/sys/fs/cgroup/memory.max", &limit) &&
      ReadNumber("/sys/fs/cgroup/memory.current", &current)) {
    consider(limit > current ? limit - current : 0, "the cgroup's memory.max");
  } else if (ReadNumber("/sys/fs/cgroup/memory/memory.limit_in_bytes", &limit) &&
             ReadNumber("/sys/fs/cgroup/memory/memory.usage_in_bytes", &current)) {
    consider(limit > current ? limit - current : 0, "the cgroup's memory.limit_in_bytes");
  }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY &&
      MeminfoBytes("VmSize", &bytes, "/proc/self/status")) {
    const uint64_t cap = static_cast<uint64_t>(as.rlim_cur);
    consider(cap > bytes ? cap - bytes : 0, "the process's address-space limit (RLIMIT_AS)");
  }
  if (source != nullptr) *source = why;
  return available;
}

absl::Status CheckMemory(uint64_t bytes, const std::string& what) {
  std::string source;
  const uint64_t available = AvailableMemoryBytes(&source);
  if (bytes <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": ", Gib(bytes), " needed on this server, but only ", Gib(available),
                   " of memory available (", source, ")"));
}

}  // namespace fleet::ps::detail
