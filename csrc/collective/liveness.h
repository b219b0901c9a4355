#pragma once
// Telling which rank of a group has died, so that a collective that failed because a peer went
// away can name it (a Gloo error only names a socket address).
//
// Each rank holds a LivenessListener on its job endpoint (fleetrun's PADDLE_CURRENT_ENDPOINT,
// which nothing else listens on in a collective job) or, in a Gloo group, on an ephemeral port
// announced at the rendezvous. A probe is a bare TCP connect: the kernel refuses it once the
// process has exited or been killed. While the process lives, one thread accepts each probe and
// closes it at once (the answer), so that however many probes come, none waits in a full listen
// queue (the kernel drops connects beyond it, which would name a live rank as gone), and the
// listener holds no descriptor per probe. UnreachableRanks probes the peers after a failure.

#include <string>
#include <thread>
#include <vector>

#include "collective/detail/socket.h"
#include "collective/store.h"

namespace fleet::collective {

class LivenessListener {
 public:
  // Listens on host:port (0: an ephemeral port, see port()) and answers probes until destroyed;
  // Unavailable naming the endpoint when it cannot listen.
  LivenessListener(const std::string& host, int port);
  // Stops answering and closes the listening socket (later probes are refused).
  ~LivenessListener();
  LivenessListener(const LivenessListener&) = delete;
  LivenessListener& operator=(const LivenessListener&) = delete;

  // The port listened on.
  int port() const { return port_; }

 private:
  void AnswerProbes();

  int port_ = 0;  // declared before socket_: Listen writes it while socket_ is built
  detail::Socket socket_;
  int wake_[2] = {-1, -1};  // a pipe that wakes the answering thread on destruction
  std::thread answering_;
};

// The indices of `endpoints` ("host:port" each), in increasing order, that refuse a TCP
// connection or do not accept one within `timeout`, skipping index `self` and endpoints that do
// not resolve. Probes all of them at once: blocks for at most about `timeout`.
std::vector<int> UnreachableRanks(const std::vector<std::string>& endpoints, int self,
                                  Duration timeout);

}  // namespace fleet::collective
