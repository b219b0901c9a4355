#pragma once
// The one place where an absl::Status (the PS engine's and collectives' currency) becomes a typed
// fleet exception (core/errors.h), which the bindings map to fleet.errors. Every binding, the
// communicators and the executor's kernels go through ThrowIfError.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/errors.h"

namespace fleet {

// Throws the fleet error of `status` (nothing when OK), its message prefixed by `context` and
// ": " when context is not empty.
void ThrowIfError(const absl::Status& status, absl::string_view context = {});

template <class T>
T ValueOrThrow(absl::StatusOr<T> value, absl::string_view context = {}) {
  ThrowIfError(value.status(), context);
  return std::move(*value);
}

}  // namespace fleet
