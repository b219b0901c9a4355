// Sparse pulls and pushes of a worker and a server on one host through their shared-memory
// segment (ps/detail/shm_segment.h): the same rows as the wire, bit for bit, and what the server
// refuses.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fleet/ps/ps.grpc.pb.h"
#include "ps/client/client.h"
#include "ps/detail/shm_segment.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"
#include "ps_shm_testing.h"

namespace fleet::ps {
namespace {

using detail::ShmSegment;

constexpr uint32_t kRows = 7;
constexpr uint32_t kDim = 10;  // CTR-DNN's embedding width

// `num_servers` servers holding one sparse table of Adam rows, initialised at random (a pure
// function of seed and key, so two groups of servers create the same rows).
std::vector<proto::ServerConfig> ServersOfOneAdamSparseTable(uint32_t num_servers) {
  std::vector<proto::ServerConfig> configs(num_servers);
  for (uint32_t i = 0; i < num_servers; ++i) {
    configs[i].set_server_index(i);
    configs[i].set_num_servers(num_servers);
    proto::TableConfig* table = configs[i].add_tables();
    table->set_table_id(kRows);
    table->set_name("embedding");
    table->set_type(proto::SPARSE);
    table->set_dim(kDim);
    table->mutable_optimizer()->set_learning_rate(0.05f);
    table->mutable_optimizer()->mutable_adam();
    table->mutable_initializer()->set_seed(11);
    table->mutable_initializer()->mutable_uniform()->set_low(-0.5f);
    table->mutable_initializer()->mutable_uniform()->set_high(0.5f);
  }
  return configs;
}

// A step's keys: some repeated within the step, some negative or large, some new each step.
std::vector<int64_t> StepKeys(int step, size_t count) {
  std::vector<int64_t> keys(count);
  for (size_t i = 0; i < count; ++i) {
    const int64_t k = static_cast<int64_t>((i * 37 + static_cast<size_t>(step) * 101) % 900);
    keys[i] = i % 5 == 0 ? -k : (i % 7 == 0 ? k + (int64_t{1} << 40) : k);
  }
  return keys;
}

std::vector<float> StepGrads(int step, size_t count) {
  std::vector<float> grads(count * kDim);
  for (size_t i = 0; i < grads.size(); ++i) {
    grads[i] =
        static_cast<float>(static_cast<int>((i * 13 + static_cast<size_t>(step)) % 17) - 8) / 7.f;
  }
  return grads;
}

uint64_t SparseBytesOnTheWire(const PsClient& client) {
  uint64_t bytes = 0;
  for (const RpcKindCounts& kind : client.rpc_meter().Snapshot().kinds) {
    if (kind.kind == "pull_sparse" || kind.kind == "push_sparse") {
      bytes += kind.bytes_sent + kind.bytes_received;
    }
  }
  return bytes;
}

// Two groups of `servers` servers with the same table: one client on the wire, one through
// shared memory; `max_keys` keys per request.
class ShmSparseTest : public testing::TestWithParam<std::tuple<uint32_t, size_t>> {
 protected:
  void SetUp() override {
    const auto configs = ServersOfOneAdamSparseTable(std::get<0>(GetParam()));
    ASSERT_NO_FATAL_FAILURE(jobs_.Start(configs, std::get<1>(GetParam())));
    wire_ = jobs_.wire.get();
    shm_ = jobs_.shm.get();
  }

  // Pulls `keys` through both clients, two pulls in flight on each, and compares the rows.
  void ExpectSameRows(const std::vector<int64_t>& keys, const std::string& when) {
    std::vector<float> wire_a(keys.size() * kDim, -1.f), wire_b(keys.size() * kDim, -2.f);
    std::vector<float> shm_a(keys.size() * kDim, -3.f), shm_b(keys.size() * kDim, -4.f);
    Future wa = wire_->PullSparse(kRows, keys, absl::MakeSpan(wire_a));
    Future sa = shm_->PullSparse(kRows, keys, absl::MakeSpan(shm_a));
    Future wb = wire_->PullSparse(kRows, keys, absl::MakeSpan(wire_b));
    Future sb = shm_->PullSparse(kRows, keys, absl::MakeSpan(shm_b));
    for (Future* f : {&wa, &sa, &wb, &sb}) ASSERT_TRUE(f->Wait().ok()) << when;
    ASSERT_EQ(0, std::memcmp(wire_a.data(), shm_a.data(), wire_a.size() * sizeof(float))) << when;
    ASSERT_EQ(0, std::memcmp(wire_b.data(), shm_b.data(), wire_b.size() * sizeof(float))) << when;
    ASSERT_EQ(0, std::memcmp(shm_a.data(), shm_b.data(), shm_a.size() * sizeof(float))) << when;
  }

