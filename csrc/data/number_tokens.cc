#include "data/number_tokens.h"

#include <charconv>

namespace fleet::data {

// Decimal digits only; at most 18 of them, so no overflow.
NumberError ParseCount(std::string_view token, uint64_t* out) {
  if (token.empty() || token.size() > 18) {
    return token.size() > 18 ? NumberError::kRange : NumberError::kSyntax;
  }
  uint64_t v = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return NumberError::kSyntax;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return NumberError::kNone;
}

NumberError ParseInt64(std::string_view token, int64_t* out) {
  size_t i = 0;
  bool negative = false;
  if (!token.empty() && (token[0] == '-' || token[0] == '+')) {
    negative = token[0] == '-';
    i = 1;
  }
  if (i == token.size()) return NumberError::kSyntax;
  // Accumulate the magnitude in uint64 and check it against the int64 limits at each step.
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t v = 0;
  bool overflow = false;
  for (; i < token.size(); ++i) {
    char c = token[i];
    if (c < '0' || c > '9') return NumberError::kSyntax;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (limit - digit) / 10) overflow = true;  // keep scanning: syntax errors come first
    v = v * 10 + digit;
  }
  if (overflow) return NumberError::kRange;
  *out = negative ? static_cast<int64_t>(~v + 1) : static_cast<int64_t>(v);
  return NumberError::kNone;
}

NumberError ParseFloat(std::string_view token, float* out) {
  const char* begin = token.data();
  const char* end = begin + token.size();
  if (begin < end && *begin == '+') ++begin;  // from_chars rejects '+', strtof accepts it
  if (begin == end) return NumberError::kSyntax;
  auto [ptr, ec] = std::from_chars(begin, end, *out);
  if (ec == std::errc::result_out_of_range) return NumberError::kRange;
  if (ec != std::errc() || ptr != end) return NumberError::kSyntax;
  return NumberError::kNone;
}

}  // namespace fleet::data
