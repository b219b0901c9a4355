// DenseTable::Push skips the copy and the check of a block when the block's magnitudes prove
// that the update stays in range (UpdateRule::UpdateStaysWithin). These tests hold the table,
// values and optimizer state bit for bit, to a reference that copies, updates and checks every
// block: on blocks far from the bound (the proof holds), near it (it does not, and the copy is
// taken) and past it (the block is refused or clipped and its state left as it was).

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/sharding.h"
#include "ps/table/dense_table.h"
#include "ps/table/table_file.h"
#include "ps/table/update_rule.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kBlock = 64;  // small blocks, so that one push has blocks of every kind

proto::TableConfig Config(const std::string& rule, uint64_t dim, float lr, float max_abs,
                          bool clip) {
  proto::TableConfig c;
  c.set_table_id(7);
  c.set_name("d");
  c.set_type(proto::DENSE);
  c.set_dim(dim);
  c.set_dense_block_size(kBlock);
  c.mutable_optimizer()->set_learning_rate(lr);
  if (rule == "adam") c.mutable_optimizer()->mutable_adam();
  if (rule == "sgd") c.mutable_optimizer()->mutable_sgd();
  if (rule == "adagrad") c.mutable_optimizer()->mutable_adagrad()->set_epsilon(0.5f);
  c.mutable_initializer()->set_seed(5);
  c.mutable_initializer()->mutable_uniform()->set_low(-0.5f);
  c.mutable_initializer()->mutable_uniform()->set_high(0.5f);
  c.mutable_overflow()->set_max_abs(max_abs);
  c.mutable_overflow()->set_action(clip ? proto::OverflowConfig::CLIP
                                        : proto::OverflowConfig::REFUSE);
  return c;
}

// Every block's floats (values, then state) in block order, read back from a saved part.
std::vector<std::vector<float>> SavedBlocks(const DenseTable& table) {
  const size_t floats =
      kBlock + MakeUpdateRule(table.config().optimizer()).value()->StateDim(kBlock);
  const std::string path = absl::StrCat(::testing::TempDir(), "/dense_overflow_", getpid());
  auto saved = table.Save(path);
  EXPECT_TRUE(saved.ok()) << saved.status();
  auto reader = TableFileReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<std::vector<float>> blocks;
  for (uint64_t b = 0; b < *saved; ++b) {
    int64_t key;
    EXPECT_TRUE((*reader)->Read(&key, sizeof(key)).ok());
    EXPECT_EQ(key, static_cast<int64_t>(b));
    std::vector<float> data(floats);
    EXPECT_TRUE((*reader)->Read(data.data(), floats * sizeof(float)).ok());
    blocks.push_back(std::move(data));
  }
  std::remove(path.c_str());
  return blocks;
}

// Puts `blocks` (values and state, in block order) into the table through a saved part, as a
// restart from a checkpoint would: optimizer state that training would not produce.
void LoadBlocks(DenseTable* table, const std::vector<std::vector<float>>& blocks) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/dense_overflow_load_", getpid());
  ASSERT_TRUE(table->Save(path).ok());
  TableFileHeader header;
  {
    auto saved = TableFileReader::Open(path);
    ASSERT_TRUE(saved.ok()) << saved.status();
    header = (*saved)->header();
  }
  auto writer = TableFileWriter::Open(path, header);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (size_t b = 0; b < blocks.size(); ++b) {
    ASSERT_TRUE(
        (*writer)->AppendRecord(static_cast<int64_t>(b), blocks[b].data(), blocks[b].size()).ok());
  }
  ASSERT_TRUE((*writer)->Finish(blocks.size()).ok());
  auto reader = TableFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  TableFileReader* parts[] = {reader->get()};
  auto loaded = table->Load(parts);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::remove(path.c_str());
}

// The guard as it was before the proof: copy, update, check, restore.
class Reference {
 public:
  Reference(const proto::TableConfig& config, std::vector<std::vector<float>> blocks)
      : rule_(std::move(MakeUpdateRule(config.optimizer())).value()),
        bound_(config.overflow().max_abs() > 0 ? config.overflow().max_abs() : FLT_MAX),
        clip_(config.overflow().action() == proto::OverflowConfig::CLIP),
        blocks_(std::move(blocks)) {}

