#pragma once
// Decimal digit runs read eight bytes at a time, for the MultiSlot parser's fast paths.
//
// Why: a MultiSlot line is mostly short digit runs (ids of 5-7 digits, "%.6g" floats). Here a
// run's length is the position of the first non-digit byte in a 64-bit word (an add, a subtract,
// masks and a bit scan) and its value comes from three multiply-and-mask steps that combine digit
// pairs, then pairs of pairs (the eight-digit "SWAR" conversion Lemire describes in "Quickly
// parsing eight digits", 2018). The same word also holds the byte after the run, so the token's
// end is checked without another load.
//
// Every function is exact: DigitsValue is the run's decimal value, no rounding. Byte order:
// x86-64 and every other little-endian target (checked below).

#include <cstdint>
#include <cstring>

namespace fleet::data::digit_words {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "digit_words reads little-endian words");

// The bytes [p, min(p + 8, end)) as a word, the first byte lowest; bytes at or past `end` read as
// 0, which is not a digit, so a run never extends past `end`. Nothing at or past `end` is read,
// but the 8 bytes before `end` must be readable (a line of at least 8 bytes; the parser copies a
// shorter one to the end of a larger buffer): within 8 bytes of `end` the word is the 8 bytes
// that end there, shifted down. Why: copying just the last few bytes was a byte loop into the
// word, whose load then waited on those stores (no store forwarding), once or twice a line: about
// 3% of the parser's time.
inline uint64_t LoadWord(const char* p, const char* end) {
  uint64_t word = 0;
  if (end - p >= 8) {
    std::memcpy(&word, p, 8);
  } else if (end > p) {
    std::memcpy(&word, end - 8, 8);
    word >>= 8 * (8 - (end - p));  // 1 to 7 bytes left: a shift of 8 to 56
  }
  return word;
}

// How many of the word's bytes, from its first, are ASCII digits: 0 to 8.
//
// Byte b is flagged unless '0' <= b <= '9': b + 0x46 sets bit 7 for 0x3A..0xB9 and b - 0x30 sets
// it for b < 0x30 or b >= 0xB0. Carries and borrows between bytes start only at a flagged byte
// and move towards later bytes, so the first flagged byte is always the first non-digit.
inline int LeadingDigits(uint64_t word) {
  const uint64_t flagged =
      ((word + 0x4646464646464646u) | (word - 0x3030303030303030u)) & 0x8080808080808080u;
  return flagged == 0 ? 8 : __builtin_ctzll(flagged) >> 3;
}

// The value of the word's first `n` bytes (1 <= n <= 8, all digits) read as a decimal number.
inline uint64_t DigitsValue(uint64_t word, int n) {
  // Move the n digits to the top so the run reads as 8 digits with leading zeros.
  uint64_t w = (word << (8 * (8 - n))) & 0x0F0F0F0F0F0F0F0Fu;
  w = (w * 10 + (w >> 8)) & 0x00FF00FF00FF00FFu;    // 4 two-digit values
  w = (w * 100 + (w >> 16)) & 0x0000FFFF0000FFFFu;  // 2 four-digit values
  return (w * 10000 + (w >> 32)) & 0xFFFFFFFFu;     // 1 eight-digit value
}

// 10^i for the digit counts of one word.
inline constexpr uint64_t kPow10[] = {1,      10,      100,      1000,     10000,
                                      100000, 1000000, 10000000, 100000000};

}  // namespace fleet::data::digit_words
