#pragma once
// Syntax of the endpoints a client connects to and the addresses a server listens on, checked
// up front so that a typo fails at once with its name instead of after the connect timeout.

#include <string>

#include "absl/status/status.h"

namespace fleet::ps::detail {

// OK for "host:port", "[ipv6]:port", the same behind gRPC's "dns:///", "ipv4:" or "ipv6:"
// schemes, and "unix:path". The port is 1 to 65535 (0 too with `allow_port_zero`, for a
// server that picks a free port). InvalidArgument naming `what` and the endpoint otherwise.
absl::Status CheckEndpoint(const std::string& endpoint, bool allow_port_zero,
                           const std::string& what);

}  // namespace fleet::ps::detail
