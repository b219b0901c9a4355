// The outputs of a sync step's arrivals (ps/server/detail/step_output.h): the round's action gets
// the output of every arrival counted in the round, and of no arrival that left it (timed out,
// or withdrawn when its worker went away), whose buffer its caller frees on return.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ps/server/detail/barrier.h"

namespace fleet::ps::detail {
namespace {

constexpr char kInit[] = "__init_worker__";
constexpr char kStep[] = "step";
const absl::Duration kLong = absl::Seconds(30);
const absl::Duration kLook = absl::Milliseconds(20);

// Each worker's destination: a float of its own, told apart by address.
struct Buffers {
  std::vector<float> of_worker = std::vector<float>(8);
  StepOutput Output(uint32_t worker) {
    return StepOutput{3, absl::MakeSpan(&of_worker[worker], 1), nullptr};
  }
};

// The worker each of `outputs` belongs to, by address, in the order given.
std::vector<int> Owners(Buffers& buffers, absl::Span<const StepOutput> outputs) {
  std::vector<int> owners;
  for (const StepOutput& output : outputs) {
    owners.push_back(static_cast<int>(output.values.data() - buffers.of_worker.data()));
  }
  return owners;
}

// Arrives as `worker` at the step barrier with its output; the action records the round's
// outputs' owners.
absl::Status ArriveWithOutput(BarrierSet& barriers, uint32_t workers, uint32_t worker,
                              StepOutput output, absl::Duration timeout, Buffers& buffers,
                              std::vector<int>* owners) {
  uint32_t done = 0;
  return barriers.ArriveAndRun(
      kStep, workers, worker, timeout, false,
      [&](uint32_t, absl::Span<const StepOutput> outputs) {
        *owners = Owners(buffers, outputs);
        return absl::OkStatus();
      },
      &done, output);
}

// Arrives as `looker` with a short timeout until the round's message says `arrived` of
// `workers` are in (the others' arrivals, sent from other threads, are then known to wait).
// Each look carries an output of its own that no round may use.
void LookUntilArrived(BarrierSet& barriers, uint32_t workers, uint32_t looker, int arrived,
                      StepOutput stale, Buffers& buffers) {
  const std::string want = std::to_string(arrived) + " of " + std::to_string(workers);
  std::vector<int> owners;
  while (true) {
    absl::Status look = ArriveWithOutput(barriers, workers, looker, stale, kLook, buffers, &owners);
    ASSERT_EQ(look.code(), absl::StatusCode::kDeadlineExceeded) << look;
    if (look.message().find(want + " workers arrived") != std::string::npos) return;
  }
}

// The owners each arrival's action saw (one per arrival; only the round's last arrival runs it).
struct Seen {
  std::vector<std::vector<int>> by_arrival = std::vector<std::vector<int>>(8);
  // The owners the round's one action saw; fails the test unless exactly one arrival ran it.
  std::vector<int> OfTheRound() const {
    std::vector<int> seen;
    int ran = 0;
    for (const auto& owners : by_arrival) {
      if (owners.empty()) continue;
      seen = owners;
      ++ran;
    }
    EXPECT_EQ(ran, 1) << "the round's action ran " << ran << " times";
    return seen;
  }
};

TEST(SyncStepOutputsTest, TheRoundGetsEveryArrivalsOutputInWorkerOrder) {
  BarrierSet barriers;
  Buffers buffers;
  Seen seen;
  // Whichever comes last runs the action; either way it sees both outputs, by worker id.
  auto worker_1 = std::async(std::launch::async, [&] {
    return ArriveWithOutput(barriers, 2, 1, buffers.Output(1), kLong, buffers, &seen.by_arrival[1]);
  });
  ASSERT_TRUE(
      ArriveWithOutput(barriers, 2, 0, buffers.Output(0), kLong, buffers, &seen.by_arrival[0])
          .ok());
  ASSERT_TRUE(worker_1.get().ok());
  EXPECT_EQ(seen.OfTheRound(), (std::vector<int>{0, 1}));
}

TEST(SyncStepOutputsTest, AnArrivalWithoutOutputIsLeftOut) {
  BarrierSet barriers;
  Buffers buffers;
  Seen seen;
  auto worker_1 = std::async(std::launch::async, [&] {
    return ArriveWithOutput(barriers, 2, 1, StepOutput{}, kLong, buffers, &seen.by_arrival[1]);
  });
  ASSERT_TRUE(
      ArriveWithOutput(barriers, 2, 0, buffers.Output(0), kLong, buffers, &seen.by_arrival[0])
          .ok());
  ASSERT_TRUE(worker_1.get().ok());
  EXPECT_EQ(seen.OfTheRound(), (std::vector<int>{0}));
}

TEST(SyncStepOutputsTest, ATimedOutArrivalsOutputIsNotTheRounds) {
  // Three workers, so that worker 0's arrival times out in a round that worker 2 keeps open.
  BarrierSet barriers;
  Buffers buffers;
  Seen seen;
  auto worker_2 = std::async(std::launch::async, [&] {
    return ArriveWithOutput(barriers, 3, 2, buffers.Output(2), kLong, buffers, &seen.by_arrival[2]);
  });
  // Worker 0 arrives with output 6 and times out while worker 2 waits; it comes back with
  // output 0, and worker 1 arrives: the round is theirs and worker 2's.
  LookUntilArrived(barriers, 3, 0, 2, buffers.Output(6), buffers);
  auto worker_0 = std::async(std::launch::async, [&] {
    return ArriveWithOutput(barriers, 3, 0, buffers.Output(0), kLong, buffers, &seen.by_arrival[0]);
  });
  ASSERT_TRUE(
      ArriveWithOutput(barriers, 3, 1, buffers.Output(1), kLong, buffers, &seen.by_arrival[1])
          .ok());
  ASSERT_TRUE(worker_0.get().ok());
  ASSERT_TRUE(worker_2.get().ok());
  EXPECT_EQ(seen.OfTheRound(), (std::vector<int>{0, 1, 2}));
}

TEST(SyncStepOutputsTest, AWithdrawnArrivalsOutputIsNotTheRounds) {
  BarrierSet barriers(nullptr, /*worker_restarts=*/true);
  Buffers buffers;
  std::vector<std::future<absl::Status>> init;
  for (uint32_t w = 1; w < 3; ++w) {
    init.push_back(
        std::async(std::launch::async, [&, w] { return barriers.Arrive(kInit, 3, w, kLong); }));
  }
  ASSERT_TRUE(barriers.Arrive(kInit, 3, 0, kLong).ok());
  for (auto& other : init) ASSERT_TRUE(other.get().ok());
  for (uint32_t w = 0; w < 3; ++w) barriers.Attended(w, "ipv4:127.0.0.1:" + std::to_string(w));
  // Worker 1 waits in the step's round with output 6 when its process dies.
  std::vector<int> unused;
  auto dead = std::async(std::launch::async, [&] {
    return ArriveWithOutput(barriers, 3, 1, buffers.Output(6), kLong, buffers, &unused);
  });
  LookUntilArrived(barriers, 3, 0, 2, buffers.Output(7), buffers);
  barriers.Dropped(1, "ipv4:127.0.0.1:1");
  EXPECT_EQ(dead.get().code(), absl::StatusCode::kAborted);
  // Its new process rejoins and arrives with output 1; workers 2 and 0 complete the round.
  ASSERT_TRUE(barriers.Arrive(kInit, 3, 1, kLong).ok());
  barriers.Attended(1, "ipv4:127.0.0.1:11");
  Seen seen;
  auto worker_1 = std::async(std::launch::async, [&] {
    return ArriveWithOutput(barriers, 3, 1, buffers.Output(1), kLong, buffers, &seen.by_arrival[1]);
  });
  auto worker_2 = std::async(std::launch::async, [&] {
    return ArriveWithOutput(barriers, 3, 2, buffers.Output(2), kLong, buffers, &seen.by_arrival[2]);
  });
  ASSERT_TRUE(
      ArriveWithOutput(barriers, 3, 0, buffers.Output(0), kLong, buffers, &seen.by_arrival[0])
          .ok());
  ASSERT_TRUE(worker_1.get().ok());
  ASSERT_TRUE(worker_2.get().ok());
  EXPECT_TRUE(unused.empty());
  EXPECT_EQ(seen.OfTheRound(), (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace fleet::ps::detail