  testing_servers::WireAndShmJobs jobs_;
  PsClient* wire_ = nullptr;  // jobs_.wire
  PsClient* shm_ = nullptr;   // jobs_.shm
};

TEST_P(ShmSparseTest, PullsAndEveryKindOfPushGiveTheRowsOfTheWireBitForBit) {
  const uint32_t servers = std::get<0>(GetParam());
  for (size_t s = 0; s < servers; ++s) {
    EXPECT_TRUE(shm_->shared_memory(s)) << "server " << s;
    EXPECT_FALSE(wire_->shared_memory(s)) << "server " << s;
  }
  constexpr size_t kKeys = 1500;
  for (int step = 0; step < 6; ++step) {
    const std::vector<int64_t> keys = StepKeys(step, kKeys);
    const std::vector<float> grads = StepGrads(step, kKeys);
    ExpectSameRows(keys, absl::StrCat("before step ", step));
    if (HasFatalFailure()) return;
    // Gradients through Adam, GEO's deltas, and sync's accumulated gradients applied by a step.
    for (PushKind kind : {PushKind::kGradient, PushKind::kDelta, PushKind::kAccumulate}) {
      Future wire_push = wire_->PushSparse(kRows, keys, grads, kind);
      Future shm_push = shm_->PushSparse(kRows, keys, grads, kind);
      ASSERT_TRUE(wire_push.Wait().ok()) << "step " << step;
      ASSERT_TRUE(shm_push.Wait().ok()) << "step " << step;
    }
    ASSERT_TRUE(wire_->SyncStep(1, 0, false, absl::Seconds(30)).ok());
    ASSERT_TRUE(shm_->SyncStep(1, 0, false, absl::Seconds(30)).ok());
  }
  ExpectSameRows(StepKeys(6, kKeys), "after the pushes");
  // The rows and keys went through the segment: on the wire the shm client sent only ranges.
  const uint64_t wire_bytes = SparseBytesOnTheWire(*wire_);
  const uint64_t shm_bytes = SparseBytesOnTheWire(*shm_);
  if (std::get<1>(GetParam()) >= kKeys) {
    EXPECT_LT(shm_bytes * 50, wire_bytes) << "shm " << shm_bytes << ", wire " << wire_bytes;
  } else {
    // More requests in flight than a segment has slots: the rest go on the wire.
    EXPECT_LT(shm_bytes, wire_bytes) << "shm " << shm_bytes << ", wire " << wire_bytes;
  }
}

// 32768 keys a request: one request per server and call, each in the segment. 64: many
// requests in flight per server, more than its slots, so the calls mix the segment and the wire.
INSTANTIATE_TEST_SUITE_P(ServersAndRequestSizes, ShmSparseTest,
                         testing::Combine(testing::Values(1u, 2u),
                                          testing::Values(size_t{32768}, size_t{64})));

// A raw stub with a segment attached to a one-server job, as a worker would hold it.
class ShmSparseRefusalTest : public testing::Test {
 protected:
  void SetUp() override {
    testing_servers::StartServers(ServersOfOneAdamSparseTable(1), &servers_, &options_);
    if (HasFatalFailure()) return;
    stub_ = proto::PsService::NewStub(
        grpc::CreateChannel(options_.endpoints[0], grpc::InsecureChannelCredentials()));
    auto segment = ShmSegment::Create(4096);
    ASSERT_TRUE(segment.ok()) << segment.status();
    segment_ = std::move(*segment);
    proto::AttachSegmentReply attached;
    ASSERT_TRUE(testing_shm::AttachRaw(stub_.get(), *segment_, &attached).ok());
    ASSERT_EQ(attached.status().code(), 0) << attached.status().message();
    segment_id_ = attached.segment_id();
  }

  proto::RpcStatus Pull(uint64_t segment, uint64_t keys_at, uint64_t keys_bytes, uint64_t rows_at,
                        uint64_t rows_bytes) {
    proto::PullSparseRequest request;
    request.set_table_id(kRows);
    request.set_shm_segment(segment);
    request.mutable_shm_keys()->set_offset(keys_at);
    request.mutable_shm_keys()->set_length(keys_bytes);
    request.mutable_shm_values()->set_offset(rows_at);
    request.mutable_shm_values()->set_length(rows_bytes);
    proto::PullSparseReply reply;
    grpc::ClientContext context;
    EXPECT_TRUE(stub_->PullSparse(&context, request, &reply).ok());
    EXPECT_TRUE(reply.values().empty());
    return reply.status();
  }

