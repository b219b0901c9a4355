// GEO's dense exchange in one round trip: PsClient::PushPullDense with PushKind::kDelta adds the
// deltas on the servers and brings back the values after them. Against real servers on loopback,
// over the wire and through shared memory, with one and two servers: the same values bit for bit
// as the two calls it replaces (a delta push, then a pull), other workers' deltas included, and
// the kinds that leave no values to return refused by the client and by the server.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fleet/ps/ps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 5;
constexpr uint64_t kDim = 5000;  // blocks of 1024 floats dealt over the servers
constexpr float kStart = 1.0f;

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A worker's deltas at an exchange: small, of both signs, different at every step.
std::vector<float> DeltasOf(int worker, int step) {
  std::vector<float> deltas(kDim);
  for (uint64_t i = 0; i < kDim; ++i) {
    deltas[i] = static_cast<float>(static_cast<int>((i * 7 + step * 3 + worker) % 13) - 6) / 64.f;
  }
  return deltas;
}

// Two jobs of the same servers and table: the two-call job's workers push deltas then pull; the
// one-call job's push-pull. Parameters: the number of servers, and whether the workers share
// memory with them (the default local transport) or stay on the wire.
class DeltaPushPullTest : public testing::TestWithParam<std::tuple<uint32_t, bool>> {
 protected:
  void SetUp() override {
    const auto [num_servers, shared_memory] = GetParam();
    const auto configs = testing_servers::ServersOfOneSgdDenseTable(num_servers, kTable, "dense",
                                                                    kDim, 0.5f, kStart);
    jobs_.Start(configs, /*workers=*/2, shared_memory);
  }

  testing_servers::TwoCallAndOneCallJobs jobs_;
};

TEST_P(DeltaPushPullTest, ReturnsBitForBitWhatADeltaPushThenAPullReturn) {
  std::vector<float> previous(kDim, kStart);
  for (int step = 0; step < 6; ++step) {
    const std::vector<float> deltas = DeltasOf(0, step);
    std::vector<float> pulled(kDim, -1.f), returned(kDim, -2.f);
    ASSERT_TRUE(jobs_.two_call[0]->PushDense(kTable, deltas, PushKind::kDelta).Wait().ok());
    ASSERT_TRUE(jobs_.two_call[0]->PullDense(kTable, absl::MakeSpan(pulled)).Wait().ok());
    ASSERT_TRUE(jobs_.one_call[0]
                    ->PushPullDense(kTable, deltas, absl::MakeSpan(returned), PushKind::kDelta)
                    .Wait()
                    .ok());
    ASSERT_TRUE(BitEqual(returned, pulled)) << "step " << step;
    // Added as they are (not through the table's SGD rule), on every block of every server.
    for (uint64_t i = 0; i < kDim; ++i) {
      ASSERT_EQ(returned[i], previous[i] + deltas[i]) << "step " << step << ", float " << i;
    }
    previous = returned;
  }
}

TEST_P(DeltaPushPullTest, TheValuesCarryTheOtherWorkersDeltasPushedBefore) {
  // Worker 1 exchanges first, then worker 0, in a fixed order: worker 0's one round trip
  // returns what its push then pull would, worker 1's deltas included.
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> first = DeltasOf(1, step), second = DeltasOf(0, step);
    std::vector<float> pulled(kDim, -1.f), returned(kDim, -2.f), returned_first(kDim, -3.f);
    ASSERT_TRUE(jobs_.two_call[1]->PushDense(kTable, first, PushKind::kDelta).Wait().ok());
    ASSERT_TRUE(jobs_.two_call[0]->PushDense(kTable, second, PushKind::kDelta).Wait().ok());
    ASSERT_TRUE(jobs_.two_call[0]->PullDense(kTable, absl::MakeSpan(pulled)).Wait().ok());
    ASSERT_TRUE(jobs_.one_call[1]
                    ->PushPullDense(kTable, first, absl::MakeSpan(returned_first), PushKind::kDelta)
                    .Wait()
                    .ok());
    ASSERT_TRUE(jobs_.one_call[0]
                    ->PushPullDense(kTable, second, absl::MakeSpan(returned), PushKind::kDelta)
                    .Wait()
                    .ok());
    ASSERT_TRUE(BitEqual(returned, pulled)) << "step " << step;
    for (uint64_t i = 0; i < kDim; ++i) {
      ASSERT_EQ(returned[i], returned_first[i] + second[i]) << "step " << step << ", float " << i;
    }
  }
}

TEST_P(DeltaPushPullTest, KindsThatLeaveNoValuesAreRefusedBeforeAnythingIsPushed) {
  const std::vector<float> deltas = DeltasOf(0, 0);
  std::vector<float> out(kDim, -1.f);
  for (PushKind kind : {PushKind::kAccumulate, PushKind::kInitialize}) {
    const absl::Status status =
        jobs_.one_call[0]->PushPullDense(kTable, deltas, absl::MakeSpan(out), kind).Wait();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("PushPullDense of table 5"), std::string::npos) << status;
  }
  std::vector<float> pulled(kDim);
  ASSERT_TRUE(jobs_.one_call[0]->PullDense(kTable, absl::MakeSpan(pulled)).Wait().ok());
  EXPECT_EQ(pulled, std::vector<float>(kDim, kStart));
}

INSTANTIATE_TEST_SUITE_P(ServersAndTransport, DeltaPushPullTest,
                         testing::Combine(testing::Values(1u, 2u), testing::Bool()));

TEST(DeltaPushPull, TheServerReturnsValuesForDeltasButNotForAnInitialOrAccumulatedPush) {
  std::vector<std::unique_ptr<PsServer>> servers;
  ClientOptions options;
  testing_servers::StartServers(
      testing_servers::ServersOfOneSgdDenseTable(1, kTable, "dense", kDim, 0.5f, kStart), &servers,
      &options);
  if (testing::Test::HasFatalFailure()) return;
  auto stub = proto::PsService::NewStub(
      grpc::CreateChannel(options.endpoints[0], grpc::InsecureChannelCredentials()));
  const std::vector<float> deltas(kDim, 0.25f);
  proto::PushDenseRequest push;
  push.set_table_id(kTable);
  push.set_grads(deltas.data(), kDim * sizeof(float));
  push.set_return_values(true);
  for (int refused = 0; refused < 2; ++refused) {
    push.set_initialize(refused == 0);
    push.set_accumulate(refused == 1);
    proto::PushReply reply;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->PushDense(&context, push, &reply).ok());
    EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(reply.status().message().find("not with initialize or accumulate"), std::string::npos)
        << reply.status().message();
    EXPECT_TRUE(reply.values().empty());
  }
  push.set_initialize(false);
  push.set_accumulate(false);
  push.set_is_delta(true);
  proto::PushReply reply;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->PushDense(&context, push, &reply).ok());
  ASSERT_EQ(reply.status().code(), 0) << reply.status().message();
  ASSERT_EQ(reply.values().size(), kDim * sizeof(float));
  std::vector<float> returned(kDim);
  std::memcpy(returned.data(), reply.values().data(), kDim * sizeof(float));
  EXPECT_EQ(returned, std::vector<float>(kDim, kStart + 0.25f));
}

}  // namespace
}  // namespace fleet::ps
