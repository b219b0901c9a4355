// Sync training's steps after one worker ran out of data, against a real server on loopback: the
// worker still training keeps stepping while the finished one waits at the step barrier as done,
// and each of those steps applies its gradient divided by every worker of the job, not by the
// workers still training. A finished worker counts as a zero gradient (as Paddle's pserver, which
// scales the merged gradient by 1 / trainers), so the last steps move a parameter as far per
// sample as the steps before; dividing by the workers still training made them twice as large
// in a 2-worker job (models/README.md, "word2vec's sync").
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kDense = 3;
constexpr uint32_t kSparse = 4;
constexpr uint64_t kDenseDim = 8;
constexpr uint64_t kRowDim = 2;
constexpr float kRate = 0.5f;
constexpr float kStart = 10.0f;
constexpr uint32_t kWorkers = 2;
constexpr int kStepsTogether = 3;
constexpr int kStepsAlone = 4;  // worker 0's steps after worker 1 finished
constexpr absl::Duration kStepTimeout = absl::Seconds(60);
const std::vector<int64_t> kKeys = {5, 17};

proto::ServerConfig Config() {
  proto::ServerConfig config;
  config.set_server_index(0);
  config.set_num_servers(1);
  testing_servers::AddSgdDenseTable(&config, kDense, "dense", kDenseDim, kRate, kStart);
  testing_servers::AddSgdSparseTable(&config, kSparse, "rows", kRowDim, kRate);
  return config;
}

// Small integers and powers of two: every sum, mean and SGD step below is exact in float.
float Grad(uint32_t worker, int step, uint64_t i) {
  return static_cast<float>((i + 2 * worker + 3 * static_cast<uint64_t>(step)) % 4 + 1);
}

class SyncFinishedWorkerTest : public testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    testing_servers::StartServers({Config()}, &servers_, &options);
    if (HasFatalFailure()) return;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      auto client = PsClient::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      clients_.push_back(std::move(*client));
    }
  }

  // One step of worker w: its accumulate pushes (every dense float, every key of kKeys) and the
  // step's barrier.
  absl::Status Step(uint32_t w, int step) {
    std::vector<float> dense(kDenseDim);
    for (uint64_t i = 0; i < kDenseDim; ++i) dense[i] = Grad(w, step, i);
    std::vector<float> rows(kKeys.size() * kRowDim);
    for (uint64_t i = 0; i < rows.size(); ++i) rows[i] = Grad(w, step, i);
    const std::vector<Future> pushes = {
        clients_[w]->PushDense(kDense, dense, PushKind::kAccumulate),
        clients_[w]->PushSparse(kSparse, kKeys, rows, PushKind::kAccumulate)};
    auto done = clients_[w]->SyncStep(kWorkers, w, /*done=*/false, kStepTimeout, pushes);
    return done.status();
  }

  // Arrives as done until every worker is (what a worker does after its last batch).
  absl::Status Finish(uint32_t w) {
    while (true) {
      auto done = clients_[w]->SyncStep(kWorkers, w, /*done=*/true, kStepTimeout);
      if (!done.ok()) return done.status();
      if (*done >= kWorkers) return absl::OkStatus();
    }
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  std::vector<std::unique_ptr<PsClient>> clients_;
};

TEST_F(SyncFinishedWorkerTest, StepsAfterAWorkerFinishedAverageOverEveryWorker) {
  std::vector<absl::Status> statuses(kWorkers);
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      const int steps = w == 0 ? kStepsTogether + kStepsAlone : kStepsTogether;
      for (int step = 0; step < steps && statuses[w].ok(); ++step) statuses[w] = Step(w, step);
      if (statuses[w].ok()) statuses[w] = Finish(w);
    });
  }
  for (auto& t : workers) t.join();
  for (uint32_t w = 0; w < kWorkers; ++w) ASSERT_TRUE(statuses[w].ok()) << statuses[w];

  // Every step, the ones worker 0 took alone included, subtracts rate x (sum of the gradients
  // pushed) / kWorkers.
  std::vector<float> dense_expected(kDenseDim, kStart);
  std::vector<float> rows_expected(kKeys.size() * kRowDim, 0.0f);
  for (int step = 0; step < kStepsTogether + kStepsAlone; ++step) {
    const uint32_t pushing = step < kStepsTogether ? kWorkers : 1;
    for (uint64_t i = 0; i < kDenseDim; ++i) {
      float sum = 0.0f;
      for (uint32_t w = 0; w < pushing; ++w) sum += Grad(w, step, i);
      dense_expected[i] -= kRate * sum / static_cast<float>(kWorkers);
    }
    for (uint64_t i = 0; i < rows_expected.size(); ++i) {
      float sum = 0.0f;
      for (uint32_t w = 0; w < pushing; ++w) sum += Grad(w, step, i);
      rows_expected[i] -= kRate * sum / static_cast<float>(kWorkers);
    }
  }
  std::vector<float> dense(kDenseDim);
  ASSERT_TRUE(clients_[0]->PullDense(kDense, absl::MakeSpan(dense)).Wait().ok());
  EXPECT_EQ(dense, dense_expected);
  std::vector<float> rows(kKeys.size() * kRowDim);
  ASSERT_TRUE(clients_[0]->PullSparse(kSparse, kKeys, absl::MakeSpan(rows)).Wait().ok());
  EXPECT_EQ(rows, rows_expected);
}

}  // namespace
}  // namespace fleet::ps
