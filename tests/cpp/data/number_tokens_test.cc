// The MultiSlot number readers (data/number_tokens.h, data/digit_words.h) against the C
// library: every value a fast reader or a general parser accepts must be bit for bit what
// strtof / strtoll give for the same token, and a fast reader must leave the cursor just past
// the token's separator (at the line's end after its last token). Tokens are copied to the end of
// heap buffers, so a read past the line's end is a heap over-read (valgrind --tool=memcheck on
// this binary sees it). The readers may read the 8 bytes before a line's end (LoadWord): those
// are digits here, so that a value that took one of them would be wrong.

#include "data/number_tokens.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/multislot_parser.h"

namespace fleet::data {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

// `text` at the end of a heap buffer (no terminator, no slack after it), after 8 digits that
// are not part of the line.
struct ExactBuffer {
  static constexpr size_t kBefore = 8;
  explicit ExactBuffer(const std::string& text)
      : data(new char[kBefore + text.size()]), size(text.size()) {
    std::memset(data.get(), '9', kBefore);
    std::memcpy(data.get() + kBefore, text.data(), text.size());
  }
  const char* begin() const { return data.get() + kBefore; }
  const char* end() const { return begin() + size; }
  std::unique_ptr<char[]> data;
  size_t size;
};

// Checks the fast float reader on `token` alone on a line and followed by a separator. When it
// accepts, the value must be strtof's, bit for bit, and the cursor past token and separator.
void CheckFloatFast(const std::string& token) {
  const float want = std::strtof(token.c_str(), nullptr);
  for (const std::string& line : {token, token + " 1", token + "\t1", token + "\r"}) {
    ExactBuffer buffer(line);
    const char* p = buffer.begin();
    float got = 0;
    if (!ReadFloatFast(&p, buffer.end(), &got)) continue;
    EXPECT_EQ(Bits(got), Bits(want)) << "'" << token << "': " << got << " vs strtof " << want;
    EXPECT_EQ(p, std::min(buffer.begin() + token.size() + 1, buffer.end())) << "'" << line << "'";
  }
  float general = 0;
  if (ParseFloat(token, &general) == NumberError::kNone) {
    EXPECT_EQ(Bits(general), Bits(want)) << "'" << token << "': " << general << " vs " << want;
  }
}

TEST(NumberTokensTest, FloatsMatchStrtofBitForBit) {
  std::vector<std::string> tokens = {"0",
                                     "-0",
                                     "0.0",
                                     "-0.0",
                                     "1",
                                     "-1",
                                     "0.5",
                                     "0.693147",
                                     "2.63906",
                                     "7.68937",
                                     "16777216",  // 2^24: the largest mantissa the fast path takes
                                     "16777217",  // 2^24 + 1: rounds to even, the general path's
                                     "1677721.7",
                                     "0.16777217",
                                     "9.99999999",
                                     "99999999",
                                     "999999999",
                                     "0.00000001",
                                     "1.5e3",
                                     "1e-5",
                                     "-2.5E+10",
                                     "3.4028235e38",
                                     "3.4028236e38",  // exponents, float max
                                     "1e-45",
                                     "1.4e-45",
                                     "1.17549435e-38",
                                     "1.17549421e-38",
                                     "5e-40",  // denormals
                                     "0.1234567890123456789",
                                     "3.14159265358979323846264338327950288",  // long mantissas
                                     "100000000000000000000000000000000",
                                     "0.000000000000000000000000000000001",
                                     "00000001.5",
                                     "007.50",
                                     "+1.25",
                                     "-.5",
                                     ".5",
                                     "1.",
                                     "nan",
                                     "-inf",
                                     "inf"};
  std::mt19937_64 rng(28);
  char text[64];
  for (int i = 0; i < 20000; ++i) {
    // Random floats as generators print them (%.6g, %.9g, %g of tiny and huge), and random
    // decimal strings around the fast path's limits (9 digits, 2^24).
    const double magnitude = std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0,
                                        static_cast<int>(rng() % 200) - 100);
    const char* format = (i % 3 == 0) ? "%.6g" : (i % 3 == 1) ? "%.9g" : "%g";
    std::snprintf(text, sizeof(text), format, (rng() & 1) ? -magnitude : magnitude);
    tokens.emplace_back(text);
    std::string digits = std::to_string(rng() % 10000000000ULL).substr(0, 1 + rng() % 10);
    const size_t point = rng() % (digits.size() + 1);
    if (point > 0 && point < digits.size()) digits.insert(point, ".");
    tokens.push_back((rng() & 1) ? "-" + digits : digits);
  }
  // Every length of whole and fraction part around the inline reader's limits (7 digits before
  // the point, 7 after, 9 in all, 2^24) and the word boundary after them.
  for (int whole = 1; whole <= 10; ++whole) {
    for (int fraction = 0; fraction <= 10; ++fraction) {
      for (int k = 0; k < 20; ++k) {
        std::string token;
        for (int d = 0; d < whole; ++d) token += static_cast<char>('0' + rng() % 10);
        if (fraction > 0) token += '.';
        for (int d = 0; d < fraction; ++d) token += static_cast<char>('0' + rng() % 10);
        tokens.push_back(k % 4 == 3 ? "-" + token : token);
      }
    }
  }
  for (const std::string& token : tokens) CheckFloatFast(token);
}

