#include "ps/server/detail/barrier.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet::ps::detail {

absl::Status BarrierSet::Arrive(const std::string& name, uint32_t num_workers, uint32_t worker_id,
                                absl::Duration timeout) {
  return ArriveAndRun(name, num_workers, worker_id, timeout, false, nullptr, nullptr, {});
}

absl::Status BarrierSet::ArriveAndRun(const std::string& name, uint32_t num_workers,
                                      uint32_t worker_id, absl::Duration timeout, bool done,
                                      const RoundAction& action, uint32_t* done_workers,
                                      StepOutput output) {
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
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the server is shutting down");
  if (!failure_.ok()) return failure_;
  Round& round = rounds_[name];
  if (round.arrived == 0) {
    round.expected = num_workers;
    round.waiting.assign(num_workers, false);
    round.said_done.assign(num_workers, false);
    round.outputs.assign(num_workers, StepOutput{});
  }
  if (returning_.erase(worker_id) > 0 && round.generation > 0 && round.arrived == 0) {
    // A restarted worker's first barrier: init_worker's, which the job passed long ago and
    // nobody waits at. It goes on to rejoin (its presence call brings it back).
    return absl::OkStatus();
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
  const uint64_t epoch = away_epoch_[worker_id];
  if (done) ++round.done;
  if (++round.arrived == num_workers) {
    round.result_done = round.done;
    if (action) {
      // Every other arrival of the round waits (it cannot leave while this lock is held), so
      // its output is still its caller's.
      round.outputs[worker_id] = output;
      std::vector<StepOutput> outputs;
      for (const StepOutput& out : round.outputs) {
        if (!out.values.empty()) outputs.push_back(out);
      }
      round.result = action(round.done, outputs);
    } else {
      round.result = absl::OkStatus();
    }
    round.arrived = 0;
    round.done = 0;
    round.waiting.assign(num_workers, false);
    round.said_done.assign(num_workers, false);
    round.outputs.assign(num_workers, StepOutput{});
    ++round.generation;
    cv_.SignalAll();
    if (done_workers != nullptr) *done_workers = round.result_done;
    return round.result;
  }
  round.waiting[worker_id] = true;
  round.said_done[worker_id] = done;
  round.outputs[worker_id] = output;
  absl::Time next_report = start + kProgressEvery;
  // Find the round again after each wait: inserting other names may move it.
  while (true) {
    Round& r = rounds_[name];
    if (r.generation != generation) {
      if (done_workers != nullptr) *done_workers = r.result_done;
      return r.result;
    }
    if (closed_) {
      r.outputs[worker_id] = StepOutput{};
      return absl::UnavailableError("the server is shutting down");
    }
    if (away_epoch_[worker_id] != epoch) {  // withdrawn: its caller is gone
      return absl::AbortedError(
          absl::StrCat("barrier '", name, "': worker ", worker_id, " went away while it waited"));
    }
    if (!failure_.ok()) {
      --r.arrived;
      if (done) --r.done;
      r.waiting[worker_id] = false;
      r.said_done[worker_id] = false;
      r.outputs[worker_id] = StepOutput{};
      return failure_;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      const uint32_t arrived = r.arrived;
      const std::string missing = Missing(r, num_workers);
      // A missing worker that waits in another barrier is in another call than this one (one
      // in save, another in stop_worker): say where, so that the error names both calls.
      constexpr size_t kNamed = 16;
      std::vector<std::string> elsewhere;
      for (const auto& [other_name, other] : rounds_) {
        if (other_name == name) continue;
        for (uint32_t w = 0; w < other.waiting.size() && w < r.waiting.size(); ++w) {
          if (other.waiting[w] && !r.waiting[w] && elsewhere.size() < kNamed) {
            elsewhere.push_back(absl::StrCat("worker ", w, " waits in barrier '", other_name, "'"));
          }
        }
      }
      --r.arrived;
      if (done) --r.done;
      r.waiting[worker_id] = false;
      r.said_done[worker_id] = false;
      r.outputs[worker_id] = StepOutput{};
      return absl::DeadlineExceededError(absl::StrCat(
          "barrier '", name, "': ", arrived, " of ", num_workers, " workers arrived within ",
          absl::FormatDuration(timeout), "; missing worker(s) ", missing,
          elsewhere.empty() ? "" : "; ", absl::StrJoin(elsewhere, "; "), AwayNote()));
    }
    if (now >= next_report) {
      next_report = now + kProgressEvery;
      // One line per round: from the lowest worker id waiting.
      uint32_t first = 0;
      while (first < r.waiting.size() && !r.waiting[first]) ++first;
      if (log_ && first == worker_id) {
        log_(absl::StrCat("waiting for worker(s) ", Missing(r, num_workers), " at barrier '", name,
                          "' (", absl::ToInt64Seconds(now - start), " s of ",
                          absl::ToInt64Seconds(timeout), ")"));
      }
    }
    cv_.WaitWithDeadline(&mu_, std::min(deadline, next_report));
  }
}

std::string BarrierSet::Missing(const Round& round, uint32_t num_workers) {
  // Name the first few that are missing (a job of thousands would drown the message).
  constexpr size_t kNamed = 16;
  std::vector<std::string> missing;
  const uint32_t absent = num_workers - round.arrived;
  for (uint32_t w = 0; w < round.waiting.size() && missing.size() < kNamed; ++w) {
    if (!round.waiting[w]) missing.push_back(absl::StrCat(w));
  }
  if (absent > missing.size()) {
    missing.push_back(absl::StrCat("and ", absent - missing.size(), " more"));
  }
  return absl::StrJoin(missing, ", ");
}

void BarrierSet::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  cv_.SignalAll();
}

