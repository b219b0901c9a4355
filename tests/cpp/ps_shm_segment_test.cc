// The shared-memory segment of a worker and a server on one host (ps/detail/shm_segment.h): what
// the server's checks refuse, and dense calls through it against the same calls on the wire.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <limits>
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

bool Contains(const absl::Status& status, const std::string& part) {
  return status.message().find(part) != absl::string_view::npos;
}

TEST(ShmSegment, WhatOneMappingWritesTheAttachedMappingReads) {
  auto created = ShmSegment::Create(4096);
  ASSERT_TRUE(created.ok()) << created.status();
  auto attached = ShmSegment::Attach(getpid(), (*created)->fd(), (*created)->token(), 4096);
  ASSERT_TRUE(attached.ok()) << attached.status();
  EXPECT_NE((*attached)->data(), (*created)->data());  // two mappings of the same memory
  std::strcpy((*created)->data() + 100, "written by the worker");
  EXPECT_STREQ((*attached)->data() + 100, "written by the worker");
  (*attached)->data()[2000] = 'S';
  EXPECT_EQ((*created)->data()[2000], 'S');
}

TEST(ShmSegment, RangesOutsideTheSegmentOrNotFloatAlignedAreRefusedNamingRangeAndSegment) {
  auto segment = ShmSegment::Create(1024);
  ASSERT_TRUE(segment.ok()) << segment.status();
  auto whole = (*segment)->Floats(0, 1024, "grads");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->size(), 256u);
  auto tail = (*segment)->Floats(1020, 4, "grads");
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(reinterpret_cast<char*>(tail->data()), (*segment)->data() + 1020);
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  struct Bad {
    uint64_t offset, length;
  };
  for (Bad bad :
       {Bad{1020, 8}, Bad{1028, 0}, Bad{2, 4}, Bad{0, 6}, Bad{kMax - 3, 8}, Bad{8, kMax}}) {
    auto refused = (*segment)->Floats(bad.offset, bad.length, "PushDense shm_grads");
    ASSERT_FALSE(refused.ok()) << bad.offset << " +" << bad.length;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(refused.status(), absl::StrCat("PushDense shm_grads: bytes [", bad.offset,
                                                        ", +", bad.length, ")")))
        << refused.status();
    EXPECT_TRUE(Contains(refused.status(), "fleet-ps-" + (*segment)->token())) << refused.status();
  }
}

