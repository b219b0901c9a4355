#pragma once
// Two pieces of work at once, for the checksum and the rows of a large table part.

#include <functional>

namespace fleet::ps::detail {

// Whether splitting work in two can pay: the machine has a second core.
bool HaveSecondCore();

// Runs `beside` on a new thread and `here` on this one, and returns when both are done. A
// process that can have no more threads (at its thread or address-space limit) still finishes
// the work: both then run here, one after the other, since the thread is a speed-up, not a
// need. An exception from `here` is rethrown after `beside` is done; `beside` must not throw.
void RunBoth(const std::function<void()>& here, const std::function<void()>& beside);

}  // namespace fleet::ps::detail