bool BarrierSet::WaitForClose(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&closed_), timeout);
}

void BarrierSet::Fail(uint32_t worker_id, const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return;
  failure_ = absl::AbortedError(
      absl::StrCat("worker ", worker_id, " failed (", why, "); the job cannot go on"));
  cv_.SignalAll();
}

void BarrierSet::Leave(uint32_t worker_id) {
  absl::MutexLock lock(&mu_);
  left_.insert(worker_id);
}

void BarrierSet::Attended(uint32_t worker_id, const std::string& peer) {
  absl::MutexLock lock(&mu_);
  ++present_[worker_id];
  returning_.erase(worker_id);
  if (away_.erase(worker_id) > 0 && log_) {
    log_(absl::StrCat("worker ", worker_id, " is back (from ", peer,
                      "): it rejoins the job (worker_restarts)"));
  }
}

void BarrierSet::Dropped(uint32_t worker_id, const std::string& peer) {
  const std::string why = absl::StrCat("its connection from ", peer,
                                       " dropped before fleet.stop_worker(): the process exited "
                                       "or was killed, or its machine is gone");
  {
    absl::MutexLock lock(&mu_);
    const int still_open = --present_[worker_id];
    if (closed_ || left_.contains(worker_id)) return;
    if (worker_restarts_) {
      if (still_open > 0) return;  // its restarted process attends already
      away_[worker_id] = why;
      returning_.insert(worker_id);
      WithdrawLocked(worker_id);
      cv_.SignalAll();
      if (log_) {
        log_(absl::StrCat("worker ", worker_id, " is away: ", why,
                          "; the barriers wait for it to restart (worker_restarts)"));
      }
      return;
    }
  }
  Fail(worker_id, why);
}

void BarrierSet::WithdrawLocked(uint32_t worker_id) {
  ++away_epoch_[worker_id];
  for (auto& [name, round] : rounds_) {
    if (worker_id >= round.waiting.size() || !round.waiting[worker_id]) continue;
    round.waiting[worker_id] = false;
    --round.arrived;
    if (round.said_done[worker_id]) --round.done;
    round.said_done[worker_id] = false;
    round.outputs[worker_id] = StepOutput{};
  }
}

std::string BarrierSet::AwayNote() const {
  if (away_.empty()) return "";
  std::vector<uint32_t> ids;
  for (const auto& [id, why] : away_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return absl::StrCat("; worker(s) ", absl::StrJoin(ids, ", "),
                      " away, waited for to restart (worker_restarts): worker ", ids[0], ": ",
                      away_.at(ids[0]));
}

}  // namespace fleet::ps::detail
