// Sync training's round applied on several threads (ServerOptions.round_threads,
// detail/round_pool.h) against one thread: two jobs, each of two real servers on loopback and two
// workers, take the same sync steps with Adam on a dense table of several blocks per server and
// on two sparse tables (pushed in parts of whole shards); every step's dense values and the final
// rows must be equal bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kDense = 1;
constexpr uint32_t kSparseA = 2;
constexpr uint32_t kSparseB = 3;
constexpr uint64_t kDenseDim = 20000;  // 20 blocks of 1024: 10 on each server
constexpr uint64_t kRowDim = 8;
constexpr uint32_t kServers = 2;
constexpr uint32_t kWorkers = 2;
constexpr int kSteps = 6;
constexpr int kKeysPerStep = 2000;  // a round: ~1,050 keys a server, pushed in parts
constexpr absl::Duration kStepTimeout = absl::Seconds(60);

// One job: its servers (applying rounds on `round_threads` threads) and a client per worker.
struct Job {
  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::unique_ptr<PsClient>> clients;
};

void StartJob(int round_threads, Job* job) {
  ClientOptions options;
  for (uint32_t i = 0; i < kServers; ++i) {
    ServerOptions server_options;
    server_options.config.set_server_index(i);
    server_options.config.set_num_servers(kServers);
    testing_servers::AddAdamTable(&server_options.config, kDense, proto::DENSE, kDenseDim);
    testing_servers::AddAdamTable(&server_options.config, kSparseA, proto::SPARSE, kRowDim);
    testing_servers::AddAdamTable(&server_options.config, kSparseB, proto::SPARSE, kRowDim);
    server_options.round_threads = round_threads;
    auto server = PsServer::Start(server_options);
    ASSERT_TRUE(server.ok()) << server.status();
    options.endpoints.push_back((*server)->endpoint());
    job->servers.push_back(std::move(*server));
  }
  for (uint32_t w = 0; w < kWorkers; ++w) {
    auto client = PsClient::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    job->clients.push_back(std::move(*client));
  }
}

// The keys worker w pushes at `step`: a window that overlaps the other worker's, so that some
// rows sum two gradients, and moves on each step, so that rows are created during the rounds.
std::vector<int64_t> Keys(uint32_t w, int step) {
  std::vector<int64_t> keys(kKeysPerStep);
  for (int i = 0; i < kKeysPerStep; ++i) keys[i] = 40 * step + 100 * w + i;
  return keys;
}

std::vector<float> Gradients(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> grads(n);
  for (float& g : grads) g = uniform(rng);
  return grads;
}

// Runs every worker's steps; returns each worker's dense values after each step, then the
// final rows of every key pushed (table A, then table B).
std::vector<std::vector<float>> RunSteps(Job& job) {
  std::vector<std::vector<float>> values(kWorkers * kSteps, std::vector<float>(kDenseDim));
  std::vector<absl::Status> statuses(kWorkers);
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      PsClient& client = *job.clients[w];
      for (int step = 0; step < kSteps && statuses[w].ok(); ++step) {
        const uint32_t seed = 1000 * w + 10 * step;
        const std::vector<float> dense = Gradients(kDenseDim, seed);
        const std::vector<int64_t> keys = Keys(w, step);
        const std::vector<float> rows_a = Gradients(keys.size() * kRowDim, seed + 1);
        const std::vector<float> rows_b = Gradients(keys.size() * kRowDim, seed + 2);
        const std::vector<Future> pushes = {
            client.PushDense(kDense, dense, PushKind::kAccumulate),
            client.PushSparse(kSparseA, keys, rows_a, PushKind::kAccumulate),
            client.PushSparse(kSparseB, keys, rows_b, PushKind::kAccumulate)};
        auto stepped = client.SyncStepAndPullDense(
            kWorkers, w, kStepTimeout, kDense, absl::MakeSpan(values[w * kSteps + step]), pushes);
        statuses[w] = stepped.status();
      }
    });
  }
  for (auto& worker : workers) worker.join();
  for (uint32_t w = 0; w < kWorkers; ++w) EXPECT_TRUE(statuses[w].ok()) << statuses[w];
  std::vector<int64_t> all_keys;
  for (int64_t key = 0; key < 40 * kSteps + 100 * kWorkers + kKeysPerStep; ++key) {
    all_keys.push_back(key);
  }
  for (uint32_t table : {kSparseA, kSparseB}) {
    std::vector<float> rows(all_keys.size() * kRowDim);
    EXPECT_TRUE(job.clients[0]->PullSparse(table, all_keys, absl::MakeSpan(rows)).Wait().ok());
    values.push_back(std::move(rows));
  }
  return values;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(SyncRoundThreadsTest, SeveralThreadsApplyTheRoundBitForBitAsOne) {
  Job one_thread;
  ASSERT_NO_FATAL_FAILURE(StartJob(1, &one_thread));
  const std::vector<std::vector<float>> expected = RunSteps(one_thread);
  ASSERT_FALSE(testing::Test::HasFailure());
  // The steps did change the table: Adam moved every value away from its start.
  for (const float v : expected[kSteps - 1]) ASSERT_NE(v, 0.5f);

  for (const int threads : {2, 3}) {
    Job job;
    ASSERT_NO_FATAL_FAILURE(StartJob(threads, &job));
    const std::vector<std::vector<float>> got = RunSteps(job);
    ASSERT_FALSE(testing::Test::HasFailure());
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(SameBits(got[i], expected[i]))
          << "round_threads " << threads << ": "
          << (i < kWorkers * kSteps
                  ? "dense values of worker " + std::to_string(i / kSteps) + " after step " +
                        std::to_string(i % kSteps)
                  : "rows of sparse table " + std::to_string(i - kWorkers * kSteps))
          << " differ from one thread's";
    }
  }
}

}  // namespace
}  // namespace fleet::ps
