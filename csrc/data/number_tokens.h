#pragma once
// The numbers of a MultiSlot line: counts, int64 ids and float32 values, each one whitespace-
// separated token. Two ways to read each:
// - Parse*(token): any spelling the format allows (a '+', exponents, nan/inf, long digit runs),
//   with the reason a token is refused (NumberError). Floats are std::from_chars, which rounds
//   correctly, so a value is the float nearest the decimal, as strtof gives in the "C" locale.
// - Read*Fast(&p, end): the common spellings only (runs of up to 18 digits), read eight bytes at a
// time
//   (digit_words.h). false means "not this spelling", never "bad token": the caller then finds
//   the token's end and calls Parse*. A value read fast is bit for bit what Parse* gives for the
//   same token.
// Separators are ' ', '\t' and '\r' (a CRLF file's '\r' ends its line's last token).

#include <cstdint>
#include <string_view>

#include "data/digit_words.h"

namespace fleet::data {

inline bool IsSeparator(char c) { return c == ' ' || c == '\t' || c == '\r'; }

enum class NumberError { kNone, kSyntax, kRange };

// Decimal digits only, at most 18 of them (more: kRange).
NumberError ParseCount(std::string_view token, uint64_t* out);
// An optional sign and decimal digits, within the int64 range.
NumberError ParseInt64(std::string_view token, int64_t* out);
// What std::from_chars takes (general format), and a leading '+' as strtof does, within the
// float32 range (a value that rounds to infinity or underflows to zero is kRange, as strtof's
// ERANGE).
NumberError ParseFloat(std::string_view token, float* out);

namespace number_tokens_detail {

// Powers of ten that a float holds exactly (5^10 < 2^24).
inline constexpr float kExactPow10[] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                        1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
// Decimal digits the float fast path takes; 9 of them form an integer below 2^30.
inline constexpr int kMaxFloatDigits = 9;

// A run of 1 to 18 digits at p that a separator or the end of the line follows.
struct ShortRun {
  int digits;      // 0: no such run at p
  uint64_t value;  // when digits > 0
  int after;       // the byte after the run (0-255), or kLineEnd
};

// ShortRun::after when the run ends the line. Not a byte value: a NUL in a line is no separator.
inline constexpr int kLineEnd = -1;

// The byte after the first `n` (< 8) of `word`, read at p. LoadWord reads bytes past the end as
// 0, so only a 0 needs the bound to tell the line's end from a NUL in the line.
inline int ByteAfter(uint64_t word, int n, const char* p, const char* end) {
  const int byte = static_cast<int>((word >> (8 * n)) & 0xFF);
  return byte != 0 || p + n < end ? byte : kLineEnd;
}

// `word` is LoadWord(p, end): it holds the run and the byte after it, so one load serves both.
// Runs of 8 to 18 digits (hashed ids) take more words; 19 or more (which may leave int64) are left
// to the general parsers.
inline ShortRun ReadShortRun(uint64_t word, const char* p, const char* end) {
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
inline bool EndsToken(int after) {
  return after == ' ' || after == kLineEnd || after == '\t' || after == '\r';
}

// The word at *p, and whether its token starts with '-' (then the word is reloaded past the sign,
// which moves *q): the sign is checked in the word the digits need anyway.
inline uint64_t LoadSignedWord(const char** q, const char* end, bool* negative) {
  const uint64_t word = digit_words::LoadWord(*q, end);
  *negative = (word & 0xFF) == '-';
  if (!*negative) return word;
  return digit_words::LoadWord(++*q, end);
}

}  // namespace number_tokens_detail

// The fast spellings of the token at *p (p < end, or past it at the end of a line: then they
// fail). On success they store the value and move *p past the token and the separator after it
// (to `end` after the line's last token). Anything else, including a separator at *p,
// returns false and leaves *p. Nothing at or past `end` is read.

// 1 to 18 digits. Counts are mostly one digit ("1" before each id of a one-id slot), which two
// byte compares settle for a fraction of the word's cost.
inline bool ReadCountFast(const char** p, const char* end, uint64_t* out) {
  const char* q = *p;
  if (end - q >= 2 && static_cast<unsigned char>(q[0] - '0') < 10 && IsSeparator(q[1])) {
    *out = static_cast<uint64_t>(q[0] - '0');
    *p = q + 2;
    return true;
  }
  const number_tokens_detail::ShortRun run =
      number_tokens_detail::ReadShortRun(digit_words::LoadWord(q, end), q, end);
  if (run.digits == 0 || !number_tokens_detail::EndsToken(run.after)) return false;
  *out = run.value;
  *p += run.digits + (run.after != number_tokens_detail::kLineEnd);
  return true;
}

// An optional '-' and 1 to 18 digits (below 10^18, so within int64).
inline bool ReadInt64Fast(const char** p, const char* end, int64_t* out) {
  const char* q = *p;
  bool negative;
  const uint64_t word = number_tokens_detail::LoadSignedWord(&q, end, &negative);
  const number_tokens_detail::ShortRun run = number_tokens_detail::ReadShortRun(word, q, end);
  if (run.digits == 0 || !number_tokens_detail::EndsToken(run.after)) return false;
  *out = negative ? -static_cast<int64_t>(run.value) : static_cast<int64_t>(run.value);
  *p = q + run.digits + (run.after != number_tokens_detail::kLineEnd);
  return true;
}

// "[-]d+[.d+]" of at most 9 digits forming an integer m <= 2^24. Exact: m and 10^f (f <= 8) are
// floats, and one IEEE division of floats rounds correctly, so m / 10^f is the float nearest the
// decimal, as from_chars gives.
inline bool ReadFloatFast(const char** p, const char* end, float* out) {
  using number_tokens_detail::LoadSignedWord;
  using number_tokens_detail::ReadShortRun;
  using number_tokens_detail::ShortRun;
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
    if (fraction_digits == 0 || !number_tokens_detail::EndsToken(fraction.after) ||
        whole.digits + fraction_digits > number_tokens_detail::kMaxFloatDigits) {
      return false;
    }
    mantissa = mantissa * digit_words::kPow10[fraction_digits] + fraction.value;
    q += 1 + fraction_digits;
    after = fraction.after;
  } else if (!number_tokens_detail::EndsToken(after)) {
    return false;
  }
  if (mantissa > (uint64_t{1} << 24)) return false;
  float v = static_cast<float>(mantissa);
  if (fraction_digits > 0) v /= number_tokens_detail::kExactPow10[fraction_digits];
  *out = negative ? -v : v;
  *p = q + (after != number_tokens_detail::kLineEnd);
  return true;
}

}  // namespace fleet::data
