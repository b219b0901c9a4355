// PsClient::PushPullDense against two real servers on loopback: one round trip per server pushes
// a dense gradient and brings back the values after it, block by block as a pull would.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "ps/client/client.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 7;
constexpr uint64_t kDim = 5000;  // blocks of 1024 floats dealt over the two servers
constexpr float kRate = 0.5f;
constexpr float kStart = 2.0f;

class PushPullDenseTest : public testing::Test {
 protected:
  void SetUp() override {
    testing_servers::StartServersAndConnect(
        testing_servers::ServersOfOneSgdDenseTable(2, kTable, "dense", kDim, kRate, kStart),
        &servers_, &client_);
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
