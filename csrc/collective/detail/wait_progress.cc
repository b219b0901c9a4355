#include "collective/detail/wait_progress.h"

#include <cstdio>

namespace fleet::collective::detail {

WaitProgress::WaitProgress() : thread_([this] { Run(); }) {}

WaitProgress::~WaitProgress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void WaitProgress::Done() {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = false;
  describe_ = nullptr;
}

void WaitProgress::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // Once a second is enough for lines 30 s apart, and costs nothing between them.
    wake_.wait_for(lock, std::chrono::seconds(1));
    if (stop_ || !active_) continue;
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started_);
    if (waited < kPeriod * (reported_ + 1)) continue;
    ++reported_;
    if (description_.empty() && describe_) description_ = describe_();
    std::fprintf(stderr, "fleet: waiting for rank %d at %s (%lld s of %g)\n", peer_,
                 description_.c_str(), static_cast<long long>(waited.count()),
                 static_cast<double>(timeout_.count()) / 1000.0);
    std::fflush(stderr);
  }
}

}  // namespace fleet::collective::detail
