#include "ps/detail/endpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fleet::ps::detail {
namespace {

inline constexpr char kUnixScheme[] = "unix:";
// sockaddr_un.sun_path holds 108 bytes; an abstract name takes one for its leading NUL.
inline constexpr size_t kMaxAbstractName = 107;

// `endpoint` without a leading "dns:///", "ipv4:" or "ipv6:".
absl::string_view WithoutScheme(absl::string_view endpoint) {
  for (absl::string_view scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(endpoint, scheme)) {
      endpoint.remove_prefix(scheme.size());
      break;
    }
  }
  return endpoint;
}

bool IsHostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

bool IsBracketedHostChar(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.' || c == '%';
}

bool ValidHostPort(absl::string_view text, bool allow_port_zero) {
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return false;
  absl::string_view host = text.substr(0, colon);
  absl::string_view port = text.substr(colon + 1);
  uint32_t number = 0;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(port, &number) || number > 65535 || (number == 0 && !allow_port_zero)) {
    return false;
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    return !host.empty() && std::all_of(host.begin(), host.end(), IsBracketedHostChar);
  }
  return !host.empty() && host.size() <= 253 && std::all_of(host.begin(), host.end(), IsHostChar);
}

}  // namespace

absl::Status CheckEndpoint(const std::string& endpoint, bool allow_port_zero,
                           const std::string& what) {
  if (absl::StartsWith(endpoint, kUnixScheme) && endpoint.size() > 5) return absl::OkStatus();
  if (ValidHostPort(WithoutScheme(endpoint), allow_port_zero)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " '", endpoint.substr(0, 200), "' is not host:port (a port from ",
                   allow_port_zero ? 0 : 1, " to 65535), [ipv6]:port or unix:path"));
}

std::string EndpointHost(const std::string& endpoint) {
  if (absl::StartsWith(endpoint, kUnixScheme)) return "";
  const absl::string_view text = WithoutScheme(endpoint);
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return "";
  return std::string(text.substr(0, colon));
}

std::string LocalTransportAddress(const std::string& endpoint) {
  if (absl::StartsWith(endpoint, kUnixScheme)) return "";
  const absl::string_view text = WithoutScheme(endpoint);
  if (!ValidHostPort(text, /*allow_port_zero=*/false)) return "";
  const std::string name = absl::StrCat("fleet-ps/", text);
  if (name.size() > kMaxAbstractName) return "";
  return absl::StrCat("unix-abstract:", name);
}

}  // namespace fleet::ps::detail
