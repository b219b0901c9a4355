// The sync step's dense values through the memory a worker shares with the servers of its host
// (BarrierRequest.shm_segment): two workers' steps against real servers on loopback, once on the
// wire and once through shared memory, return the same values bit for bit, and the server refuses
// a range outside the segment or a segment it never attached, naming them.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fleet/ps/ps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/detail/shm_segment.h"
#include "ps/rpc_meter.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"
#include "ps_shm_testing.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 3;
constexpr uint64_t kDim = 5000;  // blocks of 1024 floats dealt over the servers
constexpr uint32_t kWorkers = 2;
constexpr int kSteps = 8;
constexpr absl::Duration kStepTimeout = absl::Seconds(60);

// Gradients that round differently in every step (not exact in float), so that any difference
// in what a step applies or returns shows in the bits.
float Grad(uint32_t worker, int step, uint64_t i) {
  return static_cast<float>((i * 7 + 3 * worker + 5 * static_cast<uint64_t>(step)) % 11) / 3.0f +
         0.1f * static_cast<float>(worker);
}

// One job: servers, and a client per worker.
struct Job {
  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::unique_ptr<PsClient>> workers;
};

// Starts `num_servers` servers of one SGD dense table and kWorkers clients; with `shm` the clients
// share memory with the servers (all on 127.0.0.1).
void StartJob(uint32_t num_servers, bool shm, Job* job) {
  ClientOptions options;
  testing_servers::StartServers(
      testing_servers::ServersOfOneSgdDenseTable(num_servers, kTable, "dense", kDim, 0.25f, 1.0f),
      &job->servers, &options);
  if (testing::Test::HasFatalFailure()) return;
  if (shm) {
    options.local_host = "127.0.0.1";
    options.local_shared_memory = true;
    options.local_socket = false;  // the servers have no Unix socket
  }
  for (uint32_t w = 0; w < kWorkers; ++w) {
    auto client = PsClient::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    for (uint32_t s = 0; s < num_servers; ++s) {
      ASSERT_EQ((*client)->shared_memory(s), shm) << "worker " << w << ", server " << s;
    }
    job->workers.push_back(std::move(*client));
  }
}

// Worker w's kSteps steps, as a sync worker makes them: its accumulate push and the step in
// flight together; (*returned)[step] holds the values the step brought back.
void Train(PsClient* client, uint32_t w, std::vector<std::vector<float>>* returned,
           absl::Status* status) {
  std::vector<float> grads(kDim);
  for (int step = 0; step < kSteps; ++step) {
    for (uint64_t i = 0; i < kDim; ++i) grads[i] = Grad(w, step, i);
    Future push = client->PushDense(kTable, grads, PushKind::kAccumulate);
    (*returned)[step].assign(kDim, -1.0f);
    auto done = client->SyncStepAndPullDense(kWorkers, w, kStepTimeout, kTable,
                                             absl::MakeSpan((*returned)[step]), {&push, 1});
    if (!done.ok()) {
      *status = done.status();
      return;
    }
  }
}

// Every worker's returned values of every step, [worker][step][float].
std::vector<std::vector<std::vector<float>>> TrainJob(Job* job) {
  std::vector<std::vector<std::vector<float>>> returned(kWorkers,
                                                        std::vector<std::vector<float>>(kSteps));
  std::vector<absl::Status> statuses(kWorkers);
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back(Train, job->workers[w].get(), w, &returned[w], &statuses[w]);
  }
  for (auto& thread : threads) thread.join();
  for (uint32_t w = 0; w < kWorkers; ++w) EXPECT_TRUE(statuses[w].ok()) << statuses[w];
  return returned;
}

uint64_t BarrierBytesReceived(const PsClient& client) {
  return client.rpc_meter().Snapshot().kinds[static_cast<int>(RpcKind::kBarrier)].bytes_received;
}

class ShmSyncStepTest : public testing::TestWithParam<uint32_t> {};

