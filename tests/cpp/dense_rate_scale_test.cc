// Per-parameter learning rates of a dense table (TableConfig.rate_scales): the elements of a
// range with scale k end where a table at k times the rate ends, for SGD, Adagrad and Adam, with
// and without a range crossing blocks; the rest end where a table without ranges ends. Deltas
// (GEO) are added as they are. Bad ranges are refused, naming the table and the range.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ps/sharding.h"
#include "ps/table/dense_table.h"

namespace fleet::ps {
namespace {

constexpr uint64_t kDim = 200;
constexpr uint32_t kBlock = 64;

proto::TableConfig Config(const std::string& rule, float lr) {
  proto::TableConfig c;
  c.set_table_id(3);
  c.set_name("dense");
  c.set_type(proto::DENSE);
  c.set_dim(kDim);
  c.set_dense_block_size(kBlock);
  c.mutable_optimizer()->set_learning_rate(lr);
  if (rule == "sgd") c.mutable_optimizer()->mutable_sgd();
  if (rule == "adagrad") c.mutable_optimizer()->mutable_adagrad();
  if (rule == "adam") c.mutable_optimizer()->mutable_adam();
  c.mutable_initializer()->set_seed(11);
  c.mutable_initializer()->mutable_uniform()->set_low(-0.5f);
  c.mutable_initializer()->mutable_uniform()->set_high(0.5f);
  return c;
}

void AddRange(proto::TableConfig* c, uint64_t offset, uint64_t size, float scale) {
  auto* r = c->add_rate_scales();
  r->set_offset(offset);
  r->set_size(size);
  r->set_scale(scale);
}

std::unique_ptr<DenseTable> Make(const proto::TableConfig& c) {
  auto table = DenseTable::Create(c, 0, 1, RoundRobinBlockShard);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? std::move(*table) : nullptr;
}

// Pushes the same `steps` gradients (a fixed seed) to every table; returns their values.
std::vector<std::vector<float>> Train(const std::vector<DenseTable*>& tables, int steps,
                                      bool is_delta) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> grads(kDim);
  for (int s = 0; s < steps; ++s) {
    for (float& g : grads) g = normal(gen);
    for (DenseTable* t : tables) EXPECT_TRUE(t->Push(grads, is_delta).ok());
  }
  std::vector<std::vector<float>> values;
  for (DenseTable* t : tables) {
    values.emplace_back(kDim);
    EXPECT_TRUE(t->Pull(absl::MakeSpan(values.back())).ok());
  }
  return values;
}

class RateScaleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RateScaleTest, ScaledRangesEndWhereATableAtTheScaledRateEnds) {
  const float lr = 0.05f;
  // [10, 100) crosses the first block boundary (64) at 1/4 of the rate; [150, 160) at 3 times.
  proto::TableConfig scaled = Config(GetParam(), lr);
  AddRange(&scaled, 150, 10, 3.0f);
  AddRange(&scaled, 10, 90, 0.25f);
  auto table = Make(scaled);
  auto plain = Make(Config(GetParam(), lr));
  auto quarter = Make(Config(GetParam(), lr * 0.25f));
  auto triple = Make(Config(GetParam(), lr * 3.0f));
  ASSERT_TRUE(table && plain && quarter && triple);
  const auto v = Train({table.get(), plain.get(), quarter.get(), triple.get()}, 20, false);
  for (uint64_t i = 0; i < kDim; ++i) {
    const auto& want = (i >= 10 && i < 100) ? v[2] : (i >= 150 && i < 160) ? v[3] : v[1];
    // w_old + k (w_rule - w_old) against the rule at k lr: a few roundings per step.
    EXPECT_NEAR(v[0][i], want[i], 2e-6f) << GetParam() << " element " << i;
  }
  // Not vacuous: the rates differ by far more than the tolerance.
  EXPECT_GT(std::abs(v[1][50] - v[2][50]), 1e-3f) << GetParam();
  EXPECT_GT(std::abs(v[1][155] - v[3][155]), 1e-3f) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Rules, RateScaleTest, ::testing::Values("sgd", "adagrad", "adam"));

TEST(RateScale, DeltasAreAddedAsTheyAre) {
  proto::TableConfig scaled = Config("sgd", 0.1f);
  AddRange(&scaled, 0, kDim, 0.5f);
  auto table = Make(scaled);
  auto plain = Make(Config("sgd", 0.1f));
  ASSERT_TRUE(table && plain);
  const auto v = Train({table.get(), plain.get()}, 3, true);
  EXPECT_EQ(v[0], v[1]);
}

TEST(RateScale, BadRangesAreRefusedNamingTheTableAndTheRange) {
  struct Case {
    uint64_t offset, size;
    float scale;
    const char* says;
  };
  const Case cases[] = {
      {0, 0, 0.5f, "[0, 0) at scale 0.5 is empty"},
      {190, 20, 0.5f, "[190, 210) at scale 0.5 ends past the table's dim 200"},
      {0, 10, NAN, "the scale must be finite and >= 0"},
      {0, 10, -1.0f, "the scale must be finite and >= 0"},
      {0, 10, INFINITY, "the scale must be finite and >= 0"},
  };
  for (const Case& c : cases) {
    proto::TableConfig config = Config("sgd", 0.1f);
    AddRange(&config, c.offset, c.size, c.scale);
    auto table = DenseTable::Create(config, 0, 1, RoundRobinBlockShard);
    ASSERT_FALSE(table.ok()) << c.says;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(table.status().message().find("dense table 3 'dense'"), std::string::npos)
        << table.status();
    EXPECT_NE(table.status().message().find(c.says), std::string::npos) << table.status();
  }
  proto::TableConfig overlapping = Config("sgd", 0.1f);
  AddRange(&overlapping, 50, 10, 0.5f);
  AddRange(&overlapping, 0, 51, 0.5f);
  auto table = DenseTable::Create(overlapping, 0, 1, RoundRobinBlockShard);
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("[0, 51) at scale 0.5 overlaps rate_scales range "
                                          "[50, 60)"),
            std::string::npos)
      << table.status();
}

}  // namespace
}  // namespace fleet::ps
