#include "ps/server/detail/barrier.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet::ps::detail {

absl::Status BarrierSet::Arrive(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                                absl::Duration timeout) {
  return ArriveAndRun(name, num_workers, worker_id, timeout, false, nullptr, nullptr);
}

absl::Status BarrierSet::ArriveAndRun(const std::string& name, uint32_t num_workers,
                                      uint32_t worker_id, absl::Duration timeout, bool done,
                                      const RoundAction& action, uint32_t* done_workers) {
  // A bound before anything is sized by it: a job of more workers than this is not a job this
  // server serves, and a hostile request must not make it allocate or scan gigabits.
  constexpr uint32_t kMaxWorkers = 1u << 20;
  if (num_workers == 0 || num_workers > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat("barrier '", name, "': num_workers is ",
                                                   num_workers, ", expected 1 to ", kMaxWorkers));
  }
  if (worker_id >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("barrier '", name, "': worker id ", worker_id,
                                                   " is not in [0, ", num_workers, ")"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the server is shutting down");
  Round& round = rounds_[name];
  if (round.arrived == 0) {
    round.expected = num_workers;
    round.waiting.assign(num_workers, false);
  }
  if (round.expected != num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("barrier '", name, "': worker ", worker_id,
                                                   " expects ", num_workers, " workers, others ",
                                                   round.expected));
  }
  if (round.waiting[worker_id]) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier '", name, "': worker id ", worker_id,
                     " is already waiting in this round (two workers with one id?); not counted"));
  }
  const uint64_t generation = round.generation;
  if (done) ++round.done;
  if (++round.arrived == num_workers) {
    round.result_done = round.done;
    round.result = action ? action(round.done) : absl::OkStatus();
    round.arrived = 0;
    round.done = 0;
    round.waiting.assign(num_workers, false);
    ++round.generation;
    cv_.SignalAll();
    if (done_workers != nullptr) *done_workers = round.result_done;
    return round.result;
  }
  round.waiting[worker_id] = true;
  // Find the round again after each wait: inserting other names may move it.
  while (true) {
    Round& r = rounds_[name];
    if (r.generation != generation) {
      if (done_workers != nullptr) *done_workers = r.result_done;
      return r.result;
    }
    if (closed_) return absl::UnavailableError("the server is shutting down");
    if (cv_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline) {
      Round& late = rounds_[name];
      if (late.generation != generation) {
        if (done_workers != nullptr) *done_workers = late.result_done;
        return late.result;
      }
      const uint32_t arrived = late.arrived;
      // Name the first few that are missing (a job of thousands would drown the message).
      constexpr size_t kNamed = 16;
      std::vector<std::string> missing;
      const uint32_t absent = num_workers - arrived;
      for (uint32_t w = 0; w < late.waiting.size() && missing.size() < kNamed; ++w) {
        if (!late.waiting[w]) missing.push_back(absl::StrCat(w));
      }
      if (absent > missing.size()) {
        missing.push_back(absl::StrCat("and ", absent - missing.size(), " more"));
      }
      --late.arrived;
      if (done) --late.done;
      late.waiting[worker_id] = false;
      return absl::DeadlineExceededError(absl::StrCat(
          "barrier '", name, "': ", arrived, " of ", num_workers, " workers arrived within ",
          absl::FormatDuration(timeout), "; missing worker(s) ", absl::StrJoin(missing, ", ")));
    }
  }
}

void BarrierSet::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  cv_.SignalAll();
}

}  // namespace fleet::ps::detail
