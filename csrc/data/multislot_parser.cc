#include "data/multislot_parser.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace fleet::data {
namespace {

inline bool IsSeparator(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Splits a line into tokens without copying.
class Tokenizer {
 public:
  explicit Tokenizer(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}

  // The next token, or an empty view at the end of the line.
  std::string_view Next() {
    while (p_ < end_ && IsSeparator(*p_)) ++p_;
    const char* start = p_;
    while (p_ < end_ && !IsSeparator(*p_)) ++p_;
    return std::string_view(start, static_cast<size_t>(p_ - start));
  }

 private:
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

std::string Quote(std::string_view token) {
  constexpr size_t kMax = 40;
  // absl::string_view is not std::string_view in this abseil build: go through std::string.
  if (token.size() <= kMax) return absl::StrCat("'", std::string(token), "'");
  return absl::StrCat("'", std::string(token.substr(0, kMax)), "...'");
}

}  // namespace

bool MultiSlotParser::Parse(std::string_view line, const std::string& file, int64_t line_number,
                            SampleBlock* block) const {
  Tokenizer tokens(line);
  const std::vector<SlotSpec>& slots = *slots_;
  size_t k = 0;
  auto fail = [&](const std::string& what) {
    block->Rollback();
    throw InvalidArgument(absl::StrCat(file, ":", line_number, ": slot '", slots[k].name,
                                       "' (#", k + 1, " of ", slots.size(), "): ", what));
  };
  for (; k < slots.size(); ++k) {
    const SlotSpec& slot = slots[k];
    std::string_view token = tokens.Next();
    if (token.empty()) {
      if (k == 0) return false;  // a blank line
      fail("missing: the line ends before this slot's count");
    }
    uint64_t count = 0;
    NumberError err = ParseCount(token, &count);
    if (err != NumberError::kNone) fail(absl::StrCat("count ", Quote(token),
                                                     " is not a non-negative integer"));
    if (slot.dense && count != static_cast<uint64_t>(slot.width)) {
      fail(absl::StrCat("count is ", count, " but the slot is dense with ", slot.width,
                        " values per sample"));
    }
    if (!slot.dense && count == 0) {
      fail("count is 0; every slot needs at least one value (pad it in the data generator)");
    }
    SlotColumn& column = block->column(k);
    for (uint64_t j = 0; j < count; ++j) {
      token = tokens.Next();
      if (token.empty()) fail(absl::StrCat("the line ends after ", j, " of ", count, " values"));
      if (slot.type == SlotType::kInt64) {
        int64_t v = 0;
        err = ParseInt64(token, &v);
        if (err == NumberError::kSyntax) {
          fail(absl::StrCat("value ", j + 1, " ", Quote(token), " is not an integer"));
        }
        if (err == NumberError::kRange) {
          fail(absl::StrCat("value ", j + 1, " ", Quote(token), " is outside the int64 range"));
        }
        column.ids.push_back(v);
      } else {
        float v = 0;
        err = ParseFloat(token, &v);
        if (err == NumberError::kSyntax) {
          fail(absl::StrCat("value ", j + 1, " ", Quote(token), " is not a number"));
        }
        if (err == NumberError::kRange) {
          fail(absl::StrCat("value ", j + 1, " ", Quote(token), " is outside the float32 range"));
        }
        column.values.push_back(v);
      }
    }
    if (!slot.dense) {
      column.offsets.push_back(slot.type == SlotType::kInt64 ? column.ids.size()
                                                             : column.values.size());
    }
  }
  std::string_view extra = tokens.Next();
  if (!extra.empty()) {
    k = slots.size() - 1;
    fail(absl::StrCat("unexpected text ", Quote(extra),
                      " after the last slot (the line has more slots than the dataset uses)"));
  }
  block->CommitSample();
  return true;
}

}  // namespace fleet::data
