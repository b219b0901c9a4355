// The dense wire format (ps/client/detail/dense_wire.h): requests whose large field is a slice
// of its own parse as the plain protobuf message; replies cut into slices anywhere (inside a
// tag, a length or the values) give back the same fields and values; malformed replies are
// refused. Then PsClient's dense calls through it against two real servers on loopback, with a
// table large enough that its replies arrive in many slices.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ps/client/client.h"
#include "ps/client/detail/dense_wire.h"
#include "ps/server/server.h"
#include "ps_loopback_servers.h"

namespace fleet::ps {
namespace {

using PushRequestWire =
    detail::SliceFieldRequest<proto::PushDenseRequest, proto::PushDenseRequest::kGradsFieldNumber>;
using PushReplyWire =
    detail::SliceFieldReply<proto::PushReply, proto::PushReply::kValuesFieldNumber>;
using BarrierReplyWire =
    detail::SliceFieldReply<proto::BarrierReply, proto::BarrierReply::kValuesFieldNumber>;

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// `bytes` as a buffer of slices that end at each of `cuts` (increasing offsets).
grpc::ByteBuffer CutInto(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t begin = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + begin, cut - begin);
    begin = cut;
  }
  slices.emplace_back(bytes.data() + begin, bytes.size() - begin);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

template <class Wire>
grpc::Status Deserialize(grpc::ByteBuffer buffer, Wire* wire) {
  return grpc::SerializationTraits<Wire>::Deserialize(&buffer, wire);
}

TEST(DenseWire, ARequestWithItsFieldInASliceParsesAsThePlainMessage) {
  for (size_t size : {size_t{0}, size_t{3}, size_t{200}, size_t{300000}}) {
    PushRequestWire wire;
    wire.header.set_table_id(7);
    wire.header.set_accumulate(true);
    wire.header.set_return_values(true);
    const std::string grads = RandomBytes(size, static_cast<uint32_t>(size));
    std::memcpy(wire.AllocatePayload(size), grads.data(), size);

    grpc::ByteBuffer buffer;
    bool own = false;
    ASSERT_TRUE(grpc::SerializationTraits<PushRequestWire>::Serialize(wire, &buffer, &own).ok());
    const std::string bytes = Flatten(buffer);
    EXPECT_EQ(bytes.size(), wire.ByteSizeLong()) << size;
    proto::PushDenseRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes)) << size;
    EXPECT_EQ(parsed.table_id(), 7u);
    EXPECT_TRUE(parsed.accumulate());
    EXPECT_TRUE(parsed.return_values());
    EXPECT_FALSE(parsed.is_delta());
    EXPECT_EQ(parsed.grads(), grads) << size;
  }
}

TEST(DenseWire, AReplyCutAnywhereGivesBackItsFieldsAndValues) {
  proto::PushReply reply;
  reply.mutable_status()->set_code(3);
  reply.mutable_status()->set_message("the table says no");
  reply.set_values(RandomBytes(5000, 1));
  const std::string bytes = reply.SerializeAsString();
  std::mt19937 random(2);
  for (size_t step : {size_t{1}, size_t{2}, size_t{7}, size_t{4096}, bytes.size()}) {
    std::vector<size_t> cuts;
    for (size_t cut = step; cut < bytes.size(); cut += step) cuts.push_back(cut);
    PushReplyWire wire;
    ASSERT_TRUE(Deserialize(CutInto(bytes, cuts), &wire).ok()) << step;
    EXPECT_EQ(wire.status().code(), 3) << step;
    EXPECT_EQ(wire.status().message(), "the table says no") << step;
    ASSERT_EQ(wire.values().size(), reply.values().size()) << step;
    EXPECT_EQ(wire.ByteSizeLong(), bytes.size()) << step;  // as the sender's meter counts them
    // Ranges that begin and end inside, at and across the slices.
    for (int i = 0; i < 50; ++i) {
      const size_t offset = random() % reply.values().size();
      const size_t n = random() % (reply.values().size() - offset + 1);
      std::string out(n, '\0');
      wire.values().CopyOut(offset, n, out.data());
      ASSERT_EQ(out, reply.values().substr(offset, n)) << step << " " << offset << " " << n;
    }
  }
}

TEST(DenseWire, ASparsePullsRowsCutAnywhereGoToTheirPlacesInOnePass) {
  // 37 rows of 3 floats (12 bytes), sent in slices cut inside rows, at their ends and across
  // several rows; CopyPieces sends row j to place 36 - j, as a pull scatters rows to the
  // positions of their keys.
  constexpr size_t kRows = 37, kRowBytes = 12;
  proto::PullSparseReply reply;
  reply.set_values(RandomBytes(kRows * kRowBytes, 6));
  const std::string bytes = reply.SerializeAsString();
  for (size_t step : {size_t{1}, size_t{5}, size_t{12}, size_t{13}, size_t{100}, bytes.size()}) {
    std::vector<size_t> cuts;
    for (size_t cut = step; cut < bytes.size(); cut += step) cuts.push_back(cut);
    using PullReplyWire =
        detail::SliceFieldReply<proto::PullSparseReply, proto::PullSparseReply::kValuesFieldNumber>;
    PullReplyWire wire;
    ASSERT_TRUE(Deserialize(CutInto(bytes, cuts), &wire).ok()) << step;
    std::string out(kRows * kRowBytes, '\0');
    wire.values().CopyPieces(kRowBytes,
                             [&](size_t j) { return out.data() + (kRows - 1 - j) * kRowBytes; });
    for (size_t j = 0; j < kRows; ++j) {
      ASSERT_EQ(out.substr((kRows - 1 - j) * kRowBytes, kRowBytes),
                reply.values().substr(j * kRowBytes, kRowBytes))
          << "step " << step << " row " << j;
    }
  }
}