TEST_P(ShmSyncStepTest, StepsThroughSharedMemoryReturnTheValuesOfTheWireBitForBit) {
  Job wire, shm;
  StartJob(GetParam(), /*shm=*/false, &wire);
  if (HasFatalFailure()) return;
  StartJob(GetParam(), /*shm=*/true, &shm);
  if (HasFatalFailure()) return;
  const auto from_wire = TrainJob(&wire);
  const auto from_shm = TrainJob(&shm);
  for (uint32_t w = 0; w < kWorkers; ++w) {
    for (int step = 0; step < kSteps; ++step) {
      ASSERT_EQ(from_shm[w][step].size(), kDim);
      ASSERT_EQ(
          0, std::memcmp(from_wire[w][step].data(), from_shm[w][step].data(), kDim * sizeof(float)))
          << "worker " << w << ", step " << step;
      // Both workers see the same table after a step, and every step changes it.
      ASSERT_EQ(
          0, std::memcmp(from_shm[0][step].data(), from_shm[w][step].data(), kDim * sizeof(float)))
          << "worker " << w << ", step " << step;
      const std::vector<float>& before =
          step == 0 ? std::vector<float>(kDim, 1.0f) : from_shm[w][step - 1];
      EXPECT_NE(from_shm[w][step], before) << "worker " << w << ", step " << step;
    }
  }
  // The table the steps left, pulled on its own, is the last step's.
  std::vector<float> pulled(kDim);
  ASSERT_TRUE(shm.workers[0]->PullDense(kTable, absl::MakeSpan(pulled)).Wait().ok());
  EXPECT_EQ(0, std::memcmp(pulled.data(), from_shm[0][kSteps - 1].data(), kDim * sizeof(float)));
  // The values came through the segment: the shared-memory steps' replies together hold fewer
  // bytes than one step's values, the wire's hold every step's.
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EXPECT_LT(BarrierBytesReceived(*shm.workers[w]), kDim * sizeof(float)) << "worker " << w;
    EXPECT_GE(BarrierBytesReceived(*wire.workers[w]), kSteps * kDim * sizeof(float))
        << "worker " << w;
  }
}

INSTANTIATE_TEST_SUITE_P(Servers, ShmSyncStepTest, testing::Values(1u, 2u));

// A one-worker sync step with pull_dense through `segment_id`, `offset` and `length`.
proto::BarrierReply StepThroughSegment(proto::PsService::Stub* stub, uint64_t segment_id,
                                       uint64_t offset, uint64_t length) {
  proto::BarrierRequest request;
  request.set_name("__sync_step__");
  request.set_num_workers(1);
  request.set_worker_id(0);
  request.set_timeout_ms(60000);
  request.set_apply_accumulated(true);
  request.set_pull_dense(true);
  request.set_pull_dense_table(kTable);
  request.set_shm_segment(segment_id);
  request.mutable_shm_values()->set_offset(offset);
  request.mutable_shm_values()->set_length(length);
  proto::BarrierReply reply;
  grpc::ClientContext context;
  const grpc::Status transport = stub->Barrier(&context, request, &reply);
  EXPECT_TRUE(transport.ok()) << transport.error_message();
  return reply;
}

TEST(ShmSyncStep, TheServerRefusesARangeOutsideTheSegmentOrAnUnknownSegmentNamingThem) {
  std::vector<std::unique_ptr<PsServer>> servers;
  ClientOptions options;
  testing_servers::StartServers(
      testing_servers::ServersOfOneSgdDenseTable(1, kTable, "dense", kDim, 0.25f, 1.0f), &servers,
      &options);
  if (testing::Test::HasFatalFailure()) return;
  auto stub = proto::PsService::NewStub(
      grpc::CreateChannel(options.endpoints[0], grpc::InsecureChannelCredentials()));
  const uint64_t bytes = kDim * sizeof(float);
  auto segment = detail::ShmSegment::Create(2 * bytes);
  ASSERT_TRUE(segment.ok()) << segment.status();
  proto::AttachSegmentReply attached;
  ASSERT_TRUE(testing_shm::AttachRaw(stub.get(), **segment, &attached).ok());
  ASSERT_EQ(attached.status().code(), 0) << attached.status().message();

  // Runs 4 bytes past the end.
  proto::BarrierReply reply =
      StepThroughSegment(stub.get(), attached.segment_id(), bytes + 4, bytes);
  EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.status().message().find(absl::StrCat("Barrier shm_values: bytes [", bytes + 4)),
            std::string::npos)
      << reply.status().message();
  EXPECT_NE(reply.status().message().find("fleet-ps-" + (*segment)->token()), std::string::npos)
      << reply.status().message();
  EXPECT_TRUE(reply.values().empty());

  // In bounds, but not the table's size.
  reply = StepThroughSegment(stub.get(), attached.segment_id(), 0, bytes - 4);
  EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.status().message().find(absl::StrCat("the table ", kDim, " on this server")),
            std::string::npos)
      << reply.status().message();

  // A segment id the server never gave.
  reply = StepThroughSegment(stub.get(), attached.segment_id() + 100, 0, bytes);
  EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.status().message().find("is not attached"), std::string::npos)
      << reply.status().message();

  // A good range: the values land in the segment, none in the reply.
  std::memset((*segment)->data() + bytes, 0xff, bytes);
  reply = StepThroughSegment(stub.get(), attached.segment_id(), bytes, bytes);
  EXPECT_EQ(reply.status().code(), 0) << reply.status().message();
  EXPECT_TRUE(reply.values().empty());
  std::vector<float> landed(kDim);
  std::memcpy(landed.data(), (*segment)->data() + bytes, bytes);
  EXPECT_EQ(landed, std::vector<float>(kDim, 1.0f));
}

}  // namespace
}  // namespace fleet::ps
