#include "data/multislot_parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace fleet::data {
namespace {

// ids: LoD int64; w: dense float32 [-1, 2]; label: dense int64 [-1, 1].
std::vector<SlotSpec> TestSlots() {
  return {MakeSlotSpec("ids", DType::kInt64, 1, {-1, 1}),
          MakeSlotSpec("w", DType::kFloat32, 0, {-1, 2}),
          MakeSlotSpec("label", DType::kInt64, 0, {-1, 1})};
}

class ParserTest : public ::testing::Test {
 protected:
  std::vector<SlotSpec> slots_ = TestSlots();
  MultiSlotParser parser_{&slots_};
  SampleBlock block_{&slots_};

  // Parses a line expected to be malformed; returns the error message.
  std::string ErrorOf(const std::string& line) {
    size_t before = block_.size();
    try {
      parser_.Parse(line, "part-0", 7, &block_);
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(block_.size(), before);
      return e.what();
    }
    ADD_FAILURE() << "no error for line '" << line << "'";
    return "";
  }
};

TEST_F(ParserTest, ParsesLodAndDenseSlots) {
  ASSERT_TRUE(parser_.Parse("3 11 12 13 2 0.5 -1.5e2 1 1", "f", 1, &block_));
  ASSERT_TRUE(parser_.Parse("1\t-4\t2 3 4 1 0\r", "f", 2, &block_));
  EXPECT_EQ(block_.size(), 2u);
  EXPECT_EQ(block_.column(0).ids, (std::vector<int64_t>{11, 12, 13, -4}));
  EXPECT_EQ(block_.column(0).offsets, (std::vector<uint64_t>{0, 3, 4}));
  EXPECT_EQ(block_.column(1).values, (std::vector<float>{0.5f, -150.f, 3.f, 4.f}));
  EXPECT_EQ(block_.column(2).ids, (std::vector<int64_t>{1, 0}));
}

TEST_F(ParserTest, BlankLinesHoldNoSample) {
  EXPECT_FALSE(parser_.Parse("", "f", 1, &block_));
  EXPECT_FALSE(parser_.Parse("  \t \r", "f", 2, &block_));
  EXPECT_EQ(block_.size(), 0u);
}

TEST_F(ParserTest, Int64Limits) {
  ASSERT_TRUE(
      parser_.Parse("2 9223372036854775807 -9223372036854775808 2 0 0 1 1", "f", 1, &block_));
  EXPECT_EQ(block_.column(0).ids[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(block_.column(0).ids[1], std::numeric_limits<int64_t>::min());
  EXPECT_NE(ErrorOf("1 9223372036854775808 2 0 0 1 1").find("outside the int64 range"),
            std::string::npos);
  EXPECT_NE(ErrorOf("1 -9223372036854775809 2 0 0 1 1").find("outside the int64 range"),
            std::string::npos);
  EXPECT_NE(ErrorOf("1 99999999999999999999999 2 0 0 1 1").find("outside the int64 range"),
            std::string::npos);
}

TEST_F(ParserTest, ErrorsNameFileLineAndSlot) {
  std::string e = ErrorOf("1 5 2 0.5 abc 1 1");
  EXPECT_NE(e.find("part-0:7: slot 'w' (#2 of 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("value 2 'abc' is not a number"), std::string::npos) << e;
}

TEST_F(ParserTest, RejectsEveryMalformedShape) {
  struct Case {
    const char* line;
    const char* slot;
    const char* what;
  };
  const Case cases[] = {
      {"x 5 2 0 0 1 1", "'ids'", "count 'x' is not a non-negative integer"},
      {"-1 5 2 0 0 1 1", "'ids'", "is not a non-negative integer"},
      {"0 2 0 0 1 1", "'ids'", "count is 0"},
      {"1 5 3 0 0 0 1 1", "'w'", "count is 3 but the slot is dense with 2 values"},
      {"1 5 2 0 0 2 1 1", "'label'", "count is 2 but the slot is dense with 1 values"},
      {"3 5 6", "'ids'", "the line ends after 2 of 3 values"},
      {"1 5 2 0 0", "'label'", "missing: the line ends before this slot's count"},
      {"1 5", "'w'", "missing"},
      {"1 1.5 2 0 0 1 1", "'ids'", "value 1 '1.5' is not an integer"},
      {"1 12a 2 0 0 1 1", "'ids'", "is not an integer"},
      {"1 - 2 0 0 1 1", "'ids'", "is not an integer"},
      {"1 5 2 0 1e60 1 1", "'w'", "outside the float32 range"},
      {"1 5 2 0 0x10 1 1", "'w'", "is not a number"},
      {"1 5 2 0 0 1 1 7", "'label'", "unexpected text '7' after the last slot"},
  };
  for (const auto& c : cases) {
    std::string e = ErrorOf(c.line);
    EXPECT_NE(e.find(std::string("slot ") + c.slot), std::string::npos) << c.line << " -> " << e;
    EXPECT_NE(e.find(c.what), std::string::npos) << c.line << " -> " << e;
    EXPECT_EQ(e.rfind("part-0:7: ", 0), 0u) << e;
  }
}

TEST_F(ParserTest, FailedLineLeavesBlockUnchanged) {
  ASSERT_TRUE(parser_.Parse("2 1 2 2 0 0 1 1", "f", 1, &block_));
  ErrorOf("3 7 8 9 2 0 0 1 x");  // fails on the last slot after the others were appended
  ASSERT_TRUE(parser_.Parse("1 3 2 1 1 1 0", "f", 3, &block_));
  EXPECT_EQ(block_.column(0).ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(block_.column(0).offsets, (std::vector<uint64_t>{0, 2, 3}));
  EXPECT_EQ(block_.column(1).values.size(), 4u);
  EXPECT_EQ(block_.column(2).ids, (std::vector<int64_t>{1, 0}));
}

TEST_F(ParserTest, FloatSpellings) {
  ASSERT_TRUE(parser_.Parse("1 0 2 +1.25 3e-2 1 0", "f", 1, &block_));
  ASSERT_TRUE(parser_.Parse("1 0 2 nan -inf 1 0", "f", 2, &block_));
  const auto& v = block_.column(1).values;
  EXPECT_FLOAT_EQ(v[0], 1.25f);
  EXPECT_FLOAT_EQ(v[1], 0.03f);
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_TRUE(std::isinf(v[3]) && v[3] < 0);
}

// The parser's one-pass fast paths (short decimals and integers) must give exactly what the
// general path (std::from_chars, strtoll rules) gives, at and beyond the fast paths' limits.
TEST_F(ParserTest, FastPathsMatchStrtofAndStrtoll) {
  std::mt19937_64 rng(7);
  std::vector<std::string> floats = {"0",          "-0",           "16777216",     "16777217",
                                     "-16777217",  "0.1",          "1.0000000001", "123456789",
                                     "1234567890", "0.0000000001", "3.4028235",    "9.99999999",
                                     "1.",         ".5",           "007.50"};
  for (int i = 0; i < 4000; ++i) {
    std::string text = std::to_string(rng() % 10000000000ULL);
    text = text.substr(0, 1 + rng() % 10);
    size_t fraction = rng() % (text.size() + 1);
    if (fraction > 0) text.insert(text.size() - fraction, ".");
    if (text.front() == '.') text.insert(0, "0");
    floats.push_back(rng() % 2 ? "-" + text : text);
  }
  std::vector<std::string> ints = {"0",
                                   "-0",
                                   "999999999999999999",
                                   "-999999999999999999",
                                   "1000000000000000000",
                                   "-1000000000000000000",
                                   "007"};
  for (int i = 0; i < 1000; ++i) {
    std::string text = std::to_string((rng() >> 1) >> (rng() % 63));  // within int64
    ints.push_back(rng() % 2 ? "-" + text : text);
  }
  for (size_t i = 0; i < floats.size(); ++i) {
    const std::string& f = floats[i];
    const std::string& id = ints[i % ints.size()];
    ASSERT_TRUE(parser_.Parse("1 " + id + " 2 " + f + " " + f + " 1 0", "f", 1, &block_)) << f;
    float want = std::strtof(f.c_str(), nullptr);
    float got = block_.column(1).values.back();
    EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << f << ": " << got << " vs " << want;
    EXPECT_EQ(block_.column(0).ids.back(), std::strtoll(id.c_str(), nullptr, 10)) << id;
  }
}

// Each slot kind (LoD or dense, int64 or float32) has its own case in the fast pass; the other
// tests use three of them. All four, with the dense ones wider than one value, read the values
// and offsets the line holds, and a count each kind refuses is an error naming that slot.
TEST(ParserKindsTest, EveryKindOfSlotReadsItsValuesAndChecksItsCount) {
  const std::vector<SlotSpec> slots = {MakeSlotSpec("weights", DType::kFloat32, 1, {-1, 1}),
                                       MakeSlotSpec("codes", DType::kInt64, 0, {-1, 3}),
                                       MakeSlotSpec("ids", DType::kInt64, 1, {-1, 1}),
                                       MakeSlotSpec("w", DType::kFloat32, 0, {-1, 2})};
  MultiSlotParser parser(&slots);
  SampleBlock block(&slots);
  ASSERT_TRUE(parser.Parse("2 0.25 -1.5 3 7 -8 9 1 42 2 0.5 3e2", "f", 1, &block));
  ASSERT_TRUE(parser.Parse("1 2.5\t3 1 2 3 3 4 5 6 2 -0 1", "f", 2, &block));
  EXPECT_EQ(block.size(), 2u);
  EXPECT_EQ(block.column(0).values, (std::vector<float>{0.25f, -1.5f, 2.5f}));
  EXPECT_EQ(block.column(0).offsets, (std::vector<uint64_t>{0, 2, 3}));
  EXPECT_EQ(block.column(1).ids, (std::vector<int64_t>{7, -8, 9, 1, 2, 3}));
  EXPECT_EQ(block.column(2).ids, (std::vector<int64_t>{42, 4, 5, 6}));
  EXPECT_EQ(block.column(2).offsets, (std::vector<uint64_t>{0, 1, 4}));
  EXPECT_EQ(block.column(3).values, (std::vector<float>{0.5f, 300.f, -0.f, 1.f}));
  const struct {
    const char* line;
    const char* message;
  } cases[] = {
      {"0 3 7 8 9 1 42 2 0 0", "f:3: slot 'weights' (#1 of 4): count is 0"},
      {"1 0.5 2 7 8 1 42 2 0 0", "f:3: slot 'codes' (#2 of 4): count is 2 but the slot is dense"},
      {"1 0.5 3 7 8 9 0 2 0 0", "f:3: slot 'ids' (#3 of 4): count is 0"},
      {"1 0.5 3 7 8 9 1 42 3 0 0 0", "f:3: slot 'w' (#4 of 4): count is 3 but the slot is dense"},
  };
  for (const auto& c : cases) {
    try {
      parser.Parse(c.line, "f", 3, &block);
      ADD_FAILURE() << "no error for '" << c.line << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(c.message, 0), 0u) << e.what();
    }
    EXPECT_EQ(block.size(), 2u);
    EXPECT_EQ(block.column(0).values.size(), 3u);
    EXPECT_EQ(block.column(1).ids.size(), 6u);
    EXPECT_EQ(block.column(2).offsets.size(), 3u);
  }
}

TEST(SampleBlockTest, ReserveAvoidsReallocation) {
  std::vector<SlotSpec> slots = TestSlots();
  MultiSlotParser parser(&slots);
  SampleBlock first(&slots);
  first.Reserve(4);
  const int64_t* ids = first.column(0).ids.data();
  const float* values = first.column(1).values.data();
  for (int i = 0; i < 4; ++i) parser.Parse("1 5 2 0.5 1.5 1 1", "f", i + 1, &first);
  EXPECT_EQ(first.column(0).ids.data(), ids);
  EXPECT_EQ(first.column(1).values.data(), values);
  // Shaped like a block whose LoD slot held 3 values per sample.
  SampleBlock like(&slots);
  parser.Parse("3 1 2 3 2 0 0 1 1", "f", 1, &like);
  SampleBlock next(&slots);
  next.Reserve(10, &like);
  EXPECT_GE(next.column(0).ids.capacity(), 30u);
  EXPECT_GE(next.column(0).offsets.capacity(), 11u);
  EXPECT_GE(next.column(1).values.capacity(), 20u);
}

TEST(SlotSpecTest, ValidatesDeclarations) {
  SlotSpec dense = MakeSlotSpec("d", DType::kFloat32, 0, {-1, 13});
  EXPECT_TRUE(dense.dense);
  EXPECT_EQ(dense.width, 13);
  EXPECT_THROW(MakeSlotSpec("x", DType::kInt32, 0, {-1, 1}), InvalidArgument);
  EXPECT_THROW(MakeSlotSpec("x", DType::kInt64, 2, {-1, 1}), InvalidArgument);
  EXPECT_THROW(MakeSlotSpec("x", DType::kInt64, 0, {4, 1}), InvalidArgument);
  EXPECT_THROW(MakeSlotSpec("x", DType::kInt64, 1, {-1, 3}), InvalidArgument);
}

TEST(BatchTest, ToBatchBuildsShapesAndLod) {
  std::vector<SlotSpec> slots = TestSlots();
  MultiSlotParser parser(&slots);
  SampleBlock block(&slots);
  parser.Parse("3 11 12 13 2 0.5 1.5 1 1", "f", 1, &block);
  parser.Parse("1 14 2 2.5 3.5 1 0", "f", 2, &block);
  Batch batch = ToBatch(std::move(block));
  ASSERT_EQ(batch.num_samples, 2);
  EXPECT_EQ(batch.tensors[0].shape(), (Shape{4, 1}));
  EXPECT_EQ(batch.tensors[0].lod(), (LoD{{0, 3, 4}}));
  EXPECT_EQ(batch.tensors[0].data<int64_t>()[3], 14);
  EXPECT_EQ(batch.tensors[1].shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(batch.tensors[1].data<float>()[3], 3.5f);
  EXPECT_EQ(batch.tensors[2].shape(), (Shape{2, 1}));
  EXPECT_TRUE(batch.tensors[2].lod().empty());
}

TEST(BatchTest, SerializeRoundTrip) {
  std::vector<SlotSpec> slots = TestSlots();
  MultiSlotParser parser(&slots);
  SampleBlock block(&slots);
  parser.Parse("3 11 12 13 2 0.5 1.5 1 1", "f", 1, &block);
  parser.Parse("1 14 2 2.5 3.5 1 0", "f", 2, &block);
  SampleBlock copy(&slots);
  copy.AppendSerialized(block.Serialize());
  ASSERT_EQ(copy.size(), 2u);
  EXPECT_EQ(copy.column(0).ids, block.column(0).ids);
  EXPECT_EQ(copy.column(0).offsets, block.column(0).offsets);
  EXPECT_EQ(copy.column(1).values, block.column(1).values);
  std::string bytes = block.Serialize();
  EXPECT_THROW(copy.AppendSerialized(bytes.substr(0, bytes.size() - 3)), InvalidArgument);
}

}  // namespace
}  // namespace fleet::data