  // Returns the refused blocks. Counts the blocks the rule proves in range, and fails the test
  // when one of them is not.
  std::vector<uint64_t> Push(const std::vector<float>& grads, bool is_delta) {
    std::vector<uint64_t> refused;
    for (size_t b = 0; b < blocks_.size(); ++b) {
      std::vector<float>& data = blocks_[b];
      const std::vector<float> kept = data;
      const float* g = grads.data() + b * kBlock;
      const bool proven = !is_delta && rule_->UpdateStaysWithin(kBlock, data.data(),
                                                                data.data() + kBlock, g, bound_);
      proven_ += proven;
      if (is_delta) {
        for (size_t i = 0; i < kBlock; ++i) data[i] += g[i];
      } else {
        rule_->Update(kBlock, data.data(), data.data() + kBlock, g);
      }
      bool in_range = true, nan = false;
      for (float x : data) {
        in_range &= std::fabs(x) <= bound_;
        nan |= std::isnan(x);
      }
      if (in_range) continue;
      EXPECT_FALSE(proven) << "block " << b << " was proven in range and is not";
      if (clip_ && !nan) {
        for (float& x : data) x = std::clamp(x, -bound_, bound_);
        continue;
      }
      data = kept;
      refused.push_back(b);
    }
    return refused;
  }
  const std::vector<std::vector<float>>& blocks() const { return blocks_; }
  int proven() const { return proven_; }

 private:
  std::unique_ptr<UpdateRule> rule_;
  float bound_;
  bool clip_;
  std::vector<std::vector<float>> blocks_;
  int proven_ = 0;
};

// Every block of `table` bit for bit the reference's.
void ExpectBlocksAsTheReference(const DenseTable& table, const Reference& reference) {
  const auto got = SavedBlocks(table);
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(
        std::memcmp(got[b].data(), reference.blocks()[b].data(), got[b].size() * sizeof(float)), 0)
        << "block " << b;
  }
}

struct Counts {
  int refused = 0;  // blocks refused
  int proven = 0;   // blocks (of gradient pushes) that the rule proved in range
};

// Pushes `pushes` random gradients (or deltas), each block at a scale of its own drawn from
// [scale_low, scale_high] (log-uniform), and compares table and reference after each. With
// `delta_every` k > 0, every k-th push of gradients is a push of deltas instead (GEO's deltas
// change a block without the rule, so the bound its last update left must not be trusted).
void PushAndCompare(const proto::TableConfig& config, int pushes, float scale_low, float scale_high,
                    bool is_delta, Counts* counts, int delta_every = 0) {
  auto table = DenseTable::Create(config, 0, 1, RoundRobinBlockShard);
  ASSERT_TRUE(table.ok()) << table.status();
  Reference reference(config, SavedBlocks(**table));
  const size_t blocks = reference.blocks().size();
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(std::log(scale_low), std::log(scale_high));
  for (int p = 0; p < pushes; ++p) {
    std::vector<float> grads(blocks * kBlock);
    for (size_t b = 0; b < blocks; ++b) {
      const float scale = std::exp(log_scale(gen));
      for (size_t i = 0; i < kBlock; ++i) grads[b * kBlock + i] = scale * normal(gen);
    }
    const bool deltas = is_delta || (delta_every > 0 && p % delta_every == delta_every - 1);
    const std::vector<uint64_t> refused = reference.Push(grads, deltas);
    const absl::Status status = (*table)->Push(grads, deltas);
    if (refused.empty()) {
      EXPECT_TRUE(status.ok()) << "push " << p << ": " << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << "push " << p << ": " << status;
      EXPECT_NE(status.message().find(absl::StrCat("the update of block ", refused[0], " ")),
                std::string::npos)
          << status;
      counts->refused += static_cast<int>(refused.size());
    }
    const auto got = SavedBlocks(**table);
    ASSERT_EQ(got.size(), blocks);
    for (size_t b = 0; b < blocks; ++b) {
      ASSERT_EQ(
          std::memcmp(got[b].data(), reference.blocks()[b].data(), got[b].size() * sizeof(float)),
          0)
          << "push " << p << ", block " << b;
    }
  }
  counts->proven = reference.proven();
}

// Adam with a large epsilon, so that steps are bounded and blocks near the bound can be proven.
proto::TableConfig NearBoundAdam(bool clip) {
  proto::TableConfig config = Config("adam", 16 * kBlock, 0.5f, 3.0f, clip);
  config.mutable_optimizer()->mutable_adam()->set_epsilon(0.5f);
  config.mutable_initializer()->mutable_uniform()->set_low(-0.2f);
  config.mutable_initializer()->mutable_uniform()->set_high(0.2f);
  return config;
}

