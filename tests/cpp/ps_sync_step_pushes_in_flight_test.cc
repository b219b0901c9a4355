// A sync step whose accumulate pushes and barrier travel together, against two real servers on
// loopback: the workers send their pushes (sparse split into several requests per server, and
// dense) and then the step's barrier without waiting for the pushes' replies; the barrier
// announces the pushes (BarrierRequest.accumulate_pushes) and each server arrives only once they
// are in, so every step's update holds both workers' gradients, however the server's threads
// order the handlers. A barrier whose announced pushes never come fails at its deadline, naming
// the counts.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fleet/ps/ps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kDense = 7;   // 5000 floats in blocks of 1024: both servers hold blocks
constexpr uint32_t kSparse = 9;  // rows of kRowDim
constexpr uint64_t kDenseDim = 5000;
constexpr uint64_t kRowDim = 4;
constexpr int64_t kKeys = 300;  // worker w pushes keys [w * 100, w * 100 + 200): 100 shared
constexpr float kRate = 0.5f;
constexpr float kStart = 2.0f;
constexpr uint32_t kWorkers = 2;
constexpr int kSteps = 12;
constexpr absl::Duration kStepTimeout = absl::Seconds(60);

proto::ServerConfig ConfigOf(uint32_t index) {
  proto::ServerConfig config;
  config.set_server_index(index);
  config.set_num_servers(2);
  testing_servers::AddSgdDenseTable(&config, kDense, "dense", kDenseDim, kRate, kStart);
  testing_servers::AddSgdSparseTable(&config, kSparse, "rows", kRowDim, kRate);
  return config;
}

// Small integers: every sum, mean and SGD step below is exact in float, in any order.
float DenseGrad(uint32_t worker, int step, uint64_t i) {
  return static_cast<float>((i + 3 * worker + 5 * static_cast<uint64_t>(step)) % 7);
}
float RowGrad(uint32_t worker, int step, int64_t key, uint64_t j) {
  return static_cast<float>((key + static_cast<int64_t>(j) + worker + step) % 5);
}
int64_t FirstKeyOf(uint32_t worker) { return static_cast<int64_t>(worker) * 100; }
constexpr int64_t kKeysPerWorker = 200;

class SyncStepPushesInFlightTest : public testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    testing_servers::StartServers({ConfigOf(0), ConfigOf(1)}, &servers_, &options);
    if (HasFatalFailure()) return;
    endpoint_ = options.endpoints[0];
    options_ = options;
    // Several sparse requests per server and step, so that a step announces more than one push
    // to a server.
    options.max_keys_per_request = 16;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      auto client = PsClient::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      clients_.push_back(std::move(*client));
    }
  }

  // Worker w's steps: both pushes, then the step, then the pushes' outcomes; `returned[s]` is
  // the dense table step s brought back.
  void Train(uint32_t w, std::vector<std::vector<float>>* returned, absl::Status* status) {
    std::vector<int64_t> keys(kKeysPerWorker);
    for (int64_t k = 0; k < kKeysPerWorker; ++k) keys[k] = FirstKeyOf(w) + k;
    std::vector<float> rows(keys.size() * kRowDim);
    std::vector<float> dense(kDenseDim);
    for (int step = 0; step < kSteps; ++step) {
      for (size_t k = 0; k < keys.size(); ++k) {
        for (uint64_t j = 0; j < kRowDim; ++j) rows[k * kRowDim + j] = RowGrad(w, step, keys[k], j);
      }
      for (uint64_t i = 0; i < kDenseDim; ++i) dense[i] = DenseGrad(w, step, i);
      Future sparse = clients_[w]->PushSparse(kSparse, keys, rows, PushKind::kAccumulate);
      Future dense_push = clients_[w]->PushDense(kDense, dense, PushKind::kAccumulate);
      (*returned)[step].assign(kDenseDim, -1.0f);
      auto done = clients_[w]->SyncStepAndPullDense(kWorkers, w, kStepTimeout, kDense,
                                                    absl::MakeSpan((*returned)[step]));
      for (const Future* push : {&sparse, &dense_push}) {
        absl::Status pushed = push->Wait();
        if (!pushed.ok()) {
          *status = pushed;
          return;
        }
      }
      if (!done.ok()) {
        *status = done.status();
        return;
      }
    }
  }

  // Both workers trained kSteps steps (Train), and the tables hold exactly what one process
  // makes of both workers' batches.
  void ExpectTrainedExactly(const std::vector<std::vector<std::vector<float>>>& returned) {
    // Dense: SGD on the mean of the two workers' gradients, step after step; each step's replies
    // hold that step's update (none missing, none late).
    std::vector<float> expected(kDenseDim, kStart);
    for (int step = 0; step < kSteps; ++step) {
      for (uint64_t i = 0; i < kDenseDim; ++i) {
        const float mean = (DenseGrad(0, step, i) + DenseGrad(1, step, i)) * 0.5f;
        expected[i] -= kRate * mean;
      }
      for (uint32_t w = 0; w < kWorkers; ++w) {
        ASSERT_EQ(returned[w][step], expected) << "worker " << w << ", step " << step;
      }
    }
    // Sparse: each key's row got the sum of the gradients of the workers that pushed it, over 2.
    std::vector<int64_t> keys(kKeys);
    for (int64_t k = 0; k < kKeys; ++k) keys[k] = k;
    std::vector<float> pulled(keys.size() * kRowDim);
    ASSERT_TRUE(clients_[0]->PullSparse(kSparse, keys, absl::MakeSpan(pulled)).Wait().ok());
    for (int64_t key = 0; key < kKeys; ++key) {
      for (uint64_t j = 0; j < kRowDim; ++j) {
        float row = 0.0f;
        for (int step = 0; step < kSteps; ++step) {
          float sum = 0.0f;
          for (uint32_t w = 0; w < kWorkers; ++w) {
            if (key >= FirstKeyOf(w) && key < FirstKeyOf(w) + kKeysPerWorker) {
              sum += RowGrad(w, step, key, j);
            }
          }
          row -= kRate * (sum * 0.5f);
        }
        ASSERT_EQ(pulled[key * kRowDim + j], row) << "key " << key << ", float " << j;
      }
    }
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  std::vector<std::unique_ptr<PsClient>> clients_;
  std::string endpoint_;
  ClientOptions options_;
};

