// PsClient::SyncStepAndPullDense against two real servers on loopback: two workers accumulate
// dense gradients, meet at the sync step, and each step's replies bring the values after the
// averaged update, block by block as a pull would, from every server that holds a block.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kWide = 7;    // 5000 floats in blocks of 1024: both servers hold blocks
constexpr uint32_t kNarrow = 8;  // one block: one server holds none
constexpr uint64_t kWideDim = 5000;
constexpr uint64_t kNarrowDim = 100;
constexpr float kRate = 0.5f;
constexpr float kStart = 2.0f;
constexpr uint32_t kWorkers = 2;
constexpr absl::Duration kStepTimeout = absl::Seconds(30);

void AddDenseTable(proto::ServerConfig* config, uint32_t id, uint64_t dim) {
  testing_servers::AddSgdDenseTable(config, id, id == kWide ? "wide" : "narrow", dim, kRate,
                                    kStart);
}

proto::ServerConfig ConfigOf(uint32_t index) {
  proto::ServerConfig config;
  config.set_server_index(index);
  config.set_num_servers(2);
  AddDenseTable(&config, kWide, kWideDim);
  AddDenseTable(&config, kNarrow, kNarrowDim);
  return config;
}

// Worker w's gradient of float i.
float GradOf(uint32_t worker, uint64_t i) { return static_cast<float>((i + 3 * worker) % 11); }

class SyncStepPullTest : public testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    testing_servers::StartServers({ConfigOf(0), ConfigOf(1)}, &servers_, &options);
    if (HasFatalFailure()) return;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      auto client = PsClient::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      clients_.push_back(std::move(*client));
    }
  }

  // Both workers push their gradients of `table` into the accumulators and meet; returns what
  // each worker's step brought back.
  std::vector<std::vector<float>> StepBoth(uint32_t table, uint64_t dim) {
    std::vector<std::vector<float>> returned(kWorkers, std::vector<float>(dim, -1.0f));
    std::vector<absl::Status> statuses(kWorkers);
    std::vector<std::thread> workers;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        std::vector<float> grads(dim);
        for (uint64_t i = 0; i < dim; ++i) grads[i] = GradOf(w, i);
        statuses[w] = clients_[w]->PushDense(table, grads, PushKind::kAccumulate).Wait();
        if (!statuses[w].ok()) return;
        statuses[w] = clients_[w]
                          ->SyncStepAndPullDense(kWorkers, w, kStepTimeout, table,
                                                 absl::MakeSpan(returned[w]))
                          .status();
      });
    }
    for (auto& t : workers) t.join();
    for (uint32_t w = 0; w < kWorkers; ++w) EXPECT_TRUE(statuses[w].ok()) << statuses[w];
    return returned;
  }

  void ExpectAveragedUpdate(uint32_t table, uint64_t dim) {
    const auto returned = StepBoth(table, dim);
    std::vector<float> pulled(dim);
    ASSERT_TRUE(clients_[0]->PullDense(table, absl::MakeSpan(pulled)).Wait().ok());
    for (uint32_t w = 0; w < kWorkers; ++w) EXPECT_EQ(returned[w], pulled) << "worker " << w;
    // SGD from the constant start with the two workers' gradients averaged.
    for (uint64_t i = 0; i < dim; ++i) {
      const float mean = (GradOf(0, i) + GradOf(1, i)) / 2.0f;
      ASSERT_FLOAT_EQ(pulled[i], kStart - kRate * mean) << "float " << i;
    }
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  std::vector<std::unique_ptr<PsClient>> clients_;
};

TEST_F(SyncStepPullTest, EveryWorkerGetsTheValuesAfterTheAveragedUpdate) {
  ExpectAveragedUpdate(kWide, kWideDim);
}

TEST_F(SyncStepPullTest, AServerHoldingNoBlockOfTheTableAddsNothing) {
  ExpectAveragedUpdate(kNarrow, kNarrowDim);
}

TEST_F(SyncStepPullTest, AnOutputOfTheWrongSizeIsRefusedBeforeTheStep) {
  std::vector<float> short_output(kWideDim - 1);
  auto status = clients_[0]->SyncStepAndPullDense(kWorkers, 0, kStepTimeout, kWide,
                                                  absl::MakeSpan(short_output));
  EXPECT_EQ(status.status().code(), absl::StatusCode::kInvalidArgument) << status.status();
  EXPECT_NE(status.status().message().find("dense table 7"), std::string::npos) << status.status();
  // Nobody arrived: the next step of both workers still meets and applies once.
  ExpectAveragedUpdate(kWide, kWideDim);
}

}  // namespace
}  // namespace fleet::ps