TEST(DenseOverflow, AdamFarFromTheBoundMatchesTheCopyingGuard) {
  Counts counts;
  PushAndCompare(Config("adam", 10 * kBlock, 1e-3f, 0.0f, false), 20, 1e-3f, 1e3f, false, &counts);
  EXPECT_EQ(counts.refused, 0);
  EXPECT_EQ(counts.proven, 20 * 10);
}

TEST(DenseOverflow, AdamWithWeightDecayMatchesTheCopyingGuard) {
  proto::TableConfig config = Config("adam", 6 * kBlock, 1e-2f, 0.0f, false);
  config.mutable_optimizer()->set_l2_decay(1e-2f);
  config.mutable_optimizer()->set_l1_decay(1e-3f);
  Counts counts;
  PushAndCompare(config, 20, 1e-2f, 1e2f, false, &counts);
  EXPECT_EQ(counts.refused, 0);
  EXPECT_EQ(counts.proven, 20 * 6);
}

TEST(DenseOverflow, AdamNearAndPastTheBoundRefusesAsTheCopyingGuard) {
  Counts counts;
  PushAndCompare(NearBoundAdam(false), 40, 1e-4f, 10.0f, false, &counts);
  EXPECT_GT(counts.refused, 0);
  EXPECT_GT(counts.proven, 0);
}

TEST(DenseOverflow, AdamNearTheBoundClipsAsTheCopyingGuard) {
  Counts counts;
  PushAndCompare(NearBoundAdam(true), 40, 1e-4f, 10.0f, false, &counts);
  EXPECT_EQ(counts.refused, 0);
  EXPECT_GT(counts.proven, 0);
}

// Loads each block b at a scale s of its own (0.02 * 1.35^b, up to 1.8) with w = s, the
// per-value state that `state_of` gives for s, and pushes g = -s; compares with the reference.
// Blocks with s up to the proof's h must be proven and stay in range, larger ones are copied,
// and those that go past the bound are refused.
void CompareOnCraftedState(const proto::TableConfig& config, size_t state_per_value,
                           float (*state_of)(size_t k, float s)) {
  auto table = DenseTable::Create(config, 0, 1, RoundRobinBlockShard);
  ASSERT_TRUE(table.ok()) << table.status();
  std::vector<std::vector<float>> blocks = SavedBlocks(**table);
  std::vector<float> grads(blocks.size() * kBlock);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const float scale = 0.02f * std::pow(1.35f, static_cast<float>(b));
    for (size_t i = 0; i < kBlock; ++i) {
      blocks[b][i] = scale;
      for (size_t k = 0; k < state_per_value; ++k) {
        blocks[b][(k + 1) * kBlock + i] = state_of(k, scale);
      }
      grads[b * kBlock + i] = -scale;
    }
  }
  LoadBlocks(table->get(), blocks);
  Reference reference(config, SavedBlocks(**table));
  const std::vector<uint64_t> refused = reference.Push(grads, false);
  const absl::Status status = (*table)->Push(grads, false);
  EXPECT_EQ(status.ok(), refused.empty()) << status;
  EXPECT_GT(refused.size(), 0u);
  EXPECT_GT(reference.proven(), 0);
  ExpectBlocksAsTheReference(**table, reference);
}

TEST(DenseOverflow, AdamOnTheWorstStateForTheProofMatchesTheCopyingGuard) {
  // m = -s and v = 0: Adam's step, lr_t * |m| / (sqrt(v) + eps_t), comes closest to the
  // proof's bound h + lr_t * h / eps_t.
  CompareOnCraftedState(NearBoundAdam(false), 2,
                        [](size_t k, float s) { return k == 0 ? -s : 0.0f; });
}

// How a test moves element 5 of block 1 near the bound once the table has been pushed to.
enum class MoveBy { kLoad, kDeltaPush, kGradientPushAtRateOne };

// Sets element 5 of block 1 to `value`: by loading the saved blocks with it changed, by a push of
// deltas that adds the difference, or by a gradient push that subtracts it (SGD at rate 1 only:
// w -= lr * g). Every other element keeps its value.
void MoveElementOfBlockOne(DenseTable* table, float value, MoveBy how) {
  std::vector<std::vector<float>> blocks = SavedBlocks(*table);
  if (how == MoveBy::kLoad) {
    blocks[1][5] = value;
    LoadBlocks(table, blocks);
    return;
  }
  std::vector<float> push(table->local_size(), 0.0f);
  const bool deltas = how == MoveBy::kDeltaPush;
  push[kBlock + 5] = deltas ? value - blocks[1][5] : blocks[1][5] - value;
  ASSERT_TRUE(table->Push(push, deltas).ok());
}

