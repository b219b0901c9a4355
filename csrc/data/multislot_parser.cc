#include "data/multislot_parser.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "data/printable.h"

namespace fleet::data {
namespace {

inline bool IsSeparator(char c) { return c == ' ' || c == '\t' || c == '\r'; }

inline bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// Powers of ten that a float holds exactly (5^10 < 2^24).
constexpr float kExactPow10[] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
constexpr int kMaxFastFraction = 10;
// Decimal digits the float fast path accumulates; 9 fit in uint64 with room to spare.
constexpr int kMaxFastFloatDigits = 9;
// Integers of at most this many digits cannot overflow int64.
constexpr int kMaxFastIntDigits = 18;

// A cursor over the tokens of one line, without copying.
//
// The Try* fast paths parse the common spellings while scanning, in one pass: plain decimal
// integers of at most 18 digits, and decimals "[-]d+[.d+]" whose digits form an integer of at most
// 2^24 with at most 10 of them after the point. Anything else (a '+', an exponent, nan, more
// digits, a malformed token) leaves the cursor where it was and returns false; the caller then
// takes the token with Next() and the general parsers below, which also word the error. The
// fast paths give bit-identical values: an integer up to 2^24 and 10^f (f <= 10) are exact
// floats, and one IEEE division of exact operands is correctly rounded, as from_chars is.
class Tokenizer {
 public:
  explicit Tokenizer(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}

  // Skips separators; true when a token follows.
  bool HasToken() {
    while (p_ < end_ && IsSeparator(*p_)) ++p_;
    return p_ < end_;
  }

  // The next token, or an empty view at the end of the line.
  std::string_view Next() {
    HasToken();
    const char* start = p_;
    while (p_ < end_ && !IsSeparator(*p_)) ++p_;
    return std::string_view(start, static_cast<size_t>(p_ - start));
  }

  // A count: digits only. Call after HasToken().
  bool TryCount(uint64_t* out) {
    const char* p = p_;
    uint64_t v = 0;
    if (!ScanDigits(&p, &v)) return false;
    *out = v;
    p_ = p;
    return true;
  }

  // An int64: an optional '-' and digits. Call after HasToken().
  bool TryInt64(int64_t* out) {
    const char* p = p_;
    bool negative = *p == '-';
    p += negative;
    uint64_t v = 0;
    if (!ScanDigits(&p, &v)) return false;
    *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    p_ = p;
    return true;
  }

  // A float32: an optional '-', digits, and optionally '.' and more digits. Call after HasToken().
  bool TryFloat(float* out) {
    const char* p = p_;
    bool negative = *p == '-';
    p += negative;
    uint64_t mantissa = 0;
    const char* first = p;
    while (p < end_ && IsDigit(*p)) mantissa = mantissa * 10 + static_cast<uint64_t>(*p++ - '0');
    int integer_digits = static_cast<int>(p - first);
    int fraction_digits = 0;
    if (integer_digits == 0) return false;
    if (p < end_ && *p == '.') {
      const char* point = ++p;
      while (p < end_ && IsDigit(*p)) mantissa = mantissa * 10 + static_cast<uint64_t>(*p++ - '0');
      fraction_digits = static_cast<int>(p - point);
      if (fraction_digits == 0) return false;
    }
    if (integer_digits + fraction_digits > kMaxFastFloatDigits ||
        fraction_digits > kMaxFastFraction || mantissa > (uint64_t{1} << 24) || !AtTokenEnd(p)) {
      return false;
    }
    float v = static_cast<float>(mantissa);
    if (fraction_digits > 0) v /= kExactPow10[fraction_digits];
    *out = negative ? -v : v;
    p_ = p;
    return true;
  }

 private:
  bool AtTokenEnd(const char* p) const { return p == end_ || IsSeparator(*p); }

  // 1 to 18 digits ending the token; advances *p past them. (Longer runs may wrap *value, but
  // then the scan fails anyway.)
  bool ScanDigits(const char** p, uint64_t* value) const {
    const char* q = *p;
    const char* first = q;
    uint64_t v = 0;
    while (q < end_ && IsDigit(*q)) v = v * 10 + static_cast<uint64_t>(*q++ - '0');
    size_t digits = static_cast<size_t>(q - first);
    if (digits == 0 || digits > kMaxFastIntDigits || !AtTokenEnd(q)) return false;
    *value = v;
    *p = q;
    return true;
  }

  const char* p_;
  const char* end_;
};

enum class NumberError { kNone, kSyntax, kRange };

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

// A token as the error message shows it: cut to 40 bytes, and any bytes that are not printable
// UTF-8 (NUL, control bytes, Latin-1, binary) escaped as \xNN, so that the message arrives in
// Python whole and decodable.
std::string Quote(std::string_view token) {
  constexpr size_t kMax = 40;
  if (token.size() <= kMax) return absl::StrCat("'", PrintableBytes(token), "'");
  return absl::StrCat("'", PrintableBytes(token.substr(0, kMax)), "...'");
}

// Where a line is, for error messages.
struct LineContext {
  const std::string& file;
  int64_t line_number;
  const std::vector<SlotSpec>& slots;
  SampleBlock* block;