TEST(ShmSegment, AttachRefusesAnotherTokenAnotherSizeOrAFileThatIsNotTheSegment) {
  auto segment = ShmSegment::Create(4096);
  ASSERT_TRUE(segment.ok()) << segment.status();
  const int fd = (*segment)->fd();
  std::string other_token = (*segment)->token();
  other_token[0] = other_token[0] == 'a' ? 'b' : 'a';
  auto wrong_token = ShmSegment::Attach(getpid(), fd, other_token, 4096);
  EXPECT_EQ(wrong_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(wrong_token.status(), "not the segment")) << wrong_token.status();
  auto wrong_size = ShmSegment::Attach(getpid(), fd, (*segment)->token(), 8192);
  EXPECT_EQ(wrong_size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(wrong_size.status(), "holds 4096 bytes, the worker said 8192"))
      << wrong_size.status();
  // A descriptor of an ordinary file: never mapped, whatever token the peer names.
  const int file = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file, 0);
  auto not_memfd = ShmSegment::Attach(getpid(), file, (*segment)->token(), 4096);
  EXPECT_FALSE(not_memfd.ok());
  close(file);
  auto no_such_fd = ShmSegment::Attach(getpid(), 1 << 20, (*segment)->token(), 4096);
  EXPECT_EQ(no_such_fd.status().code(), absl::StatusCode::kUnavailable) << no_such_fd.status();
  auto malformed = ShmSegment::Attach(getpid(), fd, "../../etc/passwd", 4096);
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShmSegment, AttachRefusesASegmentThatCouldBeShrunkUnderTheServer) {
  const std::string token(32, 'c');
  const int fd = memfd_create((detail::kShmNamePrefix + token).c_str(), MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  auto unsealed = ShmSegment::Attach(getpid(), fd, token, 4096);
  EXPECT_EQ(unsealed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(unsealed.status(), "not sealed")) << unsealed.status();
  close(fd);
}

constexpr uint32_t kTable = 3;
constexpr uint64_t kDim = 5000;  // blocks of 1024 floats dealt over the servers

// Two jobs of `num_servers` servers with the same table: one client on the wire, one through
// shared memory.
class ShmDenseTest : public testing::TestWithParam<uint32_t> {
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

TEST_P(ShmDenseTest, PushesPushPullsAndPullsGiveTheValuesOfTheWireBitForBit) {
  for (size_t s = 0; s < GetParam(); ++s) {
    EXPECT_TRUE(shm_->shared_memory(s)) << "server " << s;
    EXPECT_FALSE(wire_->shared_memory(s)) << "server " << s;
  }
  std::vector<float> grads(kDim);
  for (int step = 0; step < 6; ++step) {
    for (uint64_t i = 0; i < kDim; ++i) grads[i] = static_cast<float>((i * 7 + step) % 11) / 3.f;
    std::vector<float> from_wire(kDim, -1.f), from_shm(kDim, -2.f);
    // Several calls in flight at once, as a worker's threads make them.
    Future wire_push = wire_->PushDense(kTable, grads);
    Future shm_push = shm_->PushDense(kTable, grads);
    ASSERT_TRUE(wire_push.Wait().ok());
    ASSERT_TRUE(shm_push.Wait().ok());
    Future wire_pp = wire_->PushPullDense(kTable, grads, absl::MakeSpan(from_wire));
    Future shm_pp = shm_->PushPullDense(kTable, grads, absl::MakeSpan(from_shm));
    ASSERT_TRUE(wire_pp.Wait().ok());
    ASSERT_TRUE(shm_pp.Wait().ok());
    ASSERT_EQ(0, std::memcmp(from_wire.data(), from_shm.data(), kDim * sizeof(float)))
        << "step " << step;
    std::vector<float> pulled_wire(kDim), pulled_shm(kDim);
    ASSERT_TRUE(wire_->PullDense(kTable, absl::MakeSpan(pulled_wire)).Wait().ok());
    ASSERT_TRUE(shm_->PullDense(kTable, absl::MakeSpan(pulled_shm)).Wait().ok());
    ASSERT_EQ(0, std::memcmp(pulled_wire.data(), pulled_shm.data(), kDim * sizeof(float)));
    ASSERT_EQ(pulled_shm, from_shm);  // no other push in between
  }
  EXPECT_NE(grads, std::vector<float>(kDim, 0.f));
}

INSTANTIATE_TEST_SUITE_P(Servers, ShmDenseTest, testing::Values(1u, 2u));

TEST(ShmDense, TheServerRefusesARangeOutsideTheSegmentNamingRangeAndSegment) {
  std::vector<std::unique_ptr<PsServer>> servers;
  ClientOptions options;
  testing_servers::StartServers(
      testing_servers::ServersOfOneSgdDenseTable(1, kTable, "dense", kDim, 0.25f, 1.0f), &servers,
      &options);
  if (testing::Test::HasFatalFailure()) return;
  auto stub = proto::PsService::NewStub(
      grpc::CreateChannel(options.endpoints[0], grpc::InsecureChannelCredentials()));
  auto segment = ShmSegment::Create(2 * kDim * sizeof(float));
  ASSERT_TRUE(segment.ok()) << segment.status();
  proto::AttachSegmentReply attached;
  ASSERT_TRUE(testing_shm::AttachRaw(stub.get(), **segment, &attached).ok());
  ASSERT_EQ(attached.status().code(), 0) << attached.status().message();
  proto::PushDenseRequest push;
  push.set_table_id(kTable);
  push.set_shm_segment(attached.segment_id());
  push.mutable_shm_grads()->set_offset(kDim * sizeof(float) + 4);  // runs 4 bytes past the end
  push.mutable_shm_grads()->set_length(kDim * sizeof(float));
  proto::PushReply reply;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->PushDense(&context, push, &reply).ok());
  }
  EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.status().message().find(
                absl::StrCat("PushDense shm_grads: bytes [", kDim * sizeof(float) + 4)),
            std::string::npos)
      << reply.status().message();
  EXPECT_NE(reply.status().message().find("fleet-ps-" + (*segment)->token()), std::string::npos)
      << reply.status().message();
  // A segment id the server never gave.
  push.set_shm_segment(attached.segment_id() + 100);
  push.mutable_shm_grads()->set_offset(0);
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->PushDense(&context, push, &reply).ok());
  }
  EXPECT_EQ(reply.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.status().message().find("is not attached"), std::string::npos)
      << reply.status().message();
  // The table is untouched by the refused pushes.
  std::vector<float> pulled(kDim);
  auto client = PsClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->PullDense(kTable, absl::MakeSpan(pulled)).Wait().ok());
  EXPECT_EQ(pulled, std::vector<float>(kDim, 1.0f));
}

TEST(ShmDense, AClientWithoutTheOptionOrOnAnotherHostKeepsTheWire) {
  std::vector<std::unique_ptr<PsServer>> servers;
  ClientOptions options;
  testing_servers::StartServers(
      testing_servers::ServersOfOneSgdDenseTable(1, kTable, "dense", kDim, 0.25f, 1.0f), &servers,
      &options);
  if (testing::Test::HasFatalFailure()) return;
  options.local_host = "127.0.0.1";
  options.local_socket = false;  // the server has no Unix socket
  auto off = PsClient::Connect(options);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE((*off)->shared_memory(0));
  options.local_shared_memory = true;
  options.local_host = "127.0.0.2";  // the server's endpoint names another host
  auto elsewhere = PsClient::Connect(options);
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_FALSE((*elsewhere)->shared_memory(0));
}

}  // namespace
}  // namespace fleet::ps
