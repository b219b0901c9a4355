#pragma once
// Timeouts cross from Python as float seconds. This is the one conversion of such a value to an
// absl::Duration, so that every binding refuses the same values with the same message instead
// of passing a negative, NaN or infinite deadline on (which gRPC and absl turn into an instant
// failure or a wait forever).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fleet {

// `seconds` as a Duration. InvalidArgument "<name> must be a finite number of seconds > 0, got
// <seconds>" (">= 0" with allow_zero, for a poll) otherwise, and for more than a year (a typo,
// and past what the RPC layer carries).
inline absl::StatusOr<absl::Duration> TimeoutFromSeconds(double seconds, absl::string_view name,
                                                         bool allow_zero = false) {
  constexpr double kMaxSeconds = 365.0 * 24 * 3600;
  const bool ok = std::isfinite(seconds) && (allow_zero ? seconds >= 0.0 : seconds > 0.0) &&
                  seconds <= kMaxSeconds;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be a finite number of seconds ",
                                                   allow_zero ? ">= 0" : "> 0",
                                                   " and at most a year, got ", seconds));
  }
  return absl::Milliseconds(seconds * 1000.0);
}

// For the areas whose types follow a library's std::chrono (the collective area and Gloo): the same
// validation, whole milliseconds, at least 1.
inline absl::StatusOr<std::chrono::milliseconds> TimeoutMillisFromSeconds(double seconds,
                                                                          absl::string_view name) {
  auto timeout = TimeoutFromSeconds(seconds, name);
  if (!timeout.ok()) return timeout.status();
  return std::max(std::chrono::milliseconds(1), absl::ToChronoMilliseconds(*timeout));
}

}  // namespace fleet
