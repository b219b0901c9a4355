// LoDTensor: sequence offsets and their validation.

#include "core/lod_tensor.h"

#include <gtest/gtest.h>

#include <string>

namespace fleet {
namespace {

LoDTensor Rows(int64_t n, LoD lod) {
  LoDTensor t;
  t.Resize({n, 2});
  t.mutable_data<float>();
  t.set_lod(std::move(lod));
  return t;
}

// The message of the InvalidArgument that ValidateLoD throws, or "" if it does not throw.
std::string ValidationError(const LoDTensor& t) {
  try {
    t.ValidateLoD("feed 'words'");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(LoDTensorTest, ValidOneAndTwoLevelLoDs) {
  EXPECT_EQ(ValidationError(Rows(5, {{0, 2, 5}})), "");
  EXPECT_EQ(ValidationError(Rows(5, {{0, 1, 3}, {0, 2, 3, 5}})), "");
  EXPECT_EQ(ValidationError(Rows(3, {})), "");
  EXPECT_EQ(ValidationError(Rows(0, {{0}})), "");
  // Empty sequences are allowed.
  EXPECT_EQ(ValidationError(Rows(2, {{0, 0, 2, 2}})), "");
}

TEST(LoDTensorTest, NumSequences) {
  EXPECT_EQ(Rows(5, {{0, 2, 5}}).NumSequences(), 2);
  EXPECT_EQ(Rows(5, {{0, 1, 3}, {0, 2, 3, 5}}).NumSequences(), 2);
  EXPECT_EQ(Rows(4, {}).NumSequences(), 4);
  EXPECT_EQ(Rows(5, {{0, 1, 3}, {0, 2, 3, 5}}).lod_level(), 2);
}

TEST(LoDTensorTest, OffsetsMustStartAtZero) {
  std::string error = ValidationError(Rows(5, {{1, 5}}));
  EXPECT_TRUE(Contains(error, "feed 'words': lod level 0 must start at 0")) << error;
  error = ValidationError(Rows(5, {{0, 2}, {1, 3, 5}}));
  EXPECT_TRUE(Contains(error, "lod level 1 must start at 0")) << error;
  error = ValidationError(Rows(5, {{}}));
  EXPECT_TRUE(Contains(error, "lod level 0 must start at 0")) << error;
}

TEST(LoDTensorTest, DecreasingOffsetsNameLevelAndPosition) {
  std::string error = ValidationError(Rows(5, {{0, 3, 2, 5}}));
  EXPECT_TRUE(Contains(error, "lod level 0 decreases at position 2")) << error;
  error = ValidationError(Rows(5, {{0, 1, 3}, {0, 4, 3, 5}}));
  EXPECT_TRUE(Contains(error, "lod level 1 decreases at position 2")) << error;
  EXPECT_TRUE(Contains(error, "[[0, 1, 3], [0, 4, 3, 5]]")) << error;
}

TEST(LoDTensorTest, LastOffsetMustMatchRowsOrNextLevel) {
  std::string error = ValidationError(Rows(5, {{0, 2, 4}}));
  EXPECT_TRUE(Contains(error, "lod level 0 ends at 4 but the next level has 5 entries")) << error;
  EXPECT_TRUE(Contains(error, "shape [5, 2]")) << error;
  // Level 0 indexes the 3 sequences of level 1, not the rows.
  error = ValidationError(Rows(5, {{0, 1, 4}, {0, 2, 3, 5}}));
  EXPECT_TRUE(Contains(error, "lod level 0 ends at 4 but the next level has 3 entries")) << error;
  error = ValidationError(Rows(5, {{0, 1, 3}, {0, 2, 3, 6}}));
  EXPECT_TRUE(Contains(error, "lod level 1 ends at 6")) << error;
}

TEST(LoDTensorTest, LoDToString) {
  EXPECT_EQ(LoDToString({{0, 2, 5}, {0, 1}}), "[[0, 2, 5], [0, 1]]");
  EXPECT_EQ(LoDToString({}), "[]");
}

}  // namespace
}  // namespace fleet
