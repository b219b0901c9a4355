// GEO's sparse exchange in one round trip: PsClient::PushPullSparse pushes deltas (or gradients)
// and brings back each key's row after the push. Against real servers on loopback, over the wire
// and through shared memory, with one and two servers and requests split into many pieces: the
// same rows bit for bit as the two calls it replaces (a push, then a pull of the same keys),
// other workers' pushes included; refusals by the client, the server and the table; and a server
// restarted between two exchanges.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fleet/ps/ps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/detail/shm_segment.h"
#include "ps/server/server.h"
#include "ps/table/sparse_table.h"
#include "ps_loopback_servers.h"
#include "ps_shm_testing.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 7;
constexpr uint32_t kDim = 10;  // CTR-DNN's embedding width

proto::TableConfig AdamTable() {
  proto::TableConfig table;
  table.set_table_id(kTable);
  table.set_name("embedding");
  table.set_type(proto::SPARSE);
  table.set_dim(kDim);
  table.mutable_optimizer()->set_learning_rate(0.05f);
  table.mutable_optimizer()->mutable_adam();
  // A pure function of seed and key: two groups of servers create the same rows.
  table.mutable_initializer()->set_seed(11);
  table.mutable_initializer()->mutable_uniform()->set_low(-0.5f);
  table.mutable_initializer()->mutable_uniform()->set_high(0.5f);
  return table;
}

std::vector<proto::ServerConfig> ServersOfOneAdamTable(uint32_t num_servers) {
  std::vector<proto::ServerConfig> configs(num_servers);
  for (uint32_t i = 0; i < num_servers; ++i) {
    configs[i].set_server_index(i);
    configs[i].set_num_servers(num_servers);
    *configs[i].add_tables() = AdamTable();
  }
  return configs;
}

// A worker's keys at an exchange: negative and large ones, some new each time, each once
// (GEO's touched rows) or, with `repeats`, some twice.
std::vector<int64_t> ExchangeKeys(int worker, int step, size_t count, bool repeats) {
  std::vector<int64_t> keys;
  for (size_t i = 0; i < count; ++i) {
    const int64_t k = static_cast<int64_t>(i * 3 + static_cast<size_t>(step * 50 + worker * 7));
    keys.push_back(i % 5 == 0 ? -k : (i % 7 == 0 ? k + (int64_t{1} << 40) : k));
  }
  if (repeats) {
    for (size_t i = 0; i < count; i += 4) keys.push_back(keys[i]);
  }
  return keys;
}

std::vector<float> Values(int worker, int step, size_t count) {
  std::vector<float> values(count * kDim);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(static_cast<int>((i * 13 + step * 5 + worker) % 17) - 8) / 64.f;
  }
  return values;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Two jobs of the same servers and table, each with a client per worker: the two-call job's
// workers push and then pull, the one-call job's push-pull. Parameters: the number of servers,
// whether the workers share memory with them, and the keys per request (64 splits an exchange
// into many requests, more in flight than a segment has slots, so the wire and the segment mix).
class SparsePushPullTest : public testing::TestWithParam<std::tuple<uint32_t, bool, size_t>> {
 protected:
  void SetUp() override {
    const auto [num_servers, shared_memory, max_keys] = GetParam();
    const auto configs = ServersOfOneAdamTable(num_servers);
    jobs_.Start(configs, /*workers=*/2, shared_memory, max_keys);
  }

  // Worker w's push of `kind` then pull in the two-call job, its push-pull in the other; both
  // must bring back the same rows bit for bit.
  void ExpectSameRows(int w, const std::vector<int64_t>& keys, const std::vector<float>& values,
                      PushKind kind, const std::string& when) {
    std::vector<float> pulled(keys.size() * kDim, -1.f), returned(keys.size() * kDim, -2.f);
    ASSERT_TRUE(jobs_.two_call[w]->PushSparse(kTable, keys, values, kind).Wait().ok()) << when;
    ASSERT_TRUE(jobs_.two_call[w]->PullSparse(kTable, keys, absl::MakeSpan(pulled)).Wait().ok())
        << when;
    const absl::Status status =
        jobs_.one_call[w]
            ->PushPullSparse(kTable, keys, values, absl::MakeSpan(returned), kind)
            .Wait();
    ASSERT_TRUE(status.ok()) << when << ": " << status;
    ASSERT_TRUE(BitEqual(returned, pulled)) << when;
  }

  testing_servers::TwoCallAndOneCallJobs jobs_;
};