TEST_F(SyncStepPushesInFlightTest, EveryStepAppliesBothWorkersPushes) {
  std::vector<std::vector<std::vector<float>>> returned(kWorkers,
                                                        std::vector<std::vector<float>>(kSteps));
  std::vector<absl::Status> statuses(kWorkers);
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] { Train(w, &returned[w], &statuses[w]); });
  }
  for (auto& t : workers) t.join();
  for (uint32_t w = 0; w < kWorkers; ++w) ASSERT_TRUE(statuses[w].ok()) << statuses[w];

  ExpectTrainedExactly(returned);
}

TEST_F(SyncStepPushesInFlightTest, AnnouncedPushesThatNeverComeFailTheArrivalNamingTheCounts) {
  auto stub =
      proto::PsService::NewStub(grpc::CreateChannel(endpoint_, grpc::InsecureChannelCredentials()));
  proto::BarrierRequest request;
  request.set_name("__sync_step__");
  request.set_num_workers(kWorkers);
  request.set_worker_id(0);
  request.set_timeout_ms(300);
  request.set_apply_accumulated(true);
  request.set_accumulate_pushes(3);
  proto::BarrierReply reply;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->Barrier(&context, request, &reply).ok());
  EXPECT_EQ(reply.status().code(), static_cast<int32_t>(absl::StatusCode::kDeadlineExceeded))
      << reply.status().message();
  EXPECT_NE(reply.status().message().find("announced 3 accumulate pushes to this server, 0 "
                                          "reached it"),
            std::string::npos)
      << reply.status().message();
  // The announcement was taken back and nobody arrived: both workers' next step meets, applies
  // their pushes and brings the values back.
  std::vector<std::vector<std::vector<float>>> returned(kWorkers,
                                                        std::vector<std::vector<float>>(kSteps));
  std::vector<absl::Status> statuses(kWorkers);
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] { Train(w, &returned[w], &statuses[w]); });
  }
  for (auto& t : workers) t.join();
  for (uint32_t w = 0; w < kWorkers; ++w) ASSERT_TRUE(statuses[w].ok()) << statuses[w];
  ExpectTrainedExactly(returned);
}

TEST_F(SyncStepPushesInFlightTest, AFailedPushEndsItsStepWithItsOwnErrorInsteadOfTheStepTimeout) {
  // The other worker never arrives: without the push's failure the step would end only at its
  // timeout, with DeadlineExceeded.
  ClientOptions options = options_;
  options.rpc_timeout = absl::Seconds(1);
  auto client = PsClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<float> wrong_size(kDenseDim - 1, 1.0f);
  const std::vector<Future> pushes = {
      (*client)->PushDense(kDense, wrong_size, PushKind::kAccumulate)};
  std::vector<float> out(kDenseDim);
  auto done = (*client)->SyncStepAndPullDense(kWorkers, 0, absl::Seconds(600), kDense,
                                              absl::MakeSpan(out), pushes);
  EXPECT_EQ(done.status().code(), absl::StatusCode::kInvalidArgument) << done.status();
  EXPECT_NE(done.status().message().find("the table has 5000 floats, the push 4999"),
            std::string::npos)
      << done.status();
}

}  // namespace
}  // namespace fleet::ps
