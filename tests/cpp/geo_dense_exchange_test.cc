// GEO's exchange of dense parameters against real loopback servers, over the wire and through
// the memory shared with the servers (where the deltas are written into the push's slots and the
// rebase reads the fresh values where the servers left them): two workers' parameters after each
// exchange are the same bit for bit either way, and equal to the exchange's arithmetic done here
// (delta = (param - synced) / workers added on the server, param = fresh + (param - synced)).
// Two dense variables cut the table's blocks, and with two servers the servers' shares.

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
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

constexpr uint32_t kTable = 2;
constexpr uint64_t kFirst = 1500;  // "a": inside block 1
constexpr uint64_t kDim = 5000;    // "b": the rest, 5 blocks of 1024 in all (the last one short)
constexpr int kWorkers = 2;

// One job: its servers and each worker's root scope and GEO communicator.
struct GeoJob {
  std::vector<std::unique_ptr<ps::PsServer>> servers;
  Scope roots[kWorkers];
  std::shared_ptr<Communicator> workers[kWorkers];
};

// What worker `w` trains into its parameters before exchange `round`: a different change per
// element, round and worker.
float Change(int w, int round, uint64_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + round * 3 + w * 5) % 23) - 11) / 64.0f;
}

class GeoDenseExchangeTest : public testing::TestWithParam<uint32_t> {
 protected:
  // Starts `job`'s servers and its two workers (their start-up meets at a barrier), the clients
  // on the wire or sharing memory with the servers.
  void StartJob(GeoJob* job, bool shared_memory) {
    ps::ClientOptions options;
    ps::testing_servers::StartServers(ps::testing_servers::ServersOfOneSgdDenseTable(
                                          GetParam(), kTable, "dense", kDim, 0.5f, 0.0f),
                                      &job->servers, &options);
    ASSERT_FALSE(HasFatalFailure());
    if (shared_memory) {
      options.local_host = "127.0.0.1";
      options.local_shared_memory = true;
      options.local_socket = false;
    }
    for (int w = 0; w < kWorkers; ++w) {
      // The same start values in both workers (worker 0's initialise the table).
      for (auto [name, numel] : {std::pair{"a", kFirst}, std::pair{"b", kDim - kFirst}}) {
        LoDTensor* param = job->roots[w].Var(name)->GetMutable<LoDTensor>();
        param->Resize({static_cast<int64_t>(numel)});
        float* values = param->mutable_data<float>();
        for (uint64_t i = 0; i < numel; ++i) values[i] = static_cast<float>(i % 97) / 16.0f - 3.0f;
      }
      auto client = ps::PsClient::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      if (shared_memory) {
        for (uint32_t s = 0; s < GetParam(); ++s) ASSERT_TRUE((*client)->shared_memory(s));
      }
      CommunicatorConfig config;
      config.mode = PsMode::kGeo;
      config.worker_id = w;
      config.num_workers = kWorkers;
      config.dense_table_id = kTable;
      config.dense = {DenseVar{"a", "a@GRAD", 0, kFirst},
                      DenseVar{"b", "b@GRAD", kFirst, kDim - kFirst}};
      config.geo_steps = 1000;  // the test exchanges with Flush only
      config.prefetch_sparse = false;
      config.step_timeout = absl::Seconds(60);
      job->workers[w] = MakeCommunicator(config, std::move(*client), &job->roots[w]);
    }
    std::thread second([&] { job->workers[1]->Start(); });
    job->workers[0]->Start();
    second.join();
  }

  // Worker `w`'s dense parameters, packed.
  static std::vector<float> Packed(GeoJob& job, int w) {
    std::vector<float> packed(kDim);
    const LoDTensor& a = job.roots[w].FindVar("a")->Get<LoDTensor>();
    const LoDTensor& b = job.roots[w].FindVar("b")->Get<LoDTensor>();
    std::memcpy(packed.data(), a.data<float>(), kFirst * sizeof(float));
    std::memcpy(packed.data() + kFirst, b.data<float>(), (kDim - kFirst) * sizeof(float));
    return packed;
  }

  static void Train(GeoJob& job, int w, int round) {
    float* a = job.roots[w].FindVar("a")->GetMutable<LoDTensor>()->mutable_data<float>();
    float* b = job.roots[w].FindVar("b")->GetMutable<LoDTensor>()->mutable_data<float>();
    for (uint64_t i = 0; i < kDim; ++i) {
      float& value = i < kFirst ? a[i] : b[i - kFirst];
      value += Change(w, round, i);
    }
  }
};

TEST_P(GeoDenseExchangeTest, ExchangesThroughSharedMemoryGiveTheValuesOfTheWireBitForBit) {
  GeoJob wire, shm;
  ASSERT_NO_FATAL_FAILURE(StartJob(&wire, false));
  ASSERT_NO_FATAL_FAILURE(StartJob(&shm, true));
  // The exchange's arithmetic, done here: the server's values and each worker's.
  std::vector<float> server = Packed(wire, 0);
  std::vector<float> params[kWorkers] = {server, server};
  std::vector<float> synced[kWorkers] = {server, server};
  const float scale = 1.0f / kWorkers;
  // The workers take turns, and worker 0 exchanges twice in a row once (its second exchange
  // then carries only what it trained since).
  const int order[] = {0, 1, 1, 0, 0, 1, 0, 1};
  for (int round = 0; round < static_cast<int>(std::size(order)); ++round) {
    const int w = order[round];
    for (GeoJob* job : {&wire, &shm}) {
      Train(*job, w, round);
      job->workers[w]->Flush();
    }
    for (uint64_t i = 0; i < kDim; ++i) {
      params[w][i] += Change(w, round, i);
      const float delta = scale * (params[w][i] - synced[w][i]);
      synced[w][i] = params[w][i];
      server[i] += delta;
      params[w][i] = server[i] + (params[w][i] - synced[w][i]);
      synced[w][i] = server[i];
    }
    for (int v = 0; v < kWorkers; ++v) {
      const std::vector<float> from_wire = Packed(wire, v), from_shm = Packed(shm, v);
      ASSERT_EQ(0, std::memcmp(from_wire.data(), from_shm.data(), kDim * sizeof(float)))
          << "round " << round << ", worker " << v;
      ASSERT_EQ(0, std::memcmp(params[v].data(), from_shm.data(), kDim * sizeof(float)))
          << "round " << round << ", worker " << v;
    }
  }
  ASSERT_NE(params[0], params[1]) << "worker 1 has not seen worker 0's last exchange";
  for (GeoJob* job : {&wire, &shm}) {
    for (auto& worker : job->workers) worker->Stop();
  }
}

INSTANTIATE_TEST_SUITE_P(Servers, GeoDenseExchangeTest, testing::Values(1u, 2u));

}  // namespace
}  // namespace fleet::distributed
