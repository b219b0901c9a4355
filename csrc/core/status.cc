#include "core/status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace fleet {

void ThrowIfError(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return;
  const std::string message = context.empty() ? std::string(status.message())
                                              : absl::StrCat(context, ": ", status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kDataLoss:  // a damaged or foreign file: wrong content passed in
      throw InvalidArgument(message);
    case absl::StatusCode::kResourceExhausted:  // a table too large for this machine, a full shard
      throw OutOfMemory(message);
    case absl::StatusCode::kNotFound:
      throw NotFound(message);
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
      throw Unavailable(message);
    case absl::StatusCode::kDeadlineExceeded:
      throw Timeout(message);
    default:
      throw Internal(absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message));
  }
}

}  // namespace fleet
