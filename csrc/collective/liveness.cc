#include "collective/liveness.h"

#include "core/errors.h"

namespace fleet::collective {

LivenessListener::LivenessListener(const std::string& host, int port)
    : socket_(detail::Listen(host, port, &port_)) {}

std::vector<int> UnreachableRanks(const std::vector<std::string>& endpoints, int self,
                                  Duration timeout) {
  std::vector<int> unreachable;
  for (int r = 0; r < static_cast<int>(endpoints.size()); ++r) {
    if (r == self) continue;
    const std::string& endpoint = endpoints[r];
    const size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos) continue;  // not an endpoint we can probe
    std::string host = endpoint.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    try {
      detail::Connect(host, std::stoi(endpoint.substr(colon + 1)), timeout, timeout);
    } catch (const Error&) {
      unreachable.push_back(r);
    } catch (const std::exception&) {  // a malformed port: nothing to say about that rank
    }
  }
  return unreachable;
}

}  // namespace fleet::collective
