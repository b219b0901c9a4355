// SelectedRows: merging duplicate rows.

#include "core/selected_rows.h"

#include <gtest/gtest.h>

#include <vector>

namespace fleet {
namespace {

SelectedRows Make(std::vector<int64_t> rows, const std::vector<float>& values, int64_t width,
                  int64_t height) {
  SelectedRows s;
  s.set_height(height);
  s.mutable_value()->Resize({static_cast<int64_t>(rows.size()), width});
  float* p = s.mutable_value()->mutable_data<float>();
  std::copy(values.begin(), values.end(), p);
  *s.mutable_rows() = std::move(rows);
  return s;
}

std::vector<float> Values(const SelectedRows& s) {
  const float* p = s.value().data<float>();
  return std::vector<float>(p, p + s.value().numel());
}

TEST(SelectedRowsTest, MergeSumsDuplicatesInFirstSeenOrder) {
  SelectedRows in = Make({4, 1, 4, 2, 1}, {1, 2, 10, 20, 100, 200, 1000, 2000, 5, 6}, 2, 8);
  SelectedRows out = MergeDuplicateRows(in);
  EXPECT_EQ(out.rows(), (std::vector<int64_t>{4, 1, 2}));
  EXPECT_EQ(out.height(), 8);
  EXPECT_EQ(out.value().shape(), (Shape{3, 2}));
  EXPECT_EQ(Values(out), (std::vector<float>{101, 202, 15, 26, 1000, 2000}));
  // The input is left as it was.
  EXPECT_EQ(in.rows().size(), 5u);
  EXPECT_EQ(Values(in)[0], 1.f);
}

TEST(SelectedRowsTest, MergeWithoutDuplicatesCopies) {
  SelectedRows in = Make({3, 0}, {1, 2, 3, 4, 5, 6}, 3, 4);
  SelectedRows out = MergeDuplicateRows(in);
  EXPECT_EQ(out.rows(), in.rows());
  EXPECT_EQ(Values(out), Values(in));
  EXPECT_NE(out.value().data<float>(), in.value().data<float>());
}

TEST(SelectedRowsTest, MergeOfNoRowsKeepsTheWidth) {
  SelectedRows in = Make({}, {}, 5, 10);
  SelectedRows out = MergeDuplicateRows(in);
  EXPECT_TRUE(out.rows().empty());
  EXPECT_EQ(out.value().shape(), (Shape{0, 5}));
  EXPECT_EQ(out.height(), 10);
}

TEST(SelectedRowsTest, MergeOfOneRowRepeatedManyTimes) {
  std::vector<int64_t> rows(1000, 7);
  std::vector<float> values(1000, 0.5f);
  SelectedRows out = MergeDuplicateRows(Make(rows, values, 1, 9));
  EXPECT_EQ(out.rows(), (std::vector<int64_t>{7}));
  EXPECT_FLOAT_EQ(Values(out)[0], 500.f);
}

}  // namespace
}  // namespace fleet
