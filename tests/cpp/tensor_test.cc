// Tensor: allocation reuse and growth, dtype checks, slices that share memory, deep copies.

#include "core/tensor.h"

#include <gtest/gtest.h>

#include <numeric>

namespace fleet {
namespace {

void Iota(Tensor* t, float start = 0.f) {
  float* p = t->mutable_data<float>();
  std::iota(p, p + t->numel(), start);
}

TEST(TensorTest, MutableDataReusesMemoryWhenTheShapeFits) {
  Tensor t;
  t.Resize({2, 3});
  float* first = t.mutable_data<float>();
  t.Resize({3, 2});
  EXPECT_EQ(t.mutable_data<float>(), first);
  t.Resize({1, 2});
  EXPECT_EQ(t.mutable_data<float>(), first);
  EXPECT_EQ(t.numel(), 2);
  EXPECT_EQ(t.nbytes(), 2 * sizeof(float));
}

TEST(TensorTest, MutableDataGrowsWithoutTouchingSharers) {
  Tensor a;
  a.Resize({4});
  Iota(&a);
  Tensor b = a;  // a view of the same buffer
  EXPECT_EQ(b.data<float>(), a.data<float>());
  a.Resize({1000});
  float* grown = a.mutable_data<float>();
  grown[999] = 7.f;
  EXPECT_NE(grown, b.data<float>());
  ASSERT_EQ(b.numel(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.data<float>()[i], static_cast<float>(i));
}

TEST(TensorTest, ReadingAsAnotherDtypeThrows) {
  Tensor t(DType::kFloat32, {2});
  t.mutable_data<float>();
  try {
    t.data<int64_t>();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("holds float32 but is read as int64"), std::string::npos)
        << e.what();
  }
  // Re-allocating with another dtype switches the dtype.
  t.mutable_data<int64_t>();
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_THROW(t.data<float>(), InvalidArgument);
}

TEST(TensorTest, ReadingBeforeAllocationThrows) {
  Tensor t(DType::kFloat32, {3});
  EXPECT_FALSE(t.initialized());
  EXPECT_THROW(t.data<float>(), InvalidArgument);
  EXPECT_THROW(t.raw_data(), InvalidArgument);
}

TEST(TensorTest, NegativeDimensionThrows) {
  EXPECT_THROW(NumElements({2, -1}), InvalidArgument);
  Tensor t;
  t.Resize({-1, 3});
  EXPECT_THROW(t.mutable_data<float>(), InvalidArgument);
}

TEST(TensorTest, DimCountsFromTheEndAndChecksRange) {
  Tensor t(DType::kFloat32, {2, 3, 4});
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_THROW(t.dim(3), InvalidArgument);
  EXPECT_THROW(t.dim(-4), InvalidArgument);
}

TEST(TensorTest, SliceSharesMemory) {
  Tensor t;
  t.Resize({4, 3});
  Iota(&t);
  Tensor s = t.Slice(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.data<float>(), t.data<float>() + 3);
  EXPECT_EQ(s.data<float>()[0], 3.f);
  s.data<float>()[5] = -1.f;  // last element of row 2 of t
  EXPECT_EQ(t.data<float>()[8], -1.f);
  Tensor empty = t.Slice(2, 2);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_THROW(t.Slice(3, 5), InvalidArgument);
  EXPECT_THROW(t.Slice(2, 1), InvalidArgument);
}

TEST(TensorTest, SliceOfASliceKeepsTheOffset) {
  Tensor t;
  t.Resize({6, 2});
  Iota(&t);
  Tensor inner = t.Slice(2, 6).Slice(1, 3);  // rows 3 and 4 of t
  EXPECT_EQ(inner.data<float>()[0], 6.f);
  EXPECT_EQ(inner.data<float>()[3], 9.f);
}

TEST(TensorTest, CopyFromIsDeep) {
  Tensor a;
  a.Resize({2, 2});
  Iota(&a);
  Tensor b;
  b.CopyFrom(a);
  EXPECT_EQ(b.shape(), a.shape());
  EXPECT_EQ(b.dtype(), DType::kFloat32);
  EXPECT_NE(b.data<float>(), a.data<float>());
  a.data<float>()[0] = 100.f;
  EXPECT_EQ(b.data<float>()[0], 0.f);
  EXPECT_EQ(b.data<float>()[3], 3.f);
}

TEST(TensorTest, CopyFromATensorSharingOurBuffer) {
  Tensor a;
  a.Resize({3, 2});
  Iota(&a);
  Tensor b;
  b.ShareDataWith(a);
  b.CopyFrom(a);  // must not free or alias the memory it reads from
  EXPECT_NE(b.data<float>(), a.data<float>());
  a.data<float>()[1] = 50.f;
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b.data<float>()[i], static_cast<float>(i));
}

TEST(TensorTest, CopyFromASliceOfItself) {
  Tensor a;
  a.Resize({4, 2});
  Iota(&a);
  Tensor keep = a;  // another owner of the original buffer
  a.CopyFrom(a.Slice(1, 3));
  EXPECT_EQ(a.shape(), (Shape{2, 2}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a.data<float>()[i], static_cast<float>(i + 2));
  a.data<float>()[0] = -5.f;
  EXPECT_EQ(keep.data<float>()[2], 2.f);
  a.CopyFrom(a);  // self-copy is a no-op
  EXPECT_EQ(a.data<float>()[0], -5.f);
}

TEST(TensorTest, SetZeroAllocatesAndClears) {
  Tensor t(DType::kInt32, {5});
  t.SetZero();
  ASSERT_TRUE(t.initialized());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.data<int32_t>()[i], 0);
}

TEST(TensorTest, ForeignBufferIsReleasedWithTheLastTensor) {
  float storage[4] = {1, 2, 3, 4};
  int releases = 0;
  {
    Tensor t;
    t.ResetBuffer(std::make_shared<Buffer>(storage, sizeof(storage), [&] { ++releases; }),
                  DType::kFloat32, {4});
    Tensor view = t.Slice(1, 2);
    EXPECT_EQ(view.data<float>()[0], 2.f);
    t = Tensor();
    EXPECT_EQ(releases, 0);
  }
  EXPECT_EQ(releases, 1);
}

}  // namespace
}  // namespace fleet
