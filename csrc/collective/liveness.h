#pragma once
// Telling which rank of a group has died, so that a collective that failed because a peer went
// away can name it (a Gloo error only names a socket address).
//
// Each rank holds a LivenessListener on its job endpoint (fleetrun's PADDLE_CURRENT_ENDPOINT,
// which nothing else listens on in a collective job). Nobody ever accepts on it: the kernel
// completes a probe's TCP handshake while the process lives, and refuses it once the process has
// exited or been killed, with no thread and no protocol. UnreachableRanks probes the peers after
// a failure.

#include <string>
#include <vector>

#include "collective/detail/socket.h"
#include "collective/store.h"

namespace fleet::collective {

class LivenessListener {
 public:
  // Listens on host:port; Unavailable naming the endpoint when it cannot.
  LivenessListener(const std::string& host, int port);
  int port() const { return port_; }

 private:
  detail::Socket socket_;
  int port_ = 0;
};

// The indices of `endpoints` ("host:port" each), in increasing order, that refuse a TCP
// connection or do not accept one within `timeout`, skipping index `self` and endpoints that do
// not resolve. Probes all of them at once: blocks for at most about `timeout`.
std::vector<int> UnreachableRanks(const std::vector<std::string>& endpoints, int self,
                                  Duration timeout);

}  // namespace fleet::collective