TEST_P(SparsePushPullTest, ReturnsBitForBitWhatAPushThenAPullReturn) {
  constexpr size_t kKeys = 700;
  for (int step = 0; step < 5; ++step) {
    for (bool repeats : {false, true}) {
      // Worker 1 exchanges first, then worker 0, in a fixed order: worker 0's rows carry worker
      // 1's deltas on the keys they share.
      for (int w : {1, 0}) {
        const std::vector<int64_t> keys = ExchangeKeys(w, step, kKeys, repeats);
        const std::vector<float> values = Values(w, step, keys.size());
        for (PushKind kind : {PushKind::kDelta, PushKind::kGradient}) {
          ExpectSameRows(w, keys, values, kind,
                         absl::StrCat("step ", step, ", worker ", w, repeats ? ", repeats" : "",
                                      kind == PushKind::kDelta ? ", deltas" : ", gradients"));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(SparsePushPullTest, DeltasAreAddedAsTheyAreAndRepeatsReadTheirKeysRow) {
  const std::vector<int64_t> keys = ExchangeKeys(0, 0, 300, true);
  std::vector<float> before(keys.size() * kDim), after(keys.size() * kDim, -1.f);
  ASSERT_TRUE(jobs_.one_call[0]->PullSparse(kTable, keys, absl::MakeSpan(before)).Wait().ok());
  const std::vector<float> deltas = Values(0, 1, keys.size());
  ASSERT_TRUE(jobs_.one_call[0]
                  ->PushPullSparse(kTable, keys, deltas, absl::MakeSpan(after), PushKind::kDelta)
                  .Wait()
                  .ok());
  // The first 300 keys are distinct; the rest repeat every fourth one, whose deltas are summed.
  for (size_t i = 0; i < 300; ++i) {
    for (uint32_t k = 0; k < kDim; ++k) {
      float expected = before[i * kDim + k] + deltas[i * kDim + k];
      if (i % 4 == 0) {
        const size_t repeat = 300 + i / 4;
        expected = before[i * kDim + k] + (deltas[i * kDim + k] + deltas[repeat * kDim + k]);
        ASSERT_EQ(after[repeat * kDim + k], after[i * kDim + k]) << "key " << keys[i];
      }
      ASSERT_EQ(after[i * kDim + k], expected) << "key " << keys[i] << ", float " << k;
    }
  }
}

TEST_P(SparsePushPullTest, TheClientRefusesKindsWithoutValuesAndSpansThatDisagreeWithTheKeys) {
  const std::vector<int64_t> keys = {3, -4, 5};
  const std::vector<float> values = Values(0, 0, keys.size());
  std::vector<float> out(keys.size() * kDim, -1.f);
  for (PushKind kind : {PushKind::kAccumulate, PushKind::kInitialize}) {
    const absl::Status status =
        jobs_.one_call[0]->PushPullSparse(kTable, keys, values, absl::MakeSpan(out), kind).Wait();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("PushPullSparse of table 7"), std::string::npos) << status;
  }
  const std::vector<float> short_values(values.begin(), values.end() - 1);
  absl::Status status =
      jobs_.one_call[0]
          ->PushPullSparse(kTable, keys, short_values, absl::MakeSpan(out), PushKind::kDelta)
          .Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("PushPullSparse of table 7: 3 keys of dim 10 need 30 floats, "
                                  "got 29"),
            std::string::npos)
      << status;
  std::vector<float> short_out(keys.size() * kDim - 1);
  status = jobs_.one_call[0]
               ->PushPullSparse(kTable, keys, values, absl::MakeSpan(short_out), PushKind::kDelta)
               .Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("3 keys of dim 10 need 30 output floats, got 29"),
            std::string::npos)
      << status;
  // Nothing was pushed: the rows are the initializer's, as the other job's.
  std::vector<float> rows(keys.size() * kDim), fresh(keys.size() * kDim);
  ASSERT_TRUE(jobs_.one_call[0]->PullSparse(kTable, keys, absl::MakeSpan(rows)).Wait().ok());
  ASSERT_TRUE(jobs_.two_call[0]->PullSparse(kTable, keys, absl::MakeSpan(fresh)).Wait().ok());
  EXPECT_TRUE(BitEqual(rows, fresh));
}

INSTANTIATE_TEST_SUITE_P(ServersTransportAndRequestSize, SparsePushPullTest,
                         testing::Combine(testing::Values(1u, 2u), testing::Bool(),
                                          testing::Values(size_t{32768}, size_t{64})));

// The server's side, through a raw stub: on the wire and in a shared-memory segment.
class SparsePushPullServerTest : public testing::Test {
 protected:
  void SetUp() override {
    testing_servers::StartServers(ServersOfOneAdamTable(1), &servers_, &options_);
    if (HasFatalFailure()) return;
    stub_ = proto::PsService::NewStub(
        grpc::CreateChannel(options_.endpoints[0], grpc::InsecureChannelCredentials()));
  }

  proto::PushReply Call(const proto::PushSparseRequest& request) {
    proto::PushReply reply;
    grpc::ClientContext context;
    EXPECT_TRUE(stub_->PushSparse(&context, request, &reply).ok());
    return reply;
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  ClientOptions options_;
  std::unique_ptr<proto::PsService::Stub> stub_;
};

TEST_F(SparsePushPullServerTest, OnTheWireKeysAndDeltasThatDisagreeOrAnAccumulateAreRefused) {
  const int64_t keys[3] = {1, 2, 3};
  const std::vector<float> deltas(3 * kDim, 0.25f);
  proto::PushSparseRequest request;
  request.set_table_id(kTable);
  request.set_keys(keys, sizeof(keys));
  request.set_grads(deltas.data(), (deltas.size() - 1) * sizeof(float));
  request.set_is_delta(true);
  request.set_return_values(true);
  proto::PushReply reply = Call(request);
  EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.status().message().find("push of 3 keys needs 30 deltas (dim 10), got 29"),
            std::string::npos)
      << reply.status().message();
  EXPECT_TRUE(reply.values().empty());
  request.set_grads(deltas.data(), deltas.size() * sizeof(float));
  request.set_accumulate(true);
  reply = Call(request);
  EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.status().message().find("return_values with accumulate"), std::string::npos)
      << reply.status().message();
  EXPECT_TRUE(reply.values().empty());
  // Accepted, the reply holds the rows after the deltas: the initializer's plus 0.25.
  request.set_accumulate(false);
  reply = Call(request);
  ASSERT_EQ(reply.status().code(), 0) << reply.status().message();
  ASSERT_EQ(reply.values().size(), 3 * kDim * sizeof(float));
  std::vector<float> returned(3 * kDim), initial(3 * kDim);
  std::memcpy(returned.data(), reply.values().data(), reply.values().size());
  std::vector<std::unique_ptr<PsServer>> other;
  std::unique_ptr<PsClient> other_client;
  testing_servers::StartServersAndConnect(ServersOfOneAdamTable(1), &other, &other_client);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(other_client->PullSparse(kTable, keys, absl::MakeSpan(initial)).Wait().ok());
  for (size_t i = 0; i < returned.size(); ++i) EXPECT_EQ(returned[i], initial[i] + 0.25f) << i;
}

TEST_F(SparsePushPullServerTest, InTheSegmentTheRowsGoWhereTheRequestSaysAndAWrongRangeIsRefused) {
  auto segment = detail::ShmSegment::Create(4096);
  ASSERT_TRUE(segment.ok()) << segment.status();
  proto::AttachSegmentReply attached;
  ASSERT_TRUE(testing_shm::AttachRaw(stub_.get(), **segment, &attached).ok());
  ASSERT_EQ(attached.status().code(), 0) << attached.status().message();
  const int64_t keys[4] = {5, -9, int64_t{1} << 50, 6};
  std::memcpy((*segment)->data(), keys, sizeof(keys));
  const std::vector<float> deltas(4 * kDim, -0.5f);
  std::memcpy((*segment)->data() + 64, deltas.data(), deltas.size() * sizeof(float));
  proto::PushSparseRequest request;
  request.set_table_id(kTable);
  request.set_is_delta(true);
  request.set_return_values(true);
  request.set_shm_segment(attached.segment_id());
  request.mutable_shm_keys()->set_offset(0);
  request.mutable_shm_keys()->set_length(sizeof(keys));
  request.mutable_shm_grads()->set_offset(64);
  request.mutable_shm_grads()->set_length(deltas.size() * sizeof(float));
  // Rows one float short, then past the segment's end: refused before any row changes.
  for (const auto& [offset, length] : {std::pair<uint64_t, uint64_t>{1024, 4 * kDim * 4 - 4},
                                       std::pair<uint64_t, uint64_t>{4000, 4 * kDim * 4}}) {
    request.mutable_shm_values()->set_offset(offset);
    request.mutable_shm_values()->set_length(length);
    const proto::PushReply reply = Call(request);
    EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(
        reply.status().message().find("PushSparse shm_values: bytes [" + std::to_string(offset)),
        std::string::npos)
        << reply.status().message();
    EXPECT_TRUE(reply.values().empty());
  }
  auto client = PsClient::Connect(options_);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> initial(4 * kDim), after(4 * kDim);
  ASSERT_TRUE((*client)->PullSparse(kTable, keys, absl::MakeSpan(initial)).Wait().ok());
  request.mutable_shm_values()->set_offset(1024);
  request.mutable_shm_values()->set_length(4 * kDim * 4);
  const proto::PushReply reply = Call(request);
  ASSERT_EQ(reply.status().code(), 0) << reply.status().message();
  EXPECT_TRUE(reply.values().empty());  // the rows are in the segment
  ASSERT_TRUE((*client)->PullSparse(kTable, keys, absl::MakeSpan(after)).Wait().ok());
  EXPECT_EQ(0, std::memcmp((*segment)->data() + 1024, after.data(), after.size() * sizeof(float)));
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i], initial[i] - 0.5f) << i;
}

