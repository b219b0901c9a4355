// Barriers of a job that takes restarted workers (ps/server/detail/barrier.h, worker_restarts):
// a worker whose presence call dropped is waited for instead of failing the job, its arrivals in
// unfinished rounds are withdrawn, and a worker started again with its id rejoins (its first
// barrier, init_worker's, lets it through). Without the option the same drop fails every barrier.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ps/server/detail/barrier.h"

namespace fleet::ps::detail {
namespace {

constexpr char kInit[] = "__init_worker__";
constexpr char kStep[] = "step";
constexpr uint32_t kWorkers = 2;
const absl::Duration kLong = absl::Seconds(30);

// Every worker attends and passes init_worker's barrier, as CommunicatorBase::Start does.
void StartJob(BarrierSet* barriers, uint32_t workers = kWorkers) {
  std::vector<std::future<absl::Status>> others;
  for (uint32_t w = 1; w < workers; ++w) {
    others.push_back(
        std::async(std::launch::async, [=] { return barriers->Arrive(kInit, workers, w, kLong); }));
  }
  ASSERT_TRUE(barriers->Arrive(kInit, workers, 0, kLong).ok());
  for (auto& other : others) ASSERT_TRUE(other.get().ok());
  for (uint32_t w = 0; w < workers; ++w) {
    barriers->Attended(w, "ipv4:127.0.0.1:" + std::to_string(1000 + w));
  }
}

TEST(BarrierRestartsTest, WithoutTheOptionADroppedWorkerFailsEveryBarrier) {
  BarrierSet barriers(nullptr, /*worker_restarts=*/false);
  StartJob(&barriers);
  barriers.Dropped(1, "ipv4:127.0.0.1:1001");
  absl::Status status = barriers.Arrive(kStep, kWorkers, 0, kLong);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_NE(status.message().find("worker 1 failed (its connection from ipv4:127.0.0.1:1001"),
            std::string::npos)
      << status;
}

TEST(BarrierRestartsTest, ARestartedWorkerRejoinsTheRoundTheOtherWaitsIn) {
  std::vector<std::string> said;
  BarrierSet barriers([&](const std::string& line) { said.push_back(line); },
                      /*worker_restarts=*/true);
  StartJob(&barriers);
  barriers.Dropped(1, "ipv4:127.0.0.1:1001");
  auto worker_0 =
      std::async(std::launch::async, [&] { return barriers.Arrive(kStep, kWorkers, 0, kLong); });
  // The new process of worker 1: init_worker's barrier lets it through alone, then it attends
  // and meets worker 0 in the step's round.
  EXPECT_TRUE(barriers.Arrive(kInit, kWorkers, 1, absl::Seconds(1)).ok());
  barriers.Attended(1, "ipv4:127.0.0.1:2001");
  EXPECT_TRUE(barriers.Arrive(kStep, kWorkers, 1, kLong).ok());
  EXPECT_TRUE(worker_0.get().ok());
  ASSERT_EQ(said.size(), 2u);
  EXPECT_NE(said[0].find("worker 1 is away: its connection from ipv4:127.0.0.1:1001"),
            std::string::npos)
      << said[0];
  EXPECT_NE(said[1].find("worker 1 is back (from ipv4:127.0.0.1:2001)"), std::string::npos)
      << said[1];
}

TEST(BarrierRestartsTest, TheArrivalOfAWorkerThatWentAwayIsWithdrawn) {
  // Three workers, so that worker 0 can look at the round without ending it.
  BarrierSet barriers(nullptr, /*worker_restarts=*/true);
  StartJob(&barriers, 3);
  auto dead = std::async(std::launch::async, [&] { return barriers.Arrive(kStep, 3, 1, kLong); });
  // Worker 1 waits in the step's round when its process dies.
  while (true) {
    absl::Status look = barriers.Arrive(kStep, 3, 0, absl::Milliseconds(20));
    ASSERT_EQ(look.code(), absl::StatusCode::kDeadlineExceeded) << look;
    if (look.message().find("2 of 3 workers arrived") != std::string::npos) break;
  }
  barriers.Dropped(1, "ipv4:127.0.0.1:1001");
  absl::Status withdrawn = dead.get();
  EXPECT_EQ(withdrawn.code(), absl::StatusCode::kAborted) << withdrawn;
  // Its arrival no longer counts, and a timeout says why the round waits.
  absl::Status look = barriers.Arrive(kStep, 3, 0, absl::Milliseconds(20));
  EXPECT_EQ(look.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(look.message().find("1 of 3 workers arrived"), std::string::npos) << look;
  EXPECT_NE(look.message().find("missing worker(s) 1, 2"), std::string::npos) << look;
  EXPECT_NE(look.message().find("; worker(s) 1 away, waited for to restart (worker_restarts): "
                                "worker 1: its connection from ipv4:127.0.0.1:1001 dropped"),
            std::string::npos)
      << look;
}

TEST(BarrierRestartsTest, AWorkerThatAttendsAgainBeforeItsOldCallDropsIsNotAway) {
  BarrierSet barriers(nullptr, /*worker_restarts=*/true);
  StartJob(&barriers);
  barriers.Attended(1, "ipv4:127.0.0.1:2001");  // its restarted process, first
  barriers.Dropped(1, "ipv4:127.0.0.1:1001");   // then the old call's drop is seen
  auto worker_0 =
      std::async(std::launch::async, [&] { return barriers.Arrive(kStep, kWorkers, 0, kLong); });
  // Not away, so a first arrival is counted, not let through.
  EXPECT_TRUE(barriers.Arrive(kStep, kWorkers, 1, kLong).ok());
  EXPECT_TRUE(worker_0.get().ok());
}

TEST(BarrierRestartsTest, AReportedFailureStillFailsTheJob) {
  BarrierSet barriers(nullptr, /*worker_restarts=*/true);
  StartJob(&barriers);
  barriers.Fail(1, "ValueError: bad batch");
  absl::Status status = barriers.Arrive(kStep, kWorkers, 0, kLong);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_NE(status.message().find("worker 1 failed (ValueError: bad batch)"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace fleet::ps::detail
