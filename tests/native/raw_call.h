#pragma once
// One unary call with a serialised request to any method of a server, bypassing PsClient's
// checks: for tests that send malformed requests on purpose, and for debugging a server by hand.

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fleet::ps {

// Sends `request` (a serialised message) to `method` ("/fleet.ps.proto.PsService/PushSparse")
// at `endpoint` and returns the serialised reply. Transport errors name the endpoint; a reply's
// own RpcStatus is left to the caller to read. Blocks up to `timeout`.
absl::StatusOr<std::string> RawCall(const std::string& endpoint, const std::string& method,
                                    const std::string& request, absl::Duration timeout);

}  // namespace fleet::ps
