// detail::GradAccumulator, sync training's sums, against the arithmetic it stands for: rounds of
// two workers' pushes, applied with ApplyAll, leave the tables bit for bit as pushing each round's
// sums (worker 0's gradient, plus worker 1's, times 1/2, keys in first-push order) straight into
// twin tables does. The rounds' key counts rise and fall, so that the index a round reserves from
// the last one is now too small (it grows within the round), now too large.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ps/server/detail/grad_accumulator.h"
#include "ps/server/detail/table_set.h"
#include "ps_loopback_servers.h"

namespace fleet::ps::detail {
namespace {

constexpr uint32_t kDense = 1;
constexpr uint32_t kSparse = 2;
constexpr uint64_t kDenseDim = 5000;  // 5 blocks of 1024
constexpr uint64_t kRowDim = 10;
constexpr int kWorkers = 2;

std::unique_ptr<TableSet> AdamTables() {
  proto::ServerConfig config;
  config.set_server_index(0);
  config.set_num_servers(1);
  for (const auto& [id, type, dim] :
       {std::tuple{kDense, proto::DENSE, kDenseDim}, std::tuple{kSparse, proto::SPARSE, kRowDim}}) {
    testing_servers::AddAdamTable(&config, id, type, dim);
  }
  auto tables = TableSet::Create(config, Sharding{});
  EXPECT_TRUE(tables.ok()) << tables.status();
  return tables.ok() ? std::move(*tables) : nullptr;
}

// One worker's push of a round: distinct keys (as a client's deduplicated push), drawn with a
// skew from [0, key_range) so that the two workers share many, and their gradients.
struct Push {
  std::vector<int64_t> keys;
  std::vector<float> rows;
  std::vector<float> dense;
};

Push Draw(std::mt19937& rng, size_t count, int64_t key_range) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Push push;
  absl::flat_hash_map<int64_t, bool> seen;
  while (push.keys.size() < count) {
    const double u = unit(rng);
    const auto key = static_cast<int64_t>(u * u * static_cast<double>(key_range));
    if (seen.try_emplace(key, true).second) push.keys.push_back(key);
  }
  push.rows.resize(count * kRowDim);
  for (float& g : push.rows) g = uniform(rng);
  push.dense.resize(kDenseDim);
  for (float& g : push.dense) g = uniform(rng);
  return push;
}

// The round's sums as the accumulator defines them: keys in the order they were first pushed,
// each the first push's gradient plus the later ones', times `scale`.
void ApplyByHand(TableSet& tables, const std::vector<Push>& pushes, float scale) {
  std::vector<int64_t> keys;
  std::vector<float> sums;
  std::map<int64_t, size_t> row_of;
  std::vector<float> dense = pushes[0].dense;
  for (size_t p = 0; p < pushes.size(); ++p) {
    const Push& push = pushes[p];
    for (size_t i = 0; i < push.keys.size(); ++i) {
      const float* g = push.rows.data() + i * kRowDim;
      auto [it, inserted] = row_of.try_emplace(push.keys[i], keys.size());
      if (inserted) {
        keys.push_back(push.keys[i]);
        sums.insert(sums.end(), g, g + kRowDim);
      } else {
        for (size_t j = 0; j < kRowDim; ++j) sums[it->second * kRowDim + j] += g[j];
      }
    }
    if (p > 0) {
      for (size_t i = 0; i < kDenseDim; ++i) dense[i] += push.dense[i];
    }
  }
  for (float& g : sums) g *= scale;
  for (float& g : dense) g *= scale;
  ASSERT_TRUE((*tables.Sparse(kSparse))->Push(keys, sums, false).ok());
  ASSERT_TRUE((*tables.Dense(kDense))->Push(dense, false).ok());
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(GradAccumulatorTest, RoundsEqualTheirSumsPushedByHandBitForBit) {
  // A round's keys a worker: the index reserved from the last round is too small after a rise
  // and too large after a fall.
  const std::vector<size_t> keys_per_round = {300, 2500, 2500, 900, 4000, 150, 3000};
  constexpr int64_t kKeyRange = 20000;
  for (const size_t threads : {1, 2}) {
    std::unique_ptr<TableSet> accumulated = AdamTables();
    std::unique_ptr<TableSet> by_hand = AdamTables();
    ASSERT_NE(accumulated, nullptr);
    ASSERT_NE(by_hand, nullptr);
    GradAccumulator accumulator(accumulated.get(), threads);
    std::mt19937 rng(7);
    for (size_t round = 0; round < keys_per_round.size(); ++round) {
      std::vector<Push> pushes;
      for (int w = 0; w < kWorkers; ++w) {
        pushes.push_back(Draw(rng, keys_per_round[round], kKeyRange));
        ASSERT_TRUE(accumulator.AddSparse(kSparse, pushes[w].keys, pushes[w].rows).ok());
        ASSERT_TRUE(accumulator.AddDense(kDense, pushes[w].dense).ok());
      }
      const float scale = 1.0f / kWorkers;
      ASSERT_TRUE(accumulator.ApplyAll(scale).ok());
      ASSERT_NO_FATAL_FAILURE(ApplyByHand(*by_hand, pushes, scale));
      std::vector<float> got_dense(kDenseDim);
      std::vector<float> want_dense(kDenseDim);
      ASSERT_TRUE((*accumulated->Dense(kDense))->Pull(absl::MakeSpan(got_dense)).ok());
      ASSERT_TRUE((*by_hand->Dense(kDense))->Pull(absl::MakeSpan(want_dense)).ok());
      EXPECT_TRUE(SameBits(got_dense, want_dense))
          << threads << " threads, dense values after round " << round;
    }
    // The rows once every round is in (a pull creates the rows never pushed, in both alike; an
    // earlier pull would have created them before the rounds that create them by pushing).
    std::vector<int64_t> all_keys(kKeyRange);
    for (int64_t k = 0; k < kKeyRange; ++k) all_keys[k] = k;
    std::vector<float> got(all_keys.size() * kRowDim);
    std::vector<float> want(all_keys.size() * kRowDim);
    ASSERT_TRUE((*accumulated->Sparse(kSparse))->Pull(all_keys, absl::MakeSpan(got)).ok());
    ASSERT_TRUE((*by_hand->Sparse(kSparse))->Pull(all_keys, absl::MakeSpan(want)).ok());
    EXPECT_TRUE(SameBits(got, want)) << threads << " threads: the rows differ";
    // The rounds did train: most rows moved away from their start.
    size_t moved = 0;
    for (size_t k = 0; k < all_keys.size(); ++k) moved += got[k * kRowDim] != 0.5f;
    EXPECT_GT(moved, all_keys.size() / 4) << threads << " threads";
  }
}

// A dense table's values as its server holds them.
std::vector<float> DenseValues(TableSet& tables, uint32_t table_id) {
  auto table = tables.Dense(table_id);
  std::vector<float> values(table.ok() ? (*table)->local_size() : 0);
  if (table.ok()) EXPECT_TRUE((*table)->Pull(absl::MakeSpan(values)).ok());
  return values;
}

TEST(GradAccumulatorTest, OutputsGetTheRoundsDenseValuesAndLeaveTheTablesAsTheyWouldBe) {
  // Two outputs of the pushed dense table (the two workers'), and one of a dense table nobody
  // pushes to; round 2 pushes sparse gradients only, so its dense outputs get the values as
  // they are. A twin accumulator applies the same rounds without outputs.
  constexpr uint32_t kQuiet = 3;
  constexpr uint64_t kQuietDim = 3000;
  auto tables_with_quiet = [] {
    proto::ServerConfig config;
    config.set_server_index(0);
    config.set_num_servers(1);
    testing_servers::AddAdamTable(&config, kDense, proto::DENSE, kDenseDim);
    testing_servers::AddAdamTable(&config, kSparse, proto::SPARSE, kRowDim);
    testing_servers::AddAdamTable(&config, kQuiet, proto::DENSE, kQuietDim);
    auto tables = TableSet::Create(config, Sharding{});
    EXPECT_TRUE(tables.ok()) << tables.status();
    return tables.ok() ? std::move(*tables) : nullptr;
  };
  constexpr int kRounds = 4;
  constexpr int kSparseOnlyRound = 2;
  for (const size_t threads : {1, 2, 3}) {
    std::unique_ptr<TableSet> with_outputs = tables_with_quiet();
    std::unique_ptr<TableSet> without = tables_with_quiet();
    ASSERT_NE(with_outputs, nullptr);
    ASSERT_NE(without, nullptr);
    GradAccumulator accumulator(with_outputs.get(), threads);
    GradAccumulator twin(without.get(), threads);
    std::mt19937 rng(11);
    for (int round = 0; round < kRounds; ++round) {
      for (int w = 0; w < kWorkers; ++w) {
        const Push push = Draw(rng, 1500, 20000);
        for (GradAccumulator* acc : {&accumulator, &twin}) {
          ASSERT_TRUE(acc->AddSparse(kSparse, push.keys, push.rows).ok());
          if (round != kSparseOnlyRound) ASSERT_TRUE(acc->AddDense(kDense, push.dense).ok());
        }
      }
      // NaN everywhere first, so that a float the round leaves unwritten shows.
      std::vector<std::vector<float>> outs = {std::vector<float>(kDenseDim, std::nanf("")),
                                              std::vector<float>(kDenseDim, std::nanf("")),
                                              std::vector<float>(kQuietDim, std::nanf(""))};
      const uint32_t table_of[] = {kDense, kDense, kQuiet};
      bool written[] = {false, false, false};
      std::vector<StepOutput> outputs;
      for (size_t i = 0; i < outs.size(); ++i) {
        outputs.push_back(StepOutput{table_of[i], absl::MakeSpan(outs[i]), &written[i]});
      }
      const float scale = 1.0f / kWorkers;
      ASSERT_TRUE(accumulator.ApplyAll(scale, outputs).ok());
      ASSERT_TRUE(twin.ApplyAll(scale).ok());
      for (size_t i = 0; i < outs.size(); ++i) {
        EXPECT_TRUE(written[i]) << threads << " threads, round " << round << ", output " << i;
        EXPECT_TRUE(SameBits(outs[i], DenseValues(*with_outputs, table_of[i])))
            << threads << " threads, round " << round << ", output " << i;
      }
      for (uint32_t id : {kDense, kQuiet}) {
        EXPECT_TRUE(SameBits(DenseValues(*with_outputs, id), DenseValues(*without, id)))
            << threads << " threads, round " << round << ", dense table " << id;
      }
    }
    std::vector<int64_t> all_keys(20000);
    for (int64_t k = 0; k < 20000; ++k) all_keys[k] = k;
    std::vector<float> got(all_keys.size() * kRowDim);
    std::vector<float> want(all_keys.size() * kRowDim);
    ASSERT_TRUE((*with_outputs->Sparse(kSparse))->Pull(all_keys, absl::MakeSpan(got)).ok());
    ASSERT_TRUE((*without->Sparse(kSparse))->Pull(all_keys, absl::MakeSpan(want)).ok());
    EXPECT_TRUE(SameBits(got, want)) << threads << " threads: the rows differ";
  }
}

}  // namespace
}  // namespace fleet::ps::detail
