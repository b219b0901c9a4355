// The counters of live metrics without RPC: ps/rpc_meter.h (buckets, failures by code, calls in
// flight, a served call's sizes and outcome) and framework/step_meter.h (steps, samples by the
// first fed variable found, step times).
#include <gtest/gtest.h>

#include <string>

#include "core/scope.h"
#include "framework/step_meter.h"
#include "ps/rpc_meter.h"

namespace fleet {
namespace {

using ps::RpcKind;
using ps::RpcMeter;

const ps::RpcKindCounts& Kind(const ps::RpcMeterSnapshot& s, RpcKind kind) {
  return s.kinds[static_cast<int>(kind)];
}

TEST(RpcMeterTest, ALatencyOnABoundFallsInThatBucketAndAboveAllInTheLast) {
  RpcMeter meter;
  const absl::Duration at_1ms = absl::Milliseconds(1);
  for (absl::Duration latency :
       {at_1ms, at_1ms + absl::Microseconds(1), absl::Seconds(60), absl::Seconds(-1)}) {
    meter.Begin();
    meter.End(RpcKind::kPullSparse, latency, 10, 20, absl::StatusCode::kOk);
  }
  const auto snapshot = meter.Snapshot();
  const auto& pull = Kind(snapshot, RpcKind::kPullSparse);
  ASSERT_EQ(pull.latency_buckets.size(), ps::kRpcLatencyBounds.size() + 1);
  EXPECT_EQ(pull.latency_buckets[0], 1u);  // -1 s (a clock stepped back) reads as 0
  EXPECT_EQ(pull.latency_buckets[3], 1u);  // 0.001 <= le 0.001
  EXPECT_EQ(pull.latency_buckets[4], 1u);  // 0.001001 <= le 0.0025
  EXPECT_EQ(pull.latency_buckets.back(), 1u);
  EXPECT_EQ(pull.calls, 4u);
  EXPECT_EQ(pull.bytes_sent, 40u);
  EXPECT_EQ(pull.bytes_received, 80u);
  EXPECT_NEAR(pull.latency_sum_seconds, 0.001 + 0.001001 + 60, 1e-6);
  EXPECT_EQ(snapshot.in_flight, 0);
  EXPECT_EQ(Kind(snapshot, RpcKind::kPushDense).calls, 0u);
}

TEST(RpcMeterTest, FailuresAreCountedByCodeAndKind) {
  RpcMeter meter;
  for (auto code : {absl::StatusCode::kUnavailable, absl::StatusCode::kUnavailable,
                    absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kOk}) {
    meter.Begin();
    meter.End(RpcKind::kPushSparse, absl::Milliseconds(2), 1, 1, code);
  }
  meter.Begin();  // still in flight
  const auto snapshot = meter.Snapshot();
  const auto& push = Kind(snapshot, RpcKind::kPushSparse);
  ASSERT_EQ(push.errors.size(), 2u);
  EXPECT_EQ(push.errors[0].code, "DEADLINE_EXCEEDED");
  EXPECT_EQ(push.errors[0].count, 1u);
  EXPECT_EQ(push.errors[1].code, "UNAVAILABLE");
  EXPECT_EQ(push.errors[1].count, 2u);
  EXPECT_TRUE(Kind(snapshot, RpcKind::kPullSparse).errors.empty());
  EXPECT_EQ(snapshot.in_flight, 1);
}

TEST(RpcMeterTest, AServedCallReadsItsSizesAndItsOutcomeWhenItEnds) {
  RpcMeter meter;
  ps::proto::PullSparseRequest request;
  request.set_keys(std::string(800, 'k'));
  ps::proto::PullSparseReply reply;
  {
    ps::ServedRpc metered(&meter, ps::RpcKindOf(request), request, reply, *reply.mutable_status());
    EXPECT_EQ(meter.Snapshot().in_flight, 1);
    reply.set_values(std::string(1600, 'v'));  // filled and failed after the meter began
    reply.mutable_status()->set_code(static_cast<int>(absl::StatusCode::kNotFound));
  }
  const auto snapshot = meter.Snapshot();
  const auto& pull = Kind(snapshot, RpcKind::kPullSparse);
  EXPECT_EQ(pull.calls, 1u);
  EXPECT_EQ(pull.bytes_received, request.ByteSizeLong());
  EXPECT_EQ(pull.bytes_sent, reply.ByteSizeLong());
  ASSERT_EQ(pull.errors.size(), 1u);
  EXPECT_EQ(pull.errors[0].code, "NOT_FOUND");
  EXPECT_EQ(snapshot.in_flight, 0);
  EXPECT_EQ(ps::RpcKindOf(ps::proto::StatsRequest()), RpcKind::kOther);
}

TEST(StepMeterTest, CountsStepsAndSamplesByTheFirstFedVariableFound) {
  Scope scope;
  LoDTensor* ids = scope.Var("ids")->GetMutable<LoDTensor>();
  ids->Resize({7, 1});
  *ids->mutable_lod() = {{0, 2, 5, 7}};  // 3 sequences of 7 ids
  LoDTensor* dense = scope.Var("dense")->GetMutable<LoDTensor>();
  dense->Resize({4, 3});
  framework::StepMeter meter({"missing", "ids", "dense"});
  meter.OnPassBegin({/*num_threads=*/1, /*dataset_pass=*/false});
  framework::StepInfo step;
  step.scope = &scope;
  for (int i = 0; i < 2; ++i) {
    meter.BeforeStep(step);
    meter.AfterStep(step);
  }
  meter.SetSampleVars({"dense"});
  meter.BeforeStep(step);
  meter.AfterStep(step);
  meter.SetSampleVars({});
  meter.BeforeStep(step);
  meter.AfterStep(step);  // no sample variable: a step without samples
  const auto snapshot = meter.Snapshot();
  EXPECT_EQ(snapshot.steps, 4);
  EXPECT_EQ(snapshot.samples, 3 + 3 + 4);
  uint64_t timed = 0;
  for (uint64_t n : snapshot.step_time_buckets) timed += n;
  EXPECT_EQ(timed, 4u);
  EXPECT_GE(snapshot.step_seconds_sum, 0.0);
}

}  // namespace
}  // namespace fleet
