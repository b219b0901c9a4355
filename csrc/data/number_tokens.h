#pragma once
// The numbers of a MultiSlot line: counts, int64 ids and float32 values, each one whitespace-
// separated token. Two ways to read each:
// - Parse*(token): any spelling the format allows (a '+', exponents, nan/inf, long digit runs),
//   with the reason a token is refused (NumberError). Floats are std::from_chars, which rounds
//   correctly, so a value is the float nearest the decimal, as strtof gives in the "C" locale.
// - Read*Fast(&p, end): the common spellings only (runs of up to 18 digits), read eight bytes at
//   a time (digit_words.h). false means "not this spelling", never "bad token": the caller then
//   finds the token's end and calls Parse*. A value read fast is bit for bit what Parse* gives
//   for the same token.
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

// The word at *p, and whether its token starts with '-' (then the word is reloaded past the sign,
// which moves *q): the sign is checked in the word the digits need anyway.
inline uint64_t LoadSignedWord(const char** q, const char* end, bool* negative) {
  const uint64_t word = digit_words::LoadWord(*q, end);
  *negative = (word & 0xFF) == '-';
  if (!*negative) return word;
  return digit_words::LoadWord(++*q, end);
}

// How many digits (1 to 7) begin `word` when a space follows them in it, else 0. Why: nearly
// every token of a MultiSlot line is such a run, and one compare of the byte after it settles
// the token; the other endings (a tab, a '\r', the line's end, 8 digits or more) are told apart
// by the Read*Runs below, out of line.
inline int SpacedDigits(uint64_t word) {
  const int n = digit_words::LeadingDigits(word);
  // n = 8 would shift by 64, which is undefined; masked, it reads byte 0, a digit: no space.
  const int after = static_cast<int>((word >> ((8 * n) & 63)) & 0xFF);
  return n > 0 && after == ' ' ? n : 0;
}

// Each Read*Fast below for the spellings its inline part does not take, with the same contract.
// Out of line: they run for a token or two a line (a line's last token, a long id), and inline
// they only made the parser's loop larger (3% more instructions, callgrind).
bool ReadCountRuns(const char** p, const char* end, uint64_t* out);
bool ReadInt64Runs(const char** p, const char* end, int64_t* out);
bool ReadFloatRuns(const char** p, const char* end, float* out);

}  // namespace number_tokens_detail

// The fast spellings of the token at *p (p < end, or past it at the end of a line: then they
// fail). On success they store the value and move *p past the token and the separator after it
// (to `end` after the line's last token). Anything else, including a separator at *p, returns
// false and leaves *p. Nothing at or past `end` is read, but the 8 bytes before `end` must be
// readable (digit_words::LoadWord): the line holds at least 8 bytes, or sits at the end of a
// buffer that does.

// 1 to 18 digits. Counts are mostly one digit ("1" before each id of a one-id slot), which two
// byte compares settle for a fraction of the word's cost.
inline bool ReadCountFast(const char** p, const char* end, uint64_t* out) {
  const char* q = *p;
  if (end - q >= 2 && static_cast<unsigned char>(q[0] - '0') < 10 && IsSeparator(q[1])) {
    *out = static_cast<uint64_t>(q[0] - '0');
    *p = q + 2;
    return true;
  }
  return number_tokens_detail::ReadCountRuns(p, end, out);
}

// An optional '-' and 1 to 18 digits (below 10^18, so within int64).
inline bool ReadInt64Fast(const char** p, const char* end, int64_t* out) {
  const char* q = *p;
  bool negative;
  const uint64_t word = number_tokens_detail::LoadSignedWord(&q, end, &negative);
  if (const int n = number_tokens_detail::SpacedDigits(word); n > 0) {
    const int64_t value = static_cast<int64_t>(digit_words::DigitsValue(word, n));
    *out = negative ? -value : value;
    *p = q + n + 1;
    return true;
  }
  return number_tokens_detail::ReadInt64Runs(p, end, out);
}

// "[-]d+[.d+]" of at most 9 digits forming an integer m <= 2^24. Exact: m and 10^f (f <= 8) are
// floats, and one IEEE division of floats rounds correctly, so m / 10^f is the float nearest the
// decimal, as from_chars gives. Inline: up to 7 digits, an optional point and up to 7 more.
inline bool ReadFloatFast(const char** p, const char* end, float* out) {
  using digit_words::DigitsValue;
  const char* q = *p;
  bool negative;
  const uint64_t word = number_tokens_detail::LoadSignedWord(&q, end, &negative);
  const int n = digit_words::LeadingDigits(word);
  if (n > 0 && n < 8) {
    const int after = static_cast<int>((word >> (8 * n)) & 0xFF);
    if (after == ' ') {  // below 10^7 < 2^24: a float as it is
      const float v = static_cast<float>(DigitsValue(word, n));
      *out = negative ? -v : v;
      *p = q + n + 1;
      return true;
    }
    if (after == '.') {
      const uint64_t fraction_word = digit_words::LoadWord(q + n + 1, end);
      const int f = number_tokens_detail::SpacedDigits(fraction_word);
      if (f > 0 && n + f <= number_tokens_detail::kMaxFloatDigits) {
        const uint64_t mantissa =
            DigitsValue(word, n) * digit_words::kPow10[f] + DigitsValue(fraction_word, f);
        if (mantissa <= (uint64_t{1} << 24)) {
          const float v = static_cast<float>(mantissa) / number_tokens_detail::kExactPow10[f];
          *out = negative ? -v : v;
          *p = q + n + 1 + f + 1;
          return true;
        }
      }
    }
  }
  return number_tokens_detail::ReadFloatRuns(p, end, out);
}

}  // namespace fleet::data