TEST(SparsePushPullRestart, AServerRestartedBetweenExchangesFailsTheNextOneWithoutTouchingOut) {
  std::vector<std::unique_ptr<PsServer>> servers;
  ClientOptions options;
  testing_servers::StartServers(ServersOfOneAdamTable(1), &servers, &options);
  if (testing::Test::HasFatalFailure()) return;
  // A job that takes restarted servers: the next call waits for the new server instead of
  // failing as unreachable while it starts.
  options.server_restarts = true;
  auto client = PsClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::vector<int64_t> keys = ExchangeKeys(0, 0, 50, false);
  const std::vector<float> deltas = Values(0, 0, keys.size());
  std::vector<float> out(keys.size() * kDim, -1.f);
  ASSERT_TRUE((*client)
                  ->PushPullSparse(kTable, keys, deltas, absl::MakeSpan(out), PushKind::kDelta)
                  .Wait()
                  .ok());
  // The server goes and a new one takes its port: it holds none of the job's rows.
  const std::string endpoint = options.endpoints[0];
  servers[0]->Shutdown(absl::Seconds(1));
  servers.clear();
  ServerOptions again;
  again.config = ServersOfOneAdamTable(1)[0];
  again.address = endpoint;
  auto restarted = PsServer::Start(again);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  std::vector<float> second(keys.size() * kDim, -3.f);
  const absl::Status status =
      (*client)
          ->PushPullSparse(kTable, keys, deltas, absl::MakeSpan(second), PushKind::kDelta)
          .Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_NE(status.message().find("restarted under the running job"), std::string::npos) << status;
  // No row of the new server's fresh table reached the caller.
  EXPECT_EQ(second, std::vector<float>(second.size(), -3.f));
}

