#include "ps/table/detail/overflow_guard.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ps/table/detail/magnitude.h"

namespace fleet::ps::detail {

absl::Status CheckOverflowConfig(const proto::TableConfig& config, const std::string& name) {
  const float max_abs = config.overflow().max_abs();
  if (max_abs >= 0.0f && std::isfinite(max_abs)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": overflow.max_abs must be a finite number >= 0 (0: the float range), got ", max_abs));
}

OverflowGuard::OverflowGuard(const proto::OverflowConfig& config)
    : clip_(config.action() == proto::OverflowConfig::CLIP),
      bound_(config.max_abs() > 0.0f ? config.max_abs() : FLT_MAX) {}

void OverflowGuard::Keep(const float* row, size_t floats) {
  kept_.resize(floats);
  std::memcpy(kept_.data(), row, floats * sizeof(float));
}

bool OverflowGuard::Check(float* row, size_t floats) {
  // The common case, all in range, in one vectorised pass (a NaN compares above any bound).
  if (!AnyMagnitudeAbove(row, floats, MagnitudeBits(bound_))) return true;
  bool has_nan = false;
  for (size_t i = 0; i < floats; ++i) has_nan |= std::isnan(row[i]);
  if (clip_ && !has_nan) {
    for (size_t i = 0; i < floats; ++i) row[i] = std::clamp(row[i], -bound_, bound_);
    return true;
  }
  std::memcpy(row, kept_.data(), floats * sizeof(float));
  return false;
}

}  // namespace fleet::ps::detail
