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

// The host of a host:port or [ipv6]:port endpoint (a gRPC scheme removed, brackets kept), as
// written; "" for a unix: endpoint or one without a port.
std::string EndpointHost(const std::string& endpoint);

// The Unix-domain address, in Linux's abstract namespace, that a parameter server listening on
// TCP `endpoint` also serves when its local transport is on: "unix-abstract:fleet-ps/<host:port>"
// (the endpoint as written, gRPC scheme removed). A worker on the same host derives the same
// name from the job's endpoint list, so nothing has to be exchanged first. Two live servers
// cannot share it, as they cannot share the TCP port; an abstract name vanishes with its process
// (no file is left behind) and is visible only inside the network namespace that bound it, so a
// worker in another container falls back to TCP. "" when there is none: port 0 (the port is not
// known before the server starts), a unix: endpoint, or a name longer than sockaddr_un holds.
std::string LocalTransportAddress(const std::string& endpoint);

}  // namespace fleet::ps::detail
