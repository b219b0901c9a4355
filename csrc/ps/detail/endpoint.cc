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
  absl::string_view text = endpoint;
  if (absl::StartsWith(text, "unix:") && text.size() > 5) return absl::OkStatus();
  for (absl::string_view scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(text, scheme)) {
      text.remove_prefix(scheme.size());
      break;
    }
  }
  if (ValidHostPort(text, allow_port_zero)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " '", endpoint.substr(0, 200), "' is not host:port (a port from ",
                   allow_port_zero ? 0 : 1, " to 65535), [ipv6]:port or unix:path"));
}

}  // namespace fleet::ps::detail
