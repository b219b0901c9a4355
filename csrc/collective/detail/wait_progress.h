#pragma once
// Progress lines of long collective waits: a rank that waits for a peer at a collective's call
// check says so on stderr every 30 s ("waiting for rank 1 at barrier() #5 in group 'worker'
// (rank 0 of 2) (30 s of 1800)"), so that a wait under a long timeout (30 min by default) is
// not silent. One thread per group, woken once a second; a check only stores what it waits for
// under an uncontended lock, so the collectives' latency is unchanged.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace fleet::collective::detail {

class WaitProgress {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kPeriod{30};

  WaitProgress();
  ~WaitProgress();
  WaitProgress(const WaitProgress&) = delete;
  WaitProgress& operator=(const WaitProgress&) = delete;

  // A wait that started at `started` with `timeout` is now on `peer`. `describe` builds the
  // call's description ("barrier() #5 in group ..."); called only when a line is due, on this
  // object's thread, while the wait is still on (between Waiting and Done).
  template <typename Describe>
  void Waiting(int peer, Clock::time_point started, std::chrono::milliseconds timeout,
               const Describe& describe) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_ || started_ != started) {
      active_ = true;
      started_ = started;
      reported_ = 0;
      description_.clear();
    }
    peer_ = peer;
    timeout_ = timeout;
    describe_ = [&describe] { return describe(); };
  }
  // The wait is over (arrived, failed or timed out).
  void Done();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool active_ = false;
  Clock::time_point started_;
  int peer_ = -1;
  std::chrono::milliseconds timeout_{0};
  int reported_ = 0;  // lines printed for this wait
  std::string description_;
  std::function<std::string()> describe_;
  std::thread thread_;
};

}  // namespace fleet::collective::detail