TEST(NumberTokensTest, IntegersMatchStrtollAndCountsStrtoull) {
  std::vector<std::string> tokens = {"0",
                                     "-0",
                                     "7",
                                     "007",
                                     "1234567",
                                     "9999999",
                                     "12345678",
                                     "999999999999999999",
                                     "9223372036854775807",
                                     "-9223372036854775808",
                                     "18446744073709551615"};
  std::mt19937_64 rng(29);
  for (int i = 0; i < 20000; ++i) {
    std::string digits = std::to_string(rng() >> (rng() % 64));
    tokens.push_back((rng() & 1) ? "-" + digits : digits);
  }
  // Every length from 1 to 20 digits, leading zeros included (the inline reader takes up to 7
  // digits and a space, the others up to 18).
  for (int length = 1; length <= 20; ++length) {
    for (int k = 0; k < 50; ++k) {
      std::string digits;
      for (int d = 0; d < length; ++d) digits += static_cast<char>('0' + rng() % 10);
      tokens.push_back(k % 2 ? "-" + digits : digits);
    }
  }
  for (const std::string& token : tokens) {
    errno = 0;
    const long long want = std::strtoll(token.c_str(), nullptr, 10);
    const bool in_range = errno == 0;
    int64_t general = 0;
    const NumberError err = ParseInt64(token, &general);
    EXPECT_EQ(err == NumberError::kNone, in_range) << token;
    if (in_range) {
      EXPECT_EQ(general, want) << token;
    } else {
      EXPECT_EQ(err, NumberError::kRange) << token;
    }
    for (const std::string& line : {token, token + " 1", token + "\t1", token + "\r"}) {
      ExactBuffer buffer(line);
      const char* p = buffer.begin();
      int64_t fast = 0;
      if (ReadInt64Fast(&p, buffer.end(), &fast)) {
        EXPECT_EQ(fast, want) << token;
        EXPECT_EQ(p, std::min(buffer.begin() + token.size() + 1, buffer.end())) << token;
      }
      uint64_t count = 0;
      p = buffer.begin();
      if (ReadCountFast(&p, buffer.end(), &count)) {
        EXPECT_NE(token[0], '-') << token;
        EXPECT_EQ(count, std::strtoull(token.c_str(), nullptr, 10)) << token;
        EXPECT_EQ(p, std::min(buffer.begin() + token.size() + 1, buffer.end())) << token;
      }
    }
  }
}

// A fast reader refuses what is not its spelling and leaves the cursor where it was, so that
// the general parser sees the whole token (and words its error).
TEST(NumberTokensTest, FastReadersRefuseOtherSpellings) {
  const std::vector<std::string> tokens = {" 1",
                                           "\t1",
                                           "1a",
                                           "1x 2",
                                           "-",
                                           "--1",
                                           "+1",
                                           "1e5",
                                           "1.2.3",
                                           "1..2",
                                           "0x10",
                                           "1,5",
                                           "\xd9\xa1",
                                           "1234567890123456789",
                                           "1.",
                                           ".5",
                                           "-.5",
                                           "1.5e",
                                           "123456789012345678901",
                                           "12345678a",
                                           "123456789012x",
                                           "12345678901234567x",
                                           std::string("1\0 2", 4),
                                           std::string("1.5\0", 4),
                                           "\xff"};
  for (const std::string& token : tokens) {
    ExactBuffer buffer(token);
    const char* p = buffer.begin();
    uint64_t count = 0;
    int64_t id = 0;
    float value = 0;
    EXPECT_FALSE(ReadCountFast(&p, buffer.end(), &count)) << token;
    EXPECT_EQ(p, buffer.begin()) << token;
    EXPECT_FALSE(ReadInt64Fast(&p, buffer.end(), &id)) << token;
    EXPECT_EQ(p, buffer.begin()) << token;
    EXPECT_FALSE(ReadFloatFast(&p, buffer.end(), &value)) << token;
    EXPECT_EQ(p, buffer.begin()) << token;
  }
}

