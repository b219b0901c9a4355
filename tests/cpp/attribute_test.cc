// AttributeMap: typed access with the conversions Python's narrowest-type encoding needs, and
// errors that name the op and the attribute.

#include "framework/attribute.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fleet::framework {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(AttributeTest, ExactTypes) {
  AttributeMap attrs;
  attrs.Set("axis", int32_t{1});
  attrs.Set("name", std::string("fc"));
  attrs.Set("shape", std::vector<int64_t>{-1, 8});
  attrs.Set("flags", std::vector<bool>{true, false});
  EXPECT_EQ(attrs.Get<int32_t>("axis", "concat"), 1);
  EXPECT_EQ(attrs.Get<std::string>("name", "concat"), "fc");
  EXPECT_EQ(attrs.Get<std::vector<int64_t>>("shape", "reshape"), (std::vector<int64_t>{-1, 8}));
  EXPECT_EQ(attrs.Get<std::vector<bool>>("flags", "op"), (std::vector<bool>{true, false}));
  EXPECT_TRUE(attrs.Has("axis"));
  EXPECT_FALSE(attrs.Has("missing"));
}

TEST(AttributeTest, ScalarsConvertBetweenInt32Int64FloatAndBool) {
  AttributeMap attrs;
  attrs.Set("small", int32_t{-7});
  attrs.Set("big", int64_t{1} << 40);
  attrs.Set("ratio", 0.5f);
  attrs.Set("flag", true);
  EXPECT_EQ(attrs.Get<int64_t>("small", "op"), -7);
  EXPECT_EQ(attrs.Get<int64_t>("big", "op"), int64_t{1} << 40);
  EXPECT_EQ(attrs.Get<int32_t>("flag", "op"), 1);
  EXPECT_FLOAT_EQ(attrs.Get<float>("small", "op"), -7.f);
  EXPECT_EQ(attrs.Get<int32_t>("ratio", "op"), 0);
  EXPECT_TRUE(attrs.Get<bool>("small", "op"));
  attrs.Set("seed", int64_t{12345});
  EXPECT_EQ(attrs.Get<int32_t>("seed", "op"), 12345);
}

TEST(AttributeTest, IntegerListsConvert) {
  AttributeMap attrs;
  attrs.Set("ints", std::vector<int32_t>{1, -2, 3});
  attrs.Set("longs", std::vector<int64_t>{4, 5});
  EXPECT_EQ(attrs.Get<std::vector<int64_t>>("ints", "op"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(attrs.Get<std::vector<int32_t>>("longs", "op"), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(attrs.Get<std::vector<float>>("ints", "op"), (std::vector<float>{1.f, -2.f, 3.f}));
  // An empty list from Python is encoded as ints; it reads as any integer list.
  attrs.Set("empty", std::vector<int32_t>{});
  EXPECT_TRUE(attrs.Get<std::vector<int64_t>>("empty", "op").empty());
}

TEST(AttributeTest, GetOrFallsBackOnlyWhenMissing) {
  AttributeMap attrs;
  attrs.Set("scale", 2.f);
  EXPECT_FLOAT_EQ(attrs.GetOr<float>("scale", 1.f, "scale"), 2.f);
  EXPECT_FLOAT_EQ(attrs.GetOr<float>("bias", 0.25f, "scale"), 0.25f);
  attrs.Set("bias", std::string("oops"));
  EXPECT_THROW(attrs.GetOr<float>("bias", 0.25f, "scale"), InvalidArgument);
}

TEST(AttributeTest, MissingAttributeNamesOpAndAttribute) {
  AttributeMap attrs;
  try {
    attrs.Get<float>("mu", "momentum");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_STREQ(e.what(), "momentum: missing attribute 'mu'");
  }
}

TEST(AttributeTest, UnconvertibleTypeNamesOpAttributeTypeAndValue) {
  AttributeMap attrs;
  attrs.Set("dims", std::vector<int32_t>{2, 3});
  attrs.Set("act", std::string("relu"));
  attrs.Set("names", std::vector<std::string>{"a"});
  try {
    attrs.Get<int32_t>("dims", "reshape");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_TRUE(Contains(what, "reshape: attribute 'dims' is a ints ([2, 3])")) << what;
  }
  try {
    attrs.Get<float>("act", "fc");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(Contains(e.what(), "fc: attribute 'act' is a string (\"relu\")")) << e.what();
  }
  EXPECT_THROW(attrs.Get<std::string>("dims", "op"), InvalidArgument);
  EXPECT_THROW(attrs.Get<std::vector<int64_t>>("names", "op"), InvalidArgument);
  EXPECT_THROW(attrs.Get<std::vector<std::string>>("dims", "op"), InvalidArgument);
}

TEST(AttributeTest, ToString) {
  EXPECT_EQ(AttributeToString(Attribute{int32_t{3}}), "3");
  EXPECT_EQ(AttributeToString(Attribute{std::string("x")}), "\"x\"");
  EXPECT_EQ(AttributeToString(Attribute{true}), "true");
  EXPECT_EQ(AttributeToString(Attribute{std::vector<bool>{true, false}}), "[true, false]");
  EXPECT_EQ(AttributeToString(Attribute{std::vector<int64_t>{1, 2}}), "[1, 2]");
}

}  // namespace
}  // namespace fleet::framework
