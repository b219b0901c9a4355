// A sync (and half-async) worker's trainer threads after one of them ran out of batches, through
// the real communicator and a real server on loopback: the threads meet after every step and the
// last to arrive pushes their merged gradients. Each step divides them by every trainer thread of
// the pass, a finished one counting as a zero gradient, so the steps the remaining thread takes
// alone move a parameter as far per sample as the steps before. Dividing by the threads that
// arrived made those steps twice as large per sample with two threads (the same defect as across
// workers: ps_sync_finished_worker_test.cc).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/lod_tensor.h"
#include "core/scope.h"
#include "distributed/communicator.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::distributed {
namespace {

constexpr uint32_t kDense = 3;
constexpr uint32_t kSparse = 4;
constexpr uint64_t kDenseDim = 8;
constexpr uint64_t kRowDim = 2;
constexpr float kRate = 0.5f;
constexpr float kStart = 10.0f;
constexpr int kThreads = 2;
constexpr int kStepsTogether = 3;
constexpr int kStepsAlone = 4;  // thread 0's steps after thread 1 ran out of batches
const std::vector<int64_t> kKeys = {5, 17, 5};  // key 5 twice: the merge sums it within a thread

ps::proto::ServerConfig Config() {
  ps::proto::ServerConfig config;
  config.set_server_index(0);
  config.set_num_servers(1);
  ps::testing_servers::AddSgdDenseTable(&config, kDense, "dense", kDenseDim, kRate, kStart);
  ps::testing_servers::AddSgdSparseTable(&config, kSparse, "rows", kRowDim, kRate);
  return config;
}

// Small integers: every sum, mean (by 2) and SGD step below is exact in float.
float Grad(int thread, int step, uint64_t i) {
  return static_cast<float>((i + 2 * static_cast<uint64_t>(thread) + 3 * step) % 4 + 1);
}

class StepMergeFinishedThreadTest : public testing::TestWithParam<PsMode> {
 protected:
  void SetUp() override {
    ps::ClientOptions options;
    ps::testing_servers::StartServers({Config()}, &servers_, &options);
    if (HasFatalFailure()) return;
    auto client = ps::PsClient::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    LoDTensor* w = root_.Var("w")->GetMutable<LoDTensor>();
    w->Resize({static_cast<int64_t>(kDenseDim)});
    float* values = w->mutable_data<float>();
    for (uint64_t i = 0; i < kDenseDim; ++i) values[i] = kStart;

    CommunicatorConfig config;
    config.mode = GetParam();
    config.dense_table_id = kDense;
    config.dense = {DenseVar{"w", "w@GRAD", 0, kDenseDim}};
    config.sparse = {SparseVar{kSparse, kRowDim, "rows", {}, {}}};
    config.step_timeout = absl::Seconds(60);
    communicator_ = MakeCommunicator(config, std::move(*client), &root_);
    communicator_->Start();
    hook_ = communicator_->hooks().at(0);
  }

  void TearDown() override {
    if (communicator_ != nullptr) communicator_->Stop();
  }

  // One step of trainer thread t, as the executor runs it: the ops' pushes between the hooks.
  void Step(int t, int step) {
    const framework::StepInfo info{t, kThreads, step, &root_};
    hook_->BeforeStep(info);
    std::vector<float> rows(kKeys.size() * kRowDim);
    for (uint64_t i = 0; i < rows.size(); ++i) rows[i] = Grad(t, step, i);
    communicator_->PushSparse(t, kSparse, kKeys, rows);
    LoDTensor grad;
    grad.Resize({static_cast<int64_t>(kDenseDim)});
    float* g = grad.mutable_data<float>();
    for (uint64_t i = 0; i < kDenseDim; ++i) g[i] = Grad(t, step, i);
    communicator_->SendDense(t, {&grad});
    hook_->AfterStep(info);
  }

  std::vector<std::unique_ptr<ps::PsServer>> servers_;
  Scope root_;
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<framework::StepHook> hook_;
};

TEST_P(StepMergeFinishedThreadTest, StepsAfterAThreadEndedDivideByEveryThread) {
  hook_->OnPassBegin(framework::PassInfo{kThreads, /*dataset_pass=*/true});
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int steps = t == 0 ? kStepsTogether + kStepsAlone : kStepsTogether;
      for (int step = 0; step < steps; ++step) Step(t, step);
      hook_->OnThreadEnd(t);
    });
  }
  for (auto& thread : threads) thread.join();
  hook_->OnPassEnd();

  // Every step, the ones thread 0 took alone included, subtracts rate x (the gradients its
  // threads pushed, summed) / kThreads; the one worker's push is the servers' whole step.
  std::vector<float> dense_expected(kDenseDim, kStart);
  std::vector<float> rows_expected(2 * kRowDim, 0.0f);  // keys 5 and 17
  for (int step = 0; step < kStepsTogether + kStepsAlone; ++step) {
    const int pushing = step < kStepsTogether ? kThreads : 1;
    for (int t = 0; t < pushing; ++t) {
      for (uint64_t i = 0; i < kDenseDim; ++i) {
        dense_expected[i] -= kRate * Grad(t, step, i) / static_cast<float>(kThreads);
      }
      for (uint64_t i = 0; i < kKeys.size() * kRowDim; ++i) {
        const size_t row = kKeys[i / kRowDim] == 5 ? 0 : 1;
        rows_expected[row * kRowDim + i % kRowDim] -=
            kRate * Grad(t, step, i) / static_cast<float>(kThreads);
      }
    }
  }
  ps::PsClient& client = communicator_->client();
  std::vector<float> dense(kDenseDim);
  ASSERT_TRUE(client.PullDense(kDense, absl::MakeSpan(dense)).Wait().ok());
  EXPECT_EQ(dense, dense_expected);
  // The worker's own copy, refreshed after its last step.
  const float* w = root_.FindVar("w")->Get<LoDTensor>().data<float>();
  EXPECT_EQ(std::vector<float>(w, w + kDenseDim), dense_expected);
  std::vector<float> rows(2 * kRowDim);
  const std::vector<int64_t> keys = {5, 17};
  ASSERT_TRUE(client.PullSparse(kSparse, keys, absl::MakeSpan(rows)).Wait().ok());
  EXPECT_EQ(rows, rows_expected);
}

INSTANTIATE_TEST_SUITE_P(SyncAndHalfAsync, StepMergeFinishedThreadTest,
                         testing::Values(PsMode::kSync, PsMode::kHalfAsync),
                         [](const testing::TestParamInfo<PsMode>& info) {
                           return std::string(PsModeName(info.param));
                         });

}  // namespace
}  // namespace fleet::distributed