// Whole lines: random separators (runs of spaces and tabs, a CRLF's '\r'), tokens of every
// spelling, the last token at the very end of an exact buffer. The parser's values must be what
// strtof / strtoll give for each token.
TEST(NumberTokensTest, ParsedLinesMatchTheCLibrary) {
  const std::vector<SlotSpec> slots = {MakeSlotSpec("ids", DType::kInt64, 1, {-1, 1}),
                                       MakeSlotSpec("w", DType::kFloat32, 0, {-1, 3}),
                                       MakeSlotSpec("label", DType::kInt64, 0, {-1, 1})};
  MultiSlotParser parser(&slots);
  SampleBlock block(&slots);
  std::mt19937_64 rng(30);
  const std::vector<std::string> separators = {" ", " ", " ", "  ", "\t", " \t "};
  const std::vector<std::string> floats = {"0",         "-0",  "0.693147",     "1e-5",
                                           "16777217",  "+2",  "3.4028235e38", "1e-45",
                                           "12345.678", "-7.5"};
  std::vector<int64_t> want_ids;
  std::vector<float> want_values;
  std::vector<int64_t> want_labels;
  for (int line_number = 1; line_number <= 3000; ++line_number) {
    auto sep = [&] { return separators[rng() % separators.size()]; };
    std::string line = (rng() % 4 == 0) ? sep() : "";
    const int n = 1 + static_cast<int>(rng() % 3);
    line += std::to_string(n);
    for (int j = 0; j < n; ++j) {
      std::string id = std::to_string((rng() >> 1) >> (rng() % 63));  // within int64
      if (rng() & 1) id = "-" + id;
      want_ids.push_back(std::strtoll(id.c_str(), nullptr, 10));
      line += sep() + id;
    }
    line += sep() + "3";
    for (int j = 0; j < 3; ++j) {
      const std::string& f = floats[rng() % floats.size()];
      want_values.push_back(std::strtof(f.c_str(), nullptr));
      line += sep() + f;
    }
    const int64_t label = static_cast<int64_t>(rng() % 2);
    want_labels.push_back(label);
    line += sep() + "1" + sep() + std::to_string(label);
    if (rng() % 4 == 0) line += (rng() & 1) ? "\r" : sep();
    ExactBuffer buffer(line);
    ASSERT_TRUE(
        parser.Parse(std::string_view(buffer.begin(), buffer.size), "lines", line_number, &block))
        << line;
  }
  ASSERT_EQ(block.column(0).ids, want_ids);
  ASSERT_EQ(block.column(2).ids, want_labels);
  ASSERT_EQ(block.column(1).values.size(), want_values.size());
  for (size_t i = 0; i < want_values.size(); ++i) {
    ASSERT_EQ(Bits(block.column(1).values[i]), Bits(want_values[i])) << i;
  }
}