// The table alone: PushAndPull is Push then Pull, for every path of the table.
TEST(SparseTablePushAndPull, EqualsAPushThenAPullWithAndWithoutTheCountFilter) {
  for (uint32_t min_count : {0u, 2u}) {
    proto::TableConfig config = AdamTable();
    if (min_count > 0) config.mutable_count_filter()->set_min_count(min_count);
    auto one = SparseTable::Create(config);
    auto two = SparseTable::Create(config);
    ASSERT_TRUE(one.ok()) << one.status();
    ASSERT_TRUE(two.ok()) << two.status();
    for (int step = 0; step < 4; ++step) {
      const std::vector<int64_t> keys = ExchangeKeys(0, step, 200, true);
      const std::vector<float> values = Values(0, step, keys.size());
      std::vector<float> pulled(keys.size() * kDim, -1.f), returned(keys.size() * kDim, -2.f);
      for (bool is_delta : {true, false}) {
        ASSERT_TRUE((*two)->Push(keys, values, is_delta).ok());
        ASSERT_TRUE((*two)->Pull(keys, absl::MakeSpan(pulled)).ok());
        ASSERT_TRUE((*one)->PushAndPull(keys, values, is_delta, absl::MakeSpan(returned)).ok());
        ASSERT_TRUE(BitEqual(returned, pulled))
            << "min_count " << min_count << ", step " << step << (is_delta ? ", deltas" : "");
      }
    }
    EXPECT_EQ((*one)->RowCount(), (*two)->RowCount());
    // Sizes that disagree with the keys change nothing.
    const std::vector<int64_t> keys = {1, 2};
    std::vector<float> values(2 * kDim, 1.f), out(2 * kDim - 1);
    const absl::Status status = (*one)->PushAndPull(keys, values, true, absl::MakeSpan(out));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("push-and-pull of 2 keys needs 20 output floats (dim 10), "
                                    "got 19"),
              std::string::npos)
        << status;
  }
}

}  // namespace
}  // namespace fleet::ps
