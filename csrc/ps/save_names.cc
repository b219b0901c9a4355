#include "ps/save_names.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet::ps {

std::string NewSaveId() {
  std::random_device device;
  const uint64_t bits = (uint64_t{device()} << 32) ^ device();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(bits));
  return absl::StrCat(absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone()), "-",
                      hex);
}

absl::Status CheckSaveId(const std::string& save_id) {
  const bool ok = !save_id.empty() && save_id.size() <= 64 &&
                  std::all_of(save_id.begin(), save_id.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '-' || c == '_';
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("save id '", save_id.substr(0, 80),
                                                 "' is not 1 to 64 letters, digits, '-' or '_'"));
}

absl::Status CheckDirname(const std::string& dirname, const char* what) {
  if (!dirname.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": the checkpoint directory is empty"));
}

}  // namespace fleet::ps
