// A sparse push whose keys repeat (a CTR-DNN step holds each id many times): the client sends
// each key once with its occurrences' gradients summed, starting from the first occurrence's and
// adding the others in position order. Float addition is not associative, so the order is part
// of the result: against real servers on loopback, over the wire and through shared memory, with
// one and two servers and requests split into many pieces, every row equals zero minus that sum
// (SGD at rate 1 from zero rows), bit for bit, and a push-pull gives each position its key's row.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 3;
constexpr size_t kDim = 10;
constexpr size_t kDistinct = 300;
constexpr size_t kKeys = 4000;

// Keys drawn from kDistinct ids (negative and large ones among them), so most positions repeat
// an earlier key, some keys many times and some once.
std::vector<int64_t> RepeatingKeys(uint32_t seed) {
  std::mt19937 draw(seed);
  std::vector<int64_t> ids(kDistinct);
  for (size_t i = 0; i < kDistinct; ++i) {
    const int64_t id = static_cast<int64_t>(i * 7919 + 5);
    ids[i] = i % 3 == 0 ? -id : (i % 5 == 0 ? id + (int64_t{1} << 42) : id);
  }
  std::vector<int64_t> keys(kKeys);
  // Squaring a uniform draw makes the low ids frequent, as hashed feature ids are.
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int64_t& key : keys) {
    const double u = unit(draw);
    key = ids[static_cast<size_t>(u * u * kDistinct)];
  }
  return keys;
}

// Gradients of mixed magnitudes (1e7 beside units and fractions), so that summing one key's
// gradients in another order gives another float.
std::vector<float> MixedGradients(uint32_t seed) {
  std::mt19937 draw(seed);
  std::uniform_int_distribution<int> pick(-8, 8);
  std::vector<float> grads(kKeys * kDim);
  for (size_t i = 0; i < grads.size(); ++i) {
    const int v = pick(draw);
    grads[i] = v % 4 == 0 ? static_cast<float>(v) * 2.5e6f : static_cast<float>(v) / 3.0f;
  }
  return grads;
}

// Each key's row after the push: 0 - 1 * (the first occurrence's gradient + the next + ...).
// With `reversed`, the same sums taken from the last occurrence back: the test's own check that
// the order shows in the result.
std::unordered_map<int64_t, std::vector<float>> ExpectedRows(const std::vector<int64_t>& keys,
                                                             const std::vector<float>& grads,
                                                             bool reversed) {
  std::unordered_map<int64_t, std::vector<float>> sums;
  for (size_t n = 0; n < keys.size(); ++n) {
    const size_t i = reversed ? keys.size() - 1 - n : n;
    const float* g = grads.data() + i * kDim;
    auto [it, first] = sums.try_emplace(keys[i], g, g + kDim);
    if (first) continue;
    for (size_t k = 0; k < kDim; ++k) it->second[k] += g[k];
  }
  for (auto& [key, row] : sums) {
    for (float& value : row) value = 0.0f - 1.0f * value;
  }
  return sums;
}

bool RowIs(const float* row, const std::vector<float>& expected) {
  return std::memcmp(row, expected.data(), kDim * sizeof(float)) == 0;
}

// Parameters: the number of servers, whether the client shares memory with them, and the keys
// per request (64 sends pieces while later repeats of their keys are still to come).
class PushRepeatsTest : public testing::TestWithParam<std::tuple<uint32_t, bool, size_t>> {
 protected:
  void SetUp() override {
    const auto [num_servers, shared_memory, max_keys] = GetParam();
    std::vector<proto::ServerConfig> configs(num_servers);
    for (uint32_t s = 0; s < num_servers; ++s) {
      configs[s].set_server_index(s);
      configs[s].set_num_servers(num_servers);
      testing_servers::AddSgdSparseTable(&configs[s], kTable, "rows", kDim, 1.0f);
    }
    ClientOptions options;
    testing_servers::StartServers(configs, &servers_, &options);
    if (HasFatalFailure()) return;
    options.max_keys_per_request = max_keys;
    if (shared_memory) {
      options.local_host = "127.0.0.1";
      options.local_shared_memory = true;
    }
    auto client = PsClient::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    ASSERT_EQ(client_->shared_memory(0), shared_memory);
  }

  // The rows of `keys` as the servers hold them now.
  std::vector<float> Pull(const std::vector<int64_t>& keys) {
    std::vector<float> rows(keys.size() * kDim, -1.0f);
    const absl::Status pulled = client_->PullSparse(kTable, keys, absl::MakeSpan(rows)).Wait();
    EXPECT_TRUE(pulled.ok()) << pulled;
    return rows;
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  std::unique_ptr<PsClient> client_;
};

TEST_P(PushRepeatsTest, RepeatsAreSummedInPositionOrderBitForBit) {
  const std::vector<int64_t> keys = RepeatingKeys(17);
  const std::vector<float> grads = MixedGradients(23);
  const auto expected = ExpectedRows(keys, grads, /*reversed=*/false);
  ASSERT_LT(expected.size(), keys.size() / 4);  // most positions are repeats
  const auto reversed = ExpectedRows(keys, grads, /*reversed=*/true);
  size_t order_shows = 0;
  for (const auto& [key, row] : expected) order_shows += row != reversed.at(key);
  ASSERT_GT(order_shows, expected.size() / 4) << "the gradients do not tell the orders apart";

  const absl::Status pushed = client_->PushSparse(kTable, keys, grads, PushKind::kGradient).Wait();
  ASSERT_TRUE(pushed.ok()) << pushed;
  const std::vector<float> rows = Pull(keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(RowIs(rows.data() + i * kDim, expected.at(keys[i])))
        << "position " << i << ", key " << keys[i];
  }
}

TEST_P(PushRepeatsTest, APushPullGivesEveryPositionItsKeysRowAfterTheSummedPush) {
  const std::vector<int64_t> keys = RepeatingKeys(29);
  const std::vector<float> grads = MixedGradients(31);
  const auto expected = ExpectedRows(keys, grads, /*reversed=*/false);
  std::vector<float> returned(keys.size() * kDim, -2.0f);
  const absl::Status status =
      client_->PushPullSparse(kTable, keys, grads, absl::MakeSpan(returned), PushKind::kGradient)
          .Wait();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<float> rows = Pull(keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(RowIs(returned.data() + i * kDim, expected.at(keys[i])))
        << "position " << i << ", key " << keys[i];
  }
  EXPECT_EQ(std::memcmp(returned.data(), rows.data(), rows.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(ServersTransportAndRequestSize, PushRepeatsTest,
                         testing::Combine(testing::Values(1u, 2u), testing::Bool(),
                                          testing::Values(size_t{32768}, size_t{64})));

}  // namespace
}  // namespace fleet::ps