TEST(DenseWire, AFieldNumberAboveFifteenAndARepeatedFieldParseAsProtobufDoes) {
  proto::BarrierReply first;
  first.set_done_workers(2);
  first.set_values(RandomBytes(100, 3));
  proto::BarrierReply second;
  second.set_values(RandomBytes(40, 4));
  // Two occurrences of values (field 16, a two-byte tag): the last one is the field's value.
  const std::string bytes = first.SerializeAsString() + second.SerializeAsString();
  proto::BarrierReply parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    BarrierReplyWire wire;
    ASSERT_TRUE(Deserialize(CutInto(bytes, {cut}), &wire).ok()) << cut;
    EXPECT_EQ(wire.header().done_workers(), parsed.done_workers()) << cut;
    std::string values(wire.values().size(), '\0');
    wire.values().CopyOut(0, values.size(), values.data());
    ASSERT_EQ(values, parsed.values()) << cut;
  }
}

TEST(DenseWire, AReplyWithoutValuesHasNone) {
  proto::PushReply reply;
  reply.mutable_status()->set_code(0);
  reply.mutable_status()->set_message("fine");
  PushReplyWire wire;
  ASSERT_TRUE(Deserialize(CutInto(reply.SerializeAsString(), {}), &wire).ok());
  EXPECT_EQ(wire.values().size(), 0u);
  EXPECT_EQ(wire.status().message(), "fine");
}

TEST(DenseWire, MalformedRepliesAreRefusedNamingWhatIsWrong) {
  proto::PushReply reply;
  reply.mutable_status()->set_message("x");
  reply.set_values(RandomBytes(300, 5));
  const std::string bytes = reply.SerializeAsString();
  struct Case {
    std::string bytes;
    std::string says;
  };
  const std::vector<Case> cases = {
      {bytes.substr(0, bytes.size() - 1), "field 3 truncated"},
      {bytes.substr(0, 1), "truncated length"},
      {std::string("\x18\x05", 2), "field 3 has wire type 0"},  // values as a varint
      {std::string("\x0b", 1), "wire type 3"},                  // a group
      {std::string("\x08\xff", 2), "truncated varint"},
      // Field 1 (status) holds bytes that are not an RpcStatus.
      {std::string("\x0a\x02\xff\xff", 4), "do not parse as fleet.ps.proto.PushReply"},
  };
  for (const Case& c : cases) {
    PushReplyWire wire;
    grpc::Status status = Deserialize(CutInto(c.bytes, {}), &wire);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << c.says;
    EXPECT_NE(status.error_message().find(c.says), std::string::npos) << status.error_message();
  }
}

// PsClient's dense calls through the wire format, against two real servers: a table of 2.4 MB,
// whose requests and replies are cut into many slices by the transport.
constexpr uint32_t kTable = 3;
constexpr uint64_t kDim =
    600'001;  // blocks of 1024 floats dealt over the two servers, a short last one
constexpr float kRate = 0.25f;
constexpr float kStart = 1.0f;

class DenseWireCallsTest : public testing::Test {
 protected:
  void SetUp() override {
    testing_servers::StartServersAndConnect(
        testing_servers::ServersOfOneSgdDenseTable(2, kTable, "wide", kDim, kRate, kStart),
        &servers_, &client_);
  }

  std::vector<std::unique_ptr<PsServer>> servers_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(DenseWireCallsTest, PushesAndPullsOfALargeTableMoveEveryFloat) {
  std::vector<float> grads(kDim);
  for (uint64_t i = 0; i < kDim; ++i) grads[i] = static_cast<float>(i % 1009) - 500.0f;
  std::vector<float> returned(kDim, -1.0f);
  ASSERT_TRUE(client_->PushPullDense(kTable, grads, absl::MakeSpan(returned)).Wait().ok());
  for (uint64_t i = 0; i < kDim; ++i) {
    ASSERT_EQ(returned[i], kStart - kRate * grads[i]) << "float " << i;
  }
  // A plain push, then a pull: both SGD steps, every float in its place.
  ASSERT_TRUE(client_->PushDense(kTable, grads).Wait().ok());
  std::vector<float> pulled(kDim, -1.0f);
  ASSERT_TRUE(client_->PullDense(kTable, absl::MakeSpan(pulled)).Wait().ok());
  for (uint64_t i = 0; i < kDim; ++i) {
    ASSERT_EQ(pulled[i], kStart - kRate * grads[i] - kRate * grads[i]) << "float " << i;
  }
}

TEST_F(DenseWireCallsTest, ASyncStepBringsBackTheAccumulatedUpdateOfALargeTable) {
  std::vector<float> grads(kDim);
  for (uint64_t i = 0; i < kDim; ++i) grads[i] = static_cast<float>(i % 97);
  ASSERT_TRUE(client_->PushDense(kTable, grads, PushKind::kAccumulate).Wait().ok());
  std::vector<float> values(kDim, -1.0f);
  auto step =
      client_->SyncStepAndPullDense(1, 0, absl::Seconds(30), kTable, absl::MakeSpan(values));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 0u);  // no worker is done
  for (uint64_t i = 0; i < kDim; ++i) {
    ASSERT_EQ(values[i], kStart - kRate * grads[i]) << "float " << i;
  }
}

}  // namespace
}  // namespace fleet::ps
