#pragma once
// SpinWait: the bounded poll a data-parallel replica makes before it sleeps on a condition.
//
// A data-parallel step hands work between replica threads a few times, microseconds apart; a
// wake-up from sleep costs tens of microseconds on an idle core, paid on the step's critical
// path, so a waiter first polls for the partner it expects soon. The poll is bounded twice:
//  - by a budget (DataParallelOptions::spin_before_sleep_us; 0: sleep at once);
//  - by preemption: when two consecutive clock reads of the poll are further apart than a poll
//    round can take, the thread lost its core, i.e. the machine has fewer free cores than
//    runnable threads. Polling on would keep the core from the thread being waited for, so the
//    poll gives up at once and the caller sleeps.

#include <chrono>

namespace fleet::trainer {

// A gap between two clock reads of a poll longer than this means the poller was descheduled
// (a round of 64 pause instructions takes about 1-5 us).
inline constexpr std::chrono::microseconds kSpinPreemptedGap{25};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls done() until it is true (returns true), the budget is spent or the poller is found to
// have been preempted (returns false). A zero budget checks done() once.
template <typename Done>
bool SpinWait(Done done, std::chrono::microseconds budget) {
  if (done()) return true;
  if (budget.count() <= 0) return false;
  auto last = std::chrono::steady_clock::now();
  const auto until = last + budget;
  while (true) {
    for (int i = 0; i < 64; ++i) CpuRelax();
    if (done()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= until || now - last > kSpinPreemptedGap) return false;
    last = now;
  }
}

}  // namespace fleet::trainer
