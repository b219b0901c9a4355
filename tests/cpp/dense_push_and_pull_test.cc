// DenseTable::PushAndPull, which copies each block's values out right after the block's update,
// against the two passes it replaces (Push, then Pull) on a twin table: the same values bit for
// bit, step after step (so the optimizer state is the same too), for every rule, with weight
// decay and per-parameter rates, and for GEO's deltas, on a server that holds every other block;
// the same errors, and the same table, when a push is refused.
// DenseTable::PushAndCopy, sync training's round, against the same twin: the blocks' updates run
// as tasks in any order and each block's values go to every output right after its update;
// every output holds the pulled values bit for bit, for every rule, with per-parameter rates and
// with a refused block; an output of the wrong size is refused before anything changes.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ps/sharding.h"
#include "ps/table/dense_table.h"

namespace fleet::ps {
namespace {

constexpr uint64_t kDim = 1000;
constexpr uint32_t kBlock = 64;
constexpr uint32_t kServer = 1;  // of 2: blocks 1, 3, 5, ... so local offsets differ from global
constexpr uint32_t kServers = 2;

proto::TableConfig Config(const std::string& rule) {
  proto::TableConfig c;
  c.set_table_id(4);
  c.set_name("dense");
  c.set_type(proto::DENSE);
  c.set_dim(kDim);
  c.set_dense_block_size(kBlock);
  c.mutable_optimizer()->set_learning_rate(0.01f);
  if (rule == "sgd") c.mutable_optimizer()->mutable_sgd();
  if (rule == "adagrad") c.mutable_optimizer()->mutable_adagrad();
  if (rule == "adam") c.mutable_optimizer()->mutable_adam();
  c.mutable_initializer()->set_seed(3);
  c.mutable_initializer()->mutable_uniform()->set_low(-0.5f);
  c.mutable_initializer()->mutable_uniform()->set_high(0.5f);
  return c;
}

std::unique_ptr<DenseTable> Make(const proto::TableConfig& c) {
  auto table = DenseTable::Create(c, kServer, kServers, RoundRobinBlockShard);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? std::move(*table) : nullptr;
}

std::vector<float> Values(const DenseTable& table) {
  std::vector<float> values(table.local_size());
  EXPECT_TRUE(table.Pull(absl::MakeSpan(values)).ok());
  return values;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Pushes the same random gradients (or GEO's deltas) to a table through Push + Pull and to its
// twin through PushAndPull, `steps` times, and expects the same values back each time.
void ExpectTwinsAgree(const proto::TableConfig& config, int steps, bool is_delta = false) {
  auto two_passes = Make(config);
  auto one_pass = Make(config);
  ASSERT_TRUE(two_passes && one_pass);
  const size_t n = one_pass->local_size();
  ASSERT_EQ(n, 7 * kBlock + (kDim - 15 * kBlock)) << "server 1 holds blocks 1, 3, .. 15";
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> grads(n);
  for (int s = 0; s < steps; ++s) {
    for (float& g : grads) g = normal(gen);
    ASSERT_TRUE(two_passes->Push(grads, is_delta).ok());
    const std::vector<float> pulled = Values(*two_passes);
    std::vector<float> returned(n, -7.0f);
    ASSERT_TRUE(one_pass->PushAndPull(grads, absl::MakeSpan(returned), is_delta).ok());
    ASSERT_TRUE(BitEqual(returned, pulled)) << "step " << s;
    ASSERT_TRUE(BitEqual(Values(*one_pass), pulled)) << "step " << s;
  }
}

class PushAndPullRules : public ::testing::TestWithParam<std::string> {};

TEST_P(PushAndPullRules, ReturnsBitForBitWhatPushThenPullReturns) {
  ExpectTwinsAgree(Config(GetParam()), 6);
}

TEST_P(PushAndPullRules, WithWeightDecayAndPerParameterRates) {
  proto::TableConfig c = Config(GetParam());
  c.mutable_optimizer()->set_l2_decay(0.01f);
  // One range inside a local block (block 1 is global 64..127), one across blocks 2 and 3.
  for (auto [offset, size, scale] : {std::tuple{70, 20, 3.0f}, std::tuple{150, 100, 0.25f}}) {
    auto* r = c.add_rate_scales();
    r->set_offset(offset);
    r->set_size(size);
    r->set_scale(scale);
  }
  ExpectTwinsAgree(c, 4);
}

TEST_P(PushAndPullRules, DeltasReturnBitForBitWhatPushThenPullReturns) {
  // GEO's exchange: deltas are added as they are, whatever the rule (the per-parameter rates
  // apply to gradients only), and the values after them come back.
  proto::TableConfig c = Config(GetParam());
  auto* r = c.add_rate_scales();
  r->set_offset(150);
  r->set_size(100);
  r->set_scale(0.25f);
  ExpectTwinsAgree(c, 5, /*is_delta=*/true);
}

INSTANTIATE_TEST_SUITE_P(Rules, PushAndPullRules, ::testing::Values("sgd", "adagrad", "adam"));

TEST(PushAndPull, ADeltaPastTheOverflowBoundIsRefusedAndItsBlockComesBackUnchanged) {
  proto::TableConfig c = Config("adam");
  c.mutable_overflow()->set_max_abs(4.0f);
  c.mutable_overflow()->set_action(proto::OverflowConfig::REFUSE);
  auto two_passes = Make(c);
  auto one_pass = Make(c);
  ASSERT_TRUE(two_passes && one_pass);
  const std::vector<float> before = Values(*one_pass);
  std::vector<float> deltas(one_pass->local_size(), 0.125f);
  for (size_t i = kBlock; i < 2 * kBlock; ++i) deltas[i] = 10.0f;  // second local block
  const absl::Status pushed = two_passes->Push(deltas, true);
  std::vector<float> returned(one_pass->local_size(), -7.0f);
  const absl::Status fused = one_pass->PushAndPull(deltas, absl::MakeSpan(returned), true);
  EXPECT_EQ(pushed.code(), absl::StatusCode::kOutOfRange) << pushed;
  EXPECT_EQ(fused, pushed);
  EXPECT_NE(fused.message().find("block 3"), std::string::npos) << fused;  // global index
  EXPECT_NE(fused.message().find("finite deltas"), std::string::npos) << fused;
  // The refused block as it was, the others moved by their delta, in the table and in `out`.
  const std::vector<float> after = Values(*one_pass);
  EXPECT_TRUE(BitEqual(after, Values(*two_passes)));
  EXPECT_TRUE(BitEqual(returned, after));
  for (size_t i = kBlock; i < 2 * kBlock; ++i) ASSERT_EQ(after[i], before[i]) << i;
  EXPECT_EQ(after[0], before[0] + 0.125f);
}

TEST(PushAndPull, ARefusedBlockIsReportedAndLeftAsPushThenPullLeaveIt) {
  proto::TableConfig c = Config("sgd");
  c.mutable_optimizer()->set_learning_rate(1.0f);
  c.mutable_overflow()->set_max_abs(4.0f);
  c.mutable_overflow()->set_action(proto::OverflowConfig::REFUSE);
  auto two_passes = Make(c);
  auto one_pass = Make(c);
  ASSERT_TRUE(two_passes && one_pass);
  std::vector<float> grads(one_pass->local_size(), 0.5f);
  for (size_t i = 2 * kBlock; i < 3 * kBlock; ++i) grads[i] = -100.0f;  // third local block
  const absl::Status pushed = two_passes->Push(grads, false);
  std::vector<float> returned(one_pass->local_size());
  const absl::Status fused = one_pass->PushAndPull(grads, absl::MakeSpan(returned));
  EXPECT_EQ(pushed.code(), absl::StatusCode::kOutOfRange) << pushed;
  EXPECT_EQ(fused, pushed);
  EXPECT_NE(fused.message().find("block 5"), std::string::npos) << fused;  // global index
  EXPECT_TRUE(BitEqual(Values(*one_pass), Values(*two_passes)));
}

TEST(PushAndPull, AWrongSizeIsRefusedBeforeAnythingChanges) {
  auto table = Make(Config("adam"));
  ASSERT_TRUE(table);
  const std::vector<float> before = Values(*table);
  std::vector<float> grads(table->local_size(), 1.0f);
  std::vector<float> short_out(table->local_size() - 1);
  absl::Status s = table->PushAndPull(grads, absl::MakeSpan(short_out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("dense table 4 'dense'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("asked for 487 back"), std::string::npos) << s;
  std::vector<float> out(table->local_size());
  grads.pop_back();
  s = table->PushAndPull(grads, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the push sent 487 gradients"), std::string::npos) << s;
  EXPECT_TRUE(BitEqual(Values(*table), before));
}

// Runs the tasks last index first: a round's pool may run them in any order.
void ForEachBackwards(size_t n, const std::function<void(size_t)>& task) {
  for (size_t i = n; i > 0; --i) task(i - 1);
}

// NaN-filled outputs (a float the push leaves unwritten shows), and their spans.
struct Outputs {
  Outputs(size_t count, size_t floats) : values(count, std::vector<float>(floats, std::nanf(""))) {
    for (auto& v : values) spans.push_back(absl::MakeSpan(v));
  }
  std::vector<std::vector<float>> values;
  std::vector<absl::Span<float>> spans;
};

// `steps` pushes of the same random gradients to a table through Push then Pull and to its twin
// through PushAndCopy into `outputs` outputs.
void ExpectCopiesEqualPulls(const proto::TableConfig& config, int steps, size_t outputs) {
  auto two_passes = Make(config);
  auto copied = Make(config);
  ASSERT_TRUE(two_passes && copied);
  const size_t n = copied->local_size();
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> grads(n);
  for (int s = 0; s < steps; ++s) {
    for (float& g : grads) g = normal(gen);
    ASSERT_TRUE(two_passes->Push(grads, false).ok());
    const std::vector<float> pulled = Values(*two_passes);
    Outputs outs(outputs, n);
    ASSERT_TRUE(copied->PushAndCopy(grads, ForEachBackwards, outs.spans).ok());
    for (size_t k = 0; k < outputs; ++k) {
      ASSERT_TRUE(BitEqual(outs.values[k], pulled)) << "step " << s << ", output " << k;
    }
    ASSERT_TRUE(BitEqual(Values(*copied), pulled)) << "step " << s;
  }
}

class PushAndCopyRules : public ::testing::TestWithParam<std::string> {};

TEST_P(PushAndCopyRules, EveryOutputHoldsBitForBitWhatPushThenPullReturns) {
  for (size_t outputs : {0, 1, 2, 3}) ExpectCopiesEqualPulls(Config(GetParam()), 5, outputs);
}

TEST_P(PushAndCopyRules, WithWeightDecayAndPerParameterRates) {
  proto::TableConfig c = Config(GetParam());
  c.mutable_optimizer()->set_l2_decay(0.01f);
  auto* r = c.add_rate_scales();  // across local blocks
  r->set_offset(150);
  r->set_size(100);
  r->set_scale(3.0f);
  ExpectCopiesEqualPulls(c, 4, 2);
}

INSTANTIATE_TEST_SUITE_P(Rules, PushAndCopyRules, ::testing::Values("sgd", "adagrad", "adam"));

TEST(PushAndCopy, ARefusedBlockIsReportedAndEveryOutputHoldsWhatPullReturns) {
  proto::TableConfig c = Config("sgd");
  c.mutable_optimizer()->set_learning_rate(1.0f);
  c.mutable_overflow()->set_max_abs(4.0f);
  c.mutable_overflow()->set_action(proto::OverflowConfig::REFUSE);
  auto two_passes = Make(c);
  auto copied = Make(c);
  ASSERT_TRUE(two_passes && copied);
  std::vector<float> grads(copied->local_size(), 0.5f);
  for (size_t i = 2 * kBlock; i < 3 * kBlock; ++i) grads[i] = -100.0f;  // third local block
  const absl::Status pushed = two_passes->Push(grads, false);
  Outputs outs(2, copied->local_size());
  const absl::Status fused = copied->PushAndCopy(grads, ForEachBackwards, outs.spans);
  EXPECT_EQ(pushed.code(), absl::StatusCode::kOutOfRange) << pushed;
  EXPECT_EQ(fused, pushed);
  EXPECT_TRUE(BitEqual(Values(*copied), Values(*two_passes)));
  for (const auto& out : outs.values) EXPECT_TRUE(BitEqual(out, Values(*two_passes)));
}

TEST(PushAndCopy, AnOutputOfTheWrongSizeIsRefusedBeforeAnythingChanges) {
  auto table = Make(Config("adam"));
  ASSERT_TRUE(table);
  const std::vector<float> before = Values(*table);
  std::vector<float> grads(table->local_size(), 1.0f);
  std::vector<float> good(table->local_size());
  std::vector<float> short_out(table->local_size() - 1);
  const absl::Span<float> outs[] = {absl::MakeSpan(good), absl::MakeSpan(short_out)};
  absl::Status s = table->PushAndCopy(grads, ForEachBackwards, outs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("dense table 4 'dense'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("the push-and-copy asked for 487 back"), std::string::npos) << s;
  EXPECT_TRUE(BitEqual(Values(*table), before));
}

}  // namespace
}  // namespace fleet::ps
