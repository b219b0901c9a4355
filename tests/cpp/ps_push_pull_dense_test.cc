// PsClient::PushPullDense against two real servers on loopback: one round trip per server pushes
// a dense gradient and brings back the values after it, block by block as a pull would.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "ps/client/client.h"
#include "ps/server/server.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 7;
constexpr uint64_t kDim = 5000;  // blocks of 1024 floats dealt over the two servers
constexpr float kRate = 0.5f;
constexpr float kStart = 2.0f;

proto::ServerConfig ConfigOf(uint32_t index) {
  proto::ServerConfig config;
  config.set_server_index(index);
  config.set_num_servers(2);
  proto::TableConfig* table = config.add_tables();
  table->set_table_id(kTable);
  table->set_name("dense");
  table->set_type(proto::DENSE);
  table->set_dim(kDim);
  table->set_dense_block_size(1024);
  table->mutable_optimizer()->set_learning_rate(kRate);
  table->mutable_optimizer()->mutable_sgd();
  table->mutable_initializer()->mutable_constant()->set_value(kStart);
  return config;
}

class PushPullDenseTest : public testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    for (uint32_t i = 0; i < 2; ++i) {
      ServerOptions server_options;
      server_options.config = ConfigOf(i);
      auto server = PsServer::Start(server_options);
      ASSERT_TRUE(server.ok()) << server.status();
      options.endpoints.push_back((*server)->endpoint());
      servers_.push_back(std::move(*server));
    }
    auto client = PsClient::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(PushPullDenseTest, ReturnsTheValuesAfterThePushAsAPullSeesThem) {
  std::vector<float> grads(kDim);
  for (uint64_t i = 0; i < kDim; ++i) grads[i] = static_cast<float>(i % 13);
  std::vector<float> returned(kDim, -1.0f);
  ASSERT_TRUE(client_->PushPullDense(kTable, grads, absl::MakeSpan(returned)).Wait().ok());
  std::vector<float> pulled(kDim);
  ASSERT_TRUE(client_->PullDense(kTable, absl::MakeSpan(pulled)).Wait().ok());
  EXPECT_EQ(returned, pulled);
  // SGD from the constant start: every block of both servers was updated and came back.
  for (uint64_t i = 0; i < kDim; ++i) {
    ASSERT_FLOAT_EQ(returned[i], kStart - kRate * grads[i]) << "float " << i;
  }
}

TEST_F(PushPullDenseTest, AnOutputOfTheWrongSizeIsRefusedBeforeAnythingIsPushed) {
  std::vector<float> grads(kDim, 1.0f);
  std::vector<float> short_output(kDim - 1);
  absl::Status status = client_->PushPullDense(kTable, grads, absl::MakeSpan(short_output)).Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("PushPullDense of table 7"), std::string::npos) << status;
  std::vector<float> pulled(kDim);
  ASSERT_TRUE(client_->PullDense(kTable, absl::MakeSpan(pulled)).Wait().ok());
  EXPECT_EQ(pulled, std::vector<float>(kDim, kStart));
}

}  // namespace
}  // namespace fleet::ps
