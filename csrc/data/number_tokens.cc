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

namespace number_tokens_detail {
namespace {

// A run of 1 to 18 digits at p that a separator or the end of the line follows.
struct ShortRun {
  int digits;      // 0: no such run at p
  uint64_t value;  // when digits > 0
  int after;       // the byte after the run (0-255), or kLineEnd
};

// ShortRun::after when the run ends the line. Not a byte value: a NUL in a line is no separator.
constexpr int kLineEnd = -1;

// The byte after the first `n` (< 8) of `word`, read at p. LoadWord reads bytes past the end as
// 0, so only a 0 needs the bound to tell the line's end from a NUL in the line.
int ByteAfter(uint64_t word, int n, const char* p, const char* end) {
  const int byte = static_cast<int>((word >> (8 * n)) & 0xFF);
  return byte != 0 || p + n < end ? byte : kLineEnd;
}

// `word` is LoadWord(p, end): it holds the run and the byte after it, so one load serves both.
// Runs of 8 to 18 digits (hashed ids) take more words; 19 or more (which may leave int64) are left
// to the general parsers.
ShortRun ReadShortRun(uint64_t word, const char* p, const char* end) {
  const int n = digit_words::LeadingDigits(word);
  if (n == 0) return {0, 0, 0};
  if (n < 8) return {n, digit_words::DigitsValue(word, n), ByteAfter(word, n, p, end)};
  const uint64_t high = digit_words::DigitsValue(word, 8);
  const uint64_t next = digit_words::LoadWord(p + 8, end);
  const int m = digit_words::LeadingDigits(next);
  if (m < 8) {
    return {8 + m,
            m == 0 ? high : high * digit_words::kPow10[m] + digit_words::DigitsValue(next, m),
            ByteAfter(next, m, p + 8, end)};
  }
  const uint64_t middle = high * digit_words::kPow10[8] + digit_words::DigitsValue(next, 8);
  const uint64_t last = digit_words::LoadWord(p + 16, end);
  const int r = digit_words::LeadingDigits(last);
  if (r > 2) return {0, 0, 0};
  return {16 + r,
          r == 0 ? middle : middle * digit_words::kPow10[r] + digit_words::DigitsValue(last, r),
          ByteAfter(last, r, p + 16, end)};
}

// True when a token may end before `after` (see ShortRun::after).
bool EndsToken(int after) {
  return after == ' ' || after == kLineEnd || after == '\t' || after == '\r';
}

}  // namespace

// The fast spellings as runs of up to 18 digits that any separator or the line's end follows.
bool ReadCountRuns(const char** p, const char* end, uint64_t* out) {
  const char* q = *p;
  const ShortRun run = ReadShortRun(digit_words::LoadWord(q, end), q, end);
  if (run.digits == 0 || !EndsToken(run.after)) return false;
  *out = run.value;
  *p += run.digits + (run.after != kLineEnd);
  return true;
}

bool ReadInt64Runs(const char** p, const char* end, int64_t* out) {
  const char* q = *p;
  bool negative;
  const uint64_t word = LoadSignedWord(&q, end, &negative);
  const ShortRun run = ReadShortRun(word, q, end);
  if (run.digits == 0 || !EndsToken(run.after)) return false;
  *out = negative ? -static_cast<int64_t>(run.value) : static_cast<int64_t>(run.value);
  *p = q + run.digits + (run.after != kLineEnd);
  return true;
}

bool ReadFloatRuns(const char** p, const char* end, float* out) {
  const char* q = *p;
  bool negative;
  const uint64_t word = LoadSignedWord(&q, end, &negative);
  const ShortRun whole = ReadShortRun(word, q, end);
  if (whole.digits == 0) return false;
  q += whole.digits;
  uint64_t mantissa = whole.value;
  int fraction_digits = 0;
  int after = whole.after;
  if (after == '.') {
    const ShortRun fraction = ReadShortRun(digit_words::LoadWord(q + 1, end), q + 1, end);
    fraction_digits = fraction.digits;
    if (fraction_digits == 0 || !EndsToken(fraction.after) ||
        whole.digits + fraction_digits > kMaxFloatDigits) {
      return false;
    }
    mantissa = mantissa * digit_words::kPow10[fraction_digits] + fraction.value;
    q += 1 + fraction_digits;
    after = fraction.after;
  } else if (!EndsToken(after)) {
    return false;
  }
  if (mantissa > (uint64_t{1} << 24)) return false;
  float v = static_cast<float>(mantissa);
  if (fraction_digits > 0) v /= kExactPow10[fraction_digits];
  *out = negative ? -v : v;
  *p = q + (after != kLineEnd);
  return true;
}

}  // namespace number_tokens_detail
}  // namespace fleet::data