// A block's update leaves a bound that proves its next push (UpdateRule::UpdateMeasured). A
// value that a load or a push of deltas then puts near the bound must not go unchecked: the
// next small gradient takes it past the bound, and the block is refused as the reference does.
void ExpectNoStaleBound(bool by_load) {
  const proto::TableConfig config = NearBoundAdam(false);
  auto table = DenseTable::Create(config, 0, 1, RoundRobinBlockShard);
  ASSERT_TRUE(table.ok()) << table.status();
  const size_t n = (*table)->local_size();
  // Small gradients: every block's update leaves a bound of about 0.2, its initial values.
  ASSERT_TRUE((*table)->Push(std::vector<float>(n, 1e-3f), false).ok());
  const size_t at = kBlock + 5;  // element 5 of block 1
  MoveElementOfBlockOne(table->get(), 2.99f, by_load ? MoveBy::kLoad : MoveBy::kDeltaPush);
  if (::testing::Test::HasFatalFailure()) return;
  Reference reference(config, SavedBlocks(**table));
  ASSERT_GT(reference.blocks()[1][5], 2.9f);
  // Within the gradient's limit; Adam's step then moves the weight by about 0.1, past 3.
  std::vector<float> grads(n, 1e-3f);
  grads[at] = -0.3f;
  EXPECT_EQ(reference.Push(grads, false), std::vector<uint64_t>{1});
  const absl::Status status = (*table)->Push(grads, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
  ExpectBlocksAsTheReference(**table, reference);
}

TEST(DenseOverflow, ABlockLoadedNearTheBoundAfterPushesIsCheckedAgain) { ExpectNoStaleBound(true); }

TEST(DenseOverflow, ABlockMovedNearTheBoundByDeltasIsCheckedAgain) { ExpectNoStaleBound(false); }

TEST(DenseOverflow, AdamWithDeltasBetweenItsPushesRefusesAsTheCopyingGuard) {
  // Gradients (proven from the bounds their updates left, or by scanning) and a push of deltas
  // every third push, near and past the bound.
  Counts counts;
  PushAndCompare(NearBoundAdam(false), 45, 1e-4f, 3.0f, false, &counts, 3);
  EXPECT_GT(counts.refused, 0);
  EXPECT_GT(counts.proven, 0);
}

TEST(DenseOverflow, AdamDeltasOnlyRefuseAsTheCopyingGuard) {
  // GEO's dense pushes: deltas alone, so the state's magnitude measured at the first push is
  // kept for every later one (DenseTable's Block::state_max); values bit for bit the reference's.
  Counts counts;
  PushAndCompare(NearBoundAdam(false), 30, 1e-3f, 2.0f, true, &counts);
  EXPECT_GT(counts.refused, 0);
}

// Deltas leave the state alone, so a delta push keeps the state's measured magnitude; a load
// replaces the state and must not leave that measure behind. A state loaded past the bound (a
// checkpoint of a table with a larger bound, `clip` or not) makes the next push of small deltas
// fail the guard's check of the whole block, as in the reference.
void ExpectNoStaleStateMeasure(bool clip) {
  const proto::TableConfig config = NearBoundAdam(clip);
  auto table = DenseTable::Create(config, 0, 1, RoundRobinBlockShard);
  ASSERT_TRUE(table.ok()) << table.status();
  const size_t n = (*table)->local_size();
  ASSERT_TRUE((*table)->Push(std::vector<float>(n, 1e-3f), true).ok());  // measures the state
  std::vector<std::vector<float>> blocks = SavedBlocks(**table);
  blocks[1][kBlock + 5] = 3.5f;  // block 1's state, past the bound of 3
  LoadBlocks(table->get(), blocks);
  Reference reference(config, SavedBlocks(**table));
  const std::vector<float> deltas(n, 1e-3f);
  const std::vector<uint64_t> refused = reference.Push(deltas, true);
  const absl::Status status = (*table)->Push(deltas, true);
  if (clip) {
    EXPECT_TRUE(refused.empty());
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(reference.blocks()[1][kBlock + 5], 3.0f);  // clipped with the values
  } else {
    EXPECT_EQ(refused, std::vector<uint64_t>{1});
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
  }
  ExpectBlocksAsTheReference(**table, reference);
}

// A delta push measures the values it leaves (DenseTable's Block::value_max) so that the next
// delta push need not scan them; a load or a push of gradients changes the values and must not
// leave that measure behind. A value it puts near the bound of 3 makes the next push of small
// deltas fail the guard's check of its block, as in the reference.
void ExpectNoStaleValueMeasure(bool by_load) {
  const proto::TableConfig config = Config("sgd", 16 * kBlock, 1.0f, 3.0f, false);
  auto table = DenseTable::Create(config, 0, 1, RoundRobinBlockShard);
  ASSERT_TRUE(table.ok()) << table.status();
  const size_t n = (*table)->local_size();
  const size_t at = kBlock + 5;  // element 5 of block 1
  // The first push of deltas measures the values it leaves.
  ASSERT_TRUE((*table)->Push(std::vector<float>(n, 1e-3f), true).ok());
  MoveElementOfBlockOne(table->get(), 2.995f,
                        by_load ? MoveBy::kLoad : MoveBy::kGradientPushAtRateOne);
  if (::testing::Test::HasFatalFailure()) return;
  Reference reference(config, SavedBlocks(**table));
  ASSERT_GT(reference.blocks()[1][5], 2.99f);
  std::vector<float> deltas(n, 1e-3f);
  deltas[at] = 0.01f;  // within the deltas' limit: only the value's own magnitude says no
  EXPECT_EQ(reference.Push(deltas, true), std::vector<uint64_t>{1});
  const absl::Status status = (*table)->Push(deltas, true);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
  ExpectBlocksAsTheReference(**table, reference);
}

TEST(DenseOverflow, ValuesLoadedNearTheBoundAfterDeltasAreCheckedAgain) {
  ExpectNoStaleValueMeasure(true);
}

TEST(DenseOverflow, ValuesMovedNearTheBoundByGradientsAfterDeltasAreCheckedAgain) {
  ExpectNoStaleValueMeasure(false);
}

TEST(DenseOverflow, AStateLoadedPastTheBoundAfterDeltasRefusesTheNextDeltas) {
  ExpectNoStaleStateMeasure(false);
}

TEST(DenseOverflow, AStateLoadedPastTheBoundAfterDeltasIsClippedByTheNextDeltas) {
  ExpectNoStaleStateMeasure(true);
}

TEST(DenseOverflow, AdagradOnTheWorstStateForTheProofMatchesTheCopyingGuard) {
  // G = 0: the step is lr * s / (s + epsilon), closest to the proof's h + lr * h / epsilon.
  CompareOnCraftedState(Config("adagrad", 16 * kBlock, 5.0f, 3.0f, false), 1,
                        [](size_t, float) { return 0.0f; });
}

TEST(DenseOverflow, AdamGradientsThatOverflowTheSecondMomentAreRefused) {
  // |g| up to 1e25: g * g overflows float in the second moment while the weight stays finite.
  Counts counts;
  PushAndCompare(Config("adam", 8 * kBlock, 1e-3f, 0.0f, false), 6, 1e10f, 1e25f, false, &counts);
  EXPECT_GT(counts.refused, 0);
}

TEST(DenseOverflow, AdagradNearAndPastTheBoundRefusesAsTheCopyingGuard) {
  Counts counts;
  PushAndCompare(Config("adagrad", 16 * kBlock, 0.1f, 3.0f, false), 40, 1e-4f, 2.0f, false,
                 &counts);
  EXPECT_GT(counts.refused, 0);
  EXPECT_GT(counts.proven, 0);
}

TEST(DenseOverflow, SgdAndDeltasNearTheBoundRefuseAsTheCopyingGuard) {
  Counts counts;
  PushAndCompare(Config("sgd", 16 * kBlock, 1.0f, 4.0f, false), 30, 1e-3f, 2.0f, false, &counts);
  EXPECT_GT(counts.refused, 0);
  EXPECT_GT(counts.proven, 0);
  Counts deltas;
  PushAndCompare(Config("sgd", 16 * kBlock, 1.0f, 4.0f, false), 30, 1e-3f, 2.0f, true, &deltas);
  EXPECT_GT(deltas.refused, 0);
}

}  // namespace
}  // namespace fleet::ps
