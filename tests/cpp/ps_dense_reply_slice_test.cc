// A server's dense replies, whose values it writes straight into a gRPC slice
// (server/detail/service.cc), read over real loopback gRPC through the plain generated stub: they
// are ps.proto's messages, a failed call carries its status and no values, and the server's RPC
// meter counts the bytes of the message sent.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fleet/ps/ps.grpc.pb.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 7;
constexpr uint64_t kDim = 3000;  // three blocks of 1024 (the last one short)

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

class DenseReplySliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    testing_servers::StartServers(
        testing_servers::ServersOfOneSgdDenseTable(1, kTable, "w", kDim, 0.25f, 0.5f), &servers_,
        &options);
    ASSERT_FALSE(HasFatalFailure());
    stub_ = proto::PsService::NewStub(
        grpc::CreateChannel(options.endpoints[0], grpc::InsecureChannelCredentials()));
  }

  uint64_t PullDenseBytesSent() const {
    const RpcMeterSnapshot snapshot = servers_[0]->rpc_meter().Snapshot();
    return snapshot.kinds[static_cast<int>(RpcKind::kPullDense)].bytes_sent;
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  std::unique_ptr<proto::PsService::Stub> stub_;
};

TEST_F(DenseReplySliceTest, PullAndPushPullRepliesParseAsThePlainMessages) {
  proto::PullDenseRequest pull;
  pull.set_table_id(kTable);
  proto::PullDenseReply pulled;
  grpc::ClientContext pull_context;
  ASSERT_TRUE(stub_->PullDense(&pull_context, pull, &pulled).ok());
  EXPECT_EQ(pulled.status().code(), 0) << pulled.status().message();
  EXPECT_EQ(pulled.table_id(), kTable);
  EXPECT_EQ(Floats(pulled.values()), std::vector<float>(kDim, 0.5f));

  proto::PushDenseRequest push;
  push.set_table_id(kTable);
  push.set_return_values(true);
  std::vector<float> grads(kDim);
  for (uint64_t i = 0; i < kDim; ++i) grads[i] = static_cast<float>(i % 5);
  push.set_grads(grads.data(), grads.size() * sizeof(float));
  proto::PushReply pushed;
  grpc::ClientContext push_context;
  ASSERT_TRUE(stub_->PushDense(&push_context, push, &pushed).ok());
  EXPECT_EQ(pushed.status().code(), 0) << pushed.status().message();
  EXPECT_EQ(pushed.table_id(), kTable);
  const std::vector<float> values = Floats(pushed.values());
  ASSERT_EQ(values.size(), kDim);
  for (uint64_t i = 0; i < kDim; ++i) {
    ASSERT_EQ(values[i], 0.5f - 0.25f * grads[i]) << "element " << i;
  }
  // A push without return_values sends none back.
  push.set_return_values(false);
  proto::PushReply plain;
  grpc::ClientContext plain_context;
  ASSERT_TRUE(stub_->PushDense(&plain_context, push, &plain).ok());
  EXPECT_EQ(plain.status().code(), 0) << plain.status().message();
  EXPECT_TRUE(plain.values().empty());
}

TEST_F(DenseReplySliceTest, AFailedPullCarriesItsStatusAndNoValues) {
  proto::PullDenseRequest pull;
  pull.set_table_id(kTable + 1);
  proto::PullDenseReply reply;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->PullDense(&context, pull, &reply).ok());
  EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_NE(reply.status().message().find("no dense table 8"), std::string::npos)
      << reply.status().message();
  EXPECT_TRUE(reply.values().empty());
}

TEST_F(DenseReplySliceTest, TheMeterCountsTheBytesOfEachReplySent) {
  uint64_t expected = 0;
  for (uint32_t table : {kTable, kTable + 1, kTable}) {
    proto::PullDenseRequest pull;
    pull.set_table_id(table);
    proto::PullDenseReply reply;
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->PullDense(&context, pull, &reply).ok());
    expected += reply.ByteSizeLong();
  }
  EXPECT_GT(expected, 2 * kDim * sizeof(float));
  EXPECT_EQ(PullDenseBytesSent(), expected);
}

}  // namespace
}  // namespace fleet::ps
