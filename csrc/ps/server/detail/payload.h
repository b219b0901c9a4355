#pragma once
// Payload bytes <-> typed spans. Payloads are little-endian int64 keys and float32 values, read
// in place from the protobuf `bytes` field when it is suitably aligned (heap strings are).

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/base/config.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace fleet::ps::detail {

#ifdef ABSL_IS_BIG_ENDIAN
#error "Fleet's parameter-server payloads are little-endian; this host is big-endian"
#endif

// The bytes as a span of T; InvalidArgument naming `what` when the size is not a multiple of T
// or the buffer is misaligned.
template <class T>
absl::StatusOr<absl::Span<const T>> BytesAs(const std::string& bytes, const char* what) {
  if (bytes.size() % sizeof(T) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", bytes.size(), " bytes is not a whole number of ", sizeof(T), "-byte elements"));
  }
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": payload buffer is misaligned"));
  }
  return absl::Span<const T>(reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T));
}

}  // namespace fleet::ps::detail