  proto::RpcStatus Push(uint64_t segment, uint64_t keys_at, uint64_t keys_bytes, uint64_t grads_at,
                        uint64_t grads_bytes) {
    proto::PushSparseRequest request;
    request.set_table_id(kRows);
    request.set_shm_segment(segment);
    request.mutable_shm_keys()->set_offset(keys_at);
    request.mutable_shm_keys()->set_length(keys_bytes);
    request.mutable_shm_grads()->set_offset(grads_at);
    request.mutable_shm_grads()->set_length(grads_bytes);
    proto::PushReply reply;
    grpc::ClientContext context;
    EXPECT_TRUE(stub_->PushSparse(&context, request, &reply).ok());
    return reply.status();
  }

  static void ExpectRefused(const proto::RpcStatus& status, const std::string& part,
                            const std::string& what) {
    EXPECT_EQ(status.code(), static_cast<int>(absl::StatusCode::kInvalidArgument)) << what;
    EXPECT_NE(status.message().find(part), std::string::npos) << what << ": " << status.message();
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  ClientOptions options_;
  std::unique_ptr<proto::PsService::Stub> stub_;
  std::unique_ptr<ShmSegment> segment_;
  uint64_t segment_id_ = 0;
};

TEST_F(ShmSparseRefusalTest, ThePullReadsKeysAndWritesRowsInThePlacesTheRequestNames) {
  const int64_t keys[3] = {5, -9, int64_t{1} << 50};
  std::memcpy(segment_->data() + 8, keys, sizeof(keys));
  const proto::RpcStatus status = Pull(segment_id_, 8, sizeof(keys), 1024, 3 * kDim * 4);
  ASSERT_EQ(status.code(), 0) << status.message();
  std::vector<float> wire(3 * kDim);
  auto client = PsClient::Connect(options_);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->PullSparse(kRows, keys, absl::MakeSpan(wire)).Wait().ok());
  EXPECT_EQ(0, std::memcmp(segment_->data() + 1024, wire.data(), wire.size() * sizeof(float)));
  EXPECT_NE(wire, std::vector<float>(wire.size(), 0.f));
}

TEST_F(ShmSparseRefusalTest, RangesOutsideTheSegmentMisalignedOrOfTheWrongSizeAreRefused) {
  const int64_t keys[4] = {1, 2, 3, 4};
  std::memcpy(segment_->data(), keys, sizeof(keys));
  std::vector<float> ones(4 * kDim, 1.f);
  std::memcpy(segment_->data() + 1024, ones.data(), ones.size() * sizeof(float));
  const std::string segment = "fleet-ps-" + segment_->token();
  // Keys past the end of the segment, keys not on whole int64s, rows of another size.
  ExpectRefused(Pull(segment_id_, 4090, 32, 1024, 160), "PullSparse shm_keys: bytes [4090, +32)",
                "keys past the end");
  ExpectRefused(Pull(segment_id_, 4, 32, 1024, 160), "not whole, aligned int64 keys",
                "misaligned keys");
  ExpectRefused(Pull(segment_id_, 0, 32, 1024, 156), "PullSparse shm_values: bytes [1024, +156)",
                "rows of the wrong size");
  ExpectRefused(Pull(segment_id_, 0, 32, 4000, 160), segment, "rows past the end");
  ExpectRefused(Push(segment_id_, 0, 30, 1024, 160), "PushSparse shm_keys: bytes [0, +30)",
                "keys not whole");
  ExpectRefused(Push(segment_id_, 0, 32, 1024, 200), "PushSparse shm_grads: bytes [1024, +200)",
                "grads of the wrong size");
  ExpectRefused(Push(segment_id_, 0, 32, 4064, 160), segment, "grads past the end");
  // A segment id the server never gave.
  ExpectRefused(Pull(segment_id_ + 100, 0, 32, 1024, 160), "is not attached", "unknown segment");
  ExpectRefused(Push(segment_id_ + 100, 0, 32, 1024, 160), "is not attached", "unknown segment");
  // The refused pushes changed no row: the rows are the initializer's, as a second job's are.
  std::vector<float> after(4 * kDim), fresh(4 * kDim);
  auto client = PsClient::Connect(options_);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->PullSparse(kRows, keys, absl::MakeSpan(after)).Wait().ok());
  std::vector<std::unique_ptr<PsServer>> other;
  std::unique_ptr<PsClient> other_client;
  testing_servers::StartServersAndConnect(ServersOfOneAdamSparseTable(1), &other, &other_client);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(other_client->PullSparse(kRows, keys, absl::MakeSpan(fresh)).Wait().ok());
  EXPECT_EQ(after, fresh);
  // And an accepted push through the segment does change them.
  ASSERT_EQ(Push(segment_id_, 0, 32, 1024, 160).code(), 0);
  ASSERT_TRUE((*client)->PullSparse(kRows, keys, absl::MakeSpan(after)).Wait().ok());
  EXPECT_NE(after, fresh);
}

}  // namespace
}  // namespace fleet::ps