  // Drops the line's values from the block and throws the error for slot #k.
  [[noreturn]] void Fail(size_t k, const std::string& what) const {
    block->Rollback();
    throw InvalidArgument(absl::StrCat(file, ":", line_number, ": slot '", slots[k].name, "' (#",
                                       k + 1, " of ", slots.size(), "): ", what));
  }
};

// The count of slot #k, checked against the slot; the cursor is on its token.
uint64_t ReadCount(Tokenizer* tokens, const LineContext& ctx, size_t k) {
  const SlotSpec& slot = ctx.slots[k];
  uint64_t count = 0;
  if (!tokens->TryCount(&count)) {
    std::string_view token = tokens->Next();
    if (ParseCount(token, &count) != NumberError::kNone) {
      ctx.Fail(k, absl::StrCat("count ", Quote(token), " is not a non-negative integer"));
    }
  }
  if (slot.dense && count != static_cast<uint64_t>(slot.width)) {
    ctx.Fail(k, absl::StrCat("count is ", count, " but the slot is dense with ", slot.width,
                             " values per sample"));
  }
  if (!slot.dense && count == 0) {
    ctx.Fail(k, "count is 0; every slot needs at least one value (pad it in the data generator)");
  }
  return count;
}

// What differs between reading int64 ids and float values: the fast and the general parser,
// and the words of the errors.
struct Int64Values {
  using Type = int64_t;
  static bool TryFast(Tokenizer* tokens, int64_t* v) { return tokens->TryInt64(v); }
  static NumberError Parse(std::string_view token, int64_t* v) { return ParseInt64(token, v); }
  static constexpr const char* kNotValue = " is not an integer";
  static constexpr const char* kOutOfRange = " is outside the int64 range";
};

struct FloatValues {
  using Type = float;
  static bool TryFast(Tokenizer* tokens, float* v) { return tokens->TryFloat(v); }
  static NumberError Parse(std::string_view token, float* v) { return ParseFloat(token, v); }
  static constexpr const char* kNotValue = " is not a number";
  static constexpr const char* kOutOfRange = " is outside the float32 range";
};

template <class Values>
void ReadValues(Tokenizer* tokens, const LineContext& ctx, size_t k, uint64_t count,
                std::vector<typename Values::Type>* out) {
  for (uint64_t j = 0; j < count; ++j) {
    if (!tokens->HasToken()) {
      ctx.Fail(k, absl::StrCat("the line ends after ", j, " of ", count, " values"));
    }
    typename Values::Type v = 0;
    if (!Values::TryFast(tokens, &v)) {
      std::string_view token = tokens->Next();
      NumberError err = Values::Parse(token, &v);
      if (err == NumberError::kSyntax) {
        ctx.Fail(k, absl::StrCat("value ", j + 1, " ", Quote(token), Values::kNotValue));
      }
      if (err == NumberError::kRange) {
        ctx.Fail(k, absl::StrCat("value ", j + 1, " ", Quote(token), Values::kOutOfRange));
      }
    }
    out->push_back(v);
  }
}

}  // namespace

bool MultiSlotParser::Parse(std::string_view line, const std::string& file, int64_t line_number,
                            SampleBlock* block) const {
  Tokenizer tokens(line);
  const std::vector<SlotSpec>& slots = *slots_;
  const LineContext ctx{file, line_number, slots, block};
  for (size_t k = 0; k < slots.size(); ++k) {
    const SlotSpec& slot = slots[k];
    if (!tokens.HasToken()) {
      if (k == 0) return false;  // a blank line
      ctx.Fail(k, "missing: the line ends before this slot's count");
    }
    uint64_t count = ReadCount(&tokens, ctx, k);
    SlotColumn& column = block->column(k);
    if (slot.type == SlotType::kInt64) {
      ReadValues<Int64Values>(&tokens, ctx, k, count, &column.ids);
    } else {
      ReadValues<FloatValues>(&tokens, ctx, k, count, &column.values);
    }
    if (!slot.dense) {
      column.offsets.push_back(slot.type == SlotType::kInt64 ? column.ids.size()
                                                             : column.values.size());
    }
  }
  if (tokens.HasToken()) {
    ctx.Fail(slots.size() - 1,
             absl::StrCat("unexpected text ", Quote(tokens.Next()),
                          " after the last slot (the line has more slots than the dataset uses)"));
  }
  block->CommitSample();
  return true;
}

}  // namespace fleet::data
