// PsClient::DenseShares against real loopback servers: gradients written by the caller straight
// into the slots of the shared segments push the same values as a span pushed over the wire,
// bit for bit, however the writes cut the table's blocks and servers; the slots of shares that
// were never pushed are free again; and what cannot have shares says so.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "ps/client/client.h"
#include "ps/client/detail/shm_slots.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

constexpr uint32_t kTable = 3;
constexpr uint64_t kDim = 5000;  // 5 blocks of 1024 (the last one short)

class DenseSharesTest : public testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override {
    const auto configs =
        testing_servers::ServersOfOneSgdDenseTable(GetParam(), kTable, "dense", kDim, 0.25f, 1.0f);
    ASSERT_NO_FATAL_FAILURE(jobs_.Start(configs));
    wire_ = jobs_.wire.get();
    shm_ = jobs_.shm.get();
  }

  testing_servers::WireAndShmJobs jobs_;
  PsClient* wire_ = nullptr;  // jobs_.wire
  PsClient* shm_ = nullptr;   // jobs_.shm
};

TEST_P(DenseSharesTest, PushesOfSharesGiveTheValuesOfSpansOnTheWireBitForBit) {
  // Pieces that start and end inside blocks, cross block (and so server) boundaries, and are
  // written out of order, as a program's dense variables are.
  const std::vector<std::pair<uint64_t, uint64_t>> pieces = {
      {1000, 1100}, {0, 1000}, {2100, 4321}, {1100, 2100}, {4321, kDim}};
  std::vector<float> grads(kDim);
  for (int step = 0; step < 6; ++step) {
    for (uint64_t i = 0; i < kDim; ++i) grads[i] = static_cast<float>((i * 7 + step) % 13) / 3.f;
    std::unique_ptr<PsClient::DenseShares> shares = shm_->TakeDenseShares(kTable);
    ASSERT_NE(shares, nullptr) << "step " << step;
    for (const auto& [begin, end] : pieces) {
      ASSERT_TRUE(shares->Write(begin, grads.data() + begin, end - begin).ok());
    }
    std::vector<float> from_wire(kDim, -1.f), from_shm(kDim, -2.f);
    if (step % 2 == 0) {
      ASSERT_TRUE(wire_->PushPullDense(kTable, grads, absl::MakeSpan(from_wire)).Wait().ok());
      ASSERT_TRUE(
          shm_->PushPullDense(kTable, std::move(shares), absl::MakeSpan(from_shm)).Wait().ok());
    } else {
      ASSERT_TRUE(wire_->PushDense(kTable, grads).Wait().ok());
      ASSERT_TRUE(shm_->PushDense(kTable, std::move(shares)).Wait().ok());
      ASSERT_TRUE(wire_->PullDense(kTable, absl::MakeSpan(from_wire)).Wait().ok());
      ASSERT_TRUE(shm_->PullDense(kTable, absl::MakeSpan(from_shm)).Wait().ok());
    }
    ASSERT_EQ(0, std::memcmp(from_wire.data(), from_shm.data(), kDim * sizeof(float)))
        << "step " << step;
    ASSERT_NE(from_shm, std::vector<float>(kDim, 1.f)) << "the push changed nothing";
  }
}

TEST_P(DenseSharesTest, SumsAccumulatedAndScaledInSharesEqualThoseOfAVectorBitForBit) {
  // What a sync step does with its threads' gradients: zero, add each, scale, push.
  std::vector<float> first(kDim), second(kDim), sums(kDim, 0.f);
  for (uint64_t i = 0; i < kDim; ++i) {
    first[i] = static_cast<float>((i * 5) % 17) / 7.f;
    second[i] = -static_cast<float>((i * 3) % 11) / 9.f;
  }
  for (uint64_t i = 0; i < kDim; ++i) sums[i] += first[i];
  for (uint64_t i = 0; i < kDim; ++i) sums[i] += second[i];
  for (float& g : sums) g *= 1.0f / 3.0f;
  std::unique_ptr<PsClient::DenseShares> shares = shm_->TakeDenseShares(kTable);
  ASSERT_NE(shares, nullptr);
  shares->Fill(0.f);
  ASSERT_TRUE(shares->Write(0, first.data(), kDim, /*add=*/true).ok());
  ASSERT_TRUE(shares->Write(0, second.data(), 2000, /*add=*/true).ok());
  ASSERT_TRUE(shares->Write(2000, second.data() + 2000, kDim - 2000, /*add=*/true).ok());
  shares->Scale(1.0f / 3.0f);
  ASSERT_TRUE(wire_->PushDense(kTable, sums).Wait().ok());
  ASSERT_TRUE(shm_->PushDense(kTable, std::move(shares)).Wait().ok());
  std::vector<float> from_wire(kDim), from_shm(kDim);
  ASSERT_TRUE(wire_->PullDense(kTable, absl::MakeSpan(from_wire)).Wait().ok());
  ASSERT_TRUE(shm_->PullDense(kTable, absl::MakeSpan(from_shm)).Wait().ok());
  ASSERT_EQ(0, std::memcmp(from_wire.data(), from_shm.data(), kDim * sizeof(float)));
  ASSERT_NE(from_shm, std::vector<float>(kDim, 1.f)) << "the push changed nothing";
}

TEST_P(DenseSharesTest, SharesNeverPushedGiveTheirSlotsBack) {
  // More shares than a server has slots, each dropped unpushed: the slots come back each time.
  for (uint32_t i = 0; i < 3 * detail::ShmSlots::kSlots; ++i) {
    ASSERT_NE(shm_->TakeDenseShares(kTable), nullptr) << "take " << i;
  }
  // All slots held: no shares, and a push of a span still goes (over the wire).
  std::vector<std::unique_ptr<PsClient::DenseShares>> held;
  for (uint32_t i = 0; i < detail::ShmSlots::kSlots; ++i) {
    held.push_back(shm_->TakeDenseShares(kTable));
    ASSERT_NE(held.back(), nullptr) << "take " << i;
  }
  EXPECT_EQ(shm_->TakeDenseShares(kTable), nullptr);
  std::vector<float> grads(kDim, 0.5f), out(kDim);
  ASSERT_TRUE(shm_->PushPullDense(kTable, grads, absl::MakeSpan(out)).Wait().ok());
  EXPECT_EQ(out, std::vector<float>(kDim, 1.f - 0.25f * 0.5f));
  held.clear();
  EXPECT_NE(shm_->TakeDenseShares(kTable), nullptr);
}

TEST_P(DenseSharesTest, WhatCannotHaveSharesOrWritesPastTheTableIsRefused) {
  EXPECT_EQ(wire_->TakeDenseShares(kTable), nullptr);     // no shared memory
  EXPECT_EQ(shm_->TakeDenseShares(kTable + 1), nullptr);  // no such table
  std::unique_ptr<PsClient::DenseShares> shares = shm_->TakeDenseShares(kTable);
  ASSERT_NE(shares, nullptr);
  std::vector<float> values(10, 1.f);
  const absl::Status past = shares->Write(kDim - 5, values.data(), 10);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(past.message().find("[4995, 5005) is past the table's 5000 floats"), std::string::npos)
      << past.message();
  // Pulling values back needs somewhere to put them.
  EXPECT_EQ(shm_->PushPullDense(kTable, std::move(shares), {}).Wait().code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Servers, DenseSharesTest, testing::Values(1u, 2u));

}  // namespace
}  // namespace fleet::ps