// Lines of every length from 3 bytes, in heap buffers of exactly their size (nothing before or
// after them to read: a line under 8 bytes is read from a copy), one token of each spelling
// last or before a separator: the values must be what strtoll / strtof give.
TEST(NumberTokensTest, ShortLinesAndLastTokensMatchTheCLibrary) {
  const std::vector<SlotSpec> id_slots = {MakeSlotSpec("ids", DType::kInt64, 1, {-1, 1})};
  const std::vector<SlotSpec> value_slots = {MakeSlotSpec("w", DType::kFloat32, 0, {-1, 1})};
  MultiSlotParser id_parser(&id_slots);
  MultiSlotParser value_parser(&value_slots);
  SampleBlock ids(&id_slots);
  SampleBlock values(&value_slots);
  std::vector<std::string> id_tokens = {"9223372036854775807", "-9223372036854775808", "-0", "007"};
  std::vector<std::string> value_tokens = {"0",   "-0",   "1e-5",        "3.4028235e38", "+2",
                                           "1.",  ".5",   "0.693147",    "1234567.5",    "7.",
                                           "1e1", "1E+2", "0.123456789", "16777217",     "-.25"};
  std::mt19937_64 rng(31);
  for (int length = 1; length <= 19; ++length) {
    for (int k = 0; k < 5; ++k) {
      std::string digits;
      for (int d = 0; d < length; ++d) digits += static_cast<char>('0' + rng() % (d == 0 ? 9 : 10));
      id_tokens.push_back(k % 2 ? "-" + digits : digits);
      if (length <= 12) {
        const size_t point = rng() % (digits.size() + 1);
        value_tokens.push_back(point == 0 ? digits
                                          : digits.substr(0, point) + "." + digits.substr(point));
      }
    }
  }
  const std::string endings[] = {"", " ", "\t", "\r", "  "};
  int64_t line_number = 0;
  auto parse = [&line_number](const MultiSlotParser& parser, const std::string& line,
                              SampleBlock* block) {
    std::unique_ptr<char[]> exact(new char[line.size()]);
    std::memcpy(exact.get(), line.data(), line.size());
    return parser.Parse(std::string_view(exact.get(), line.size()), "short", ++line_number, block);
  };
  for (const std::string& token : id_tokens) {
    for (const std::string& ending : endings) {
      ASSERT_TRUE(parse(id_parser, "1 " + token + ending, &ids)) << token;
      EXPECT_EQ(ids.column(0).ids.back(), std::strtoll(token.c_str(), nullptr, 10)) << token;
      // The same token before others, and a count of more than one digit.
      ASSERT_TRUE(
          parse(id_parser, "12 " + token + " 1 2 3 4 5 6 7 8 9 10 " + token + ending, &ids));
      EXPECT_EQ(ids.column(0).ids[ids.column(0).ids.size() - 12],
                std::strtoll(token.c_str(), nullptr, 10))
          << token;
    }
  }
  for (const std::string& token : value_tokens) {
    const float want = std::strtof(token.c_str(), nullptr);
    for (const std::string& ending : endings) {
      ASSERT_TRUE(parse(value_parser, "1 " + token + ending, &values)) << token;
      EXPECT_EQ(Bits(values.column(0).values.back()), Bits(want)) << token;
      ASSERT_TRUE(parse(value_parser, "1\t" + token + ending, &values)) << token;
      EXPECT_EQ(Bits(values.column(0).values.back()), Bits(want)) << token;
    }
  }
  EXPECT_FALSE(parse(id_parser, " \t ", &ids));
}

// A bad token anywhere in a line that is otherwise read fast names the file, the line, the
// slot and the token, leaves the block as it was, and the next line is read as usual.
TEST(NumberTokensTest, BadTokensNameTheirFileAndLine) {
  const std::vector<SlotSpec> slots = {MakeSlotSpec("ids", DType::kInt64, 1, {-1, 1}),
                                       MakeSlotSpec("w", DType::kFloat32, 0, {-1, 2})};
  MultiSlotParser parser(&slots);
  SampleBlock block(&slots);
  ASSERT_TRUE(parser.Parse("2 11 12 2 0.5 1", "part-3", 1, &block));
  const struct {
    std::string line;
    std::string message;
  } cases[] = {
      {"2 11 1x 2 0.5 1", "part-3:2: slot 'ids' (#1 of 2): value 2 '1x' is not an integer"},
      {"1 9223372036854775808 2 0.5 1",
       "part-3:2: slot 'ids' (#1 of 2): value 1 '9223372036854775808' is outside the int64 range"},
      {"1 5 2 0.5 1e39",
       "part-3:2: slot 'w' (#2 of 2): value 2 '1e39' is outside the float32 range"},
      {"1 5 2 0.5 0.5.", "part-3:2: slot 'w' (#2 of 2): value 2 '0.5.' is not a number"},
      {"1 5 2 0.5", "part-3:2: slot 'w' (#2 of 2): the line ends after 1 of 2 values"},
      {"1 5 2 0.5 1 7", "part-3:2: slot 'w' (#2 of 2): unexpected text '7' after the last slot"},
  };
  for (const auto& c : cases) {
    try {
      parser.Parse(c.line, "part-3", 2, &block);
      ADD_FAILURE() << "no error for '" << c.line << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).substr(0, c.message.size()), c.message);
    }
    EXPECT_EQ(block.size(), 1u);
    EXPECT_EQ(block.column(0).ids.size(), 2u);
    EXPECT_EQ(block.column(0).offsets.size(), 2u);
    EXPECT_EQ(block.column(1).values.size(), 2u);
  }
  ASSERT_TRUE(parser.Parse("1 13 2 -0 2.5", "part-3", 3, &block));
  EXPECT_EQ(block.column(0).ids, (std::vector<int64_t>{11, 12, 13}));
  EXPECT_EQ(Bits(block.column(1).values[2]), Bits(-0.0f));
}

}  // namespace
}  // namespace fleet::data
