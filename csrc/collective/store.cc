#include "collective/store.h"

#include <algorithm>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "core/errors.h"

namespace fleet::collective {
namespace {

using Clock = std::chrono::steady_clock;

// Polling back-off: peers usually appear within milliseconds, but a rendezvous may wait for a
// process that is still importing, so the pause grows to a few tens of milliseconds.
class Backoff {
 public:
  void Sleep() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, std::chrono::microseconds(20000));
  }

 private:
  std::chrono::microseconds pause_{500};
};

std::string Seconds(Duration d) { return absl::StrCat(d.count() / 1000.0, " s"); }

}  // namespace

std::string Store::Get(const std::string& key, Duration timeout) {
  const auto deadline = Clock::now() + timeout;
  Backoff backoff;
  while (true) {
    if (auto value = TryGet(key)) return *std::move(value);
    FLEET_ENFORCE(Clock::now() < deadline, Timeout, Describe(), ": key '", key,
                  "' did not appear within ", Seconds(timeout));
    backoff.Sleep();
  }
}

void Store::Wait(const std::vector<std::string>& keys, Duration timeout) {
  const auto deadline = Clock::now() + timeout;
  Backoff backoff;
  while (!Check(keys)) {
    if (Clock::now() >= deadline) {
      throw Timeout(absl::StrCat(Describe(), ": keys [", absl::StrJoin(Missing(keys), ", "),
                                 "] did not appear within ", Seconds(timeout)));
    }
    backoff.Sleep();
  }
}

std::vector<std::string> Store::Missing(const std::vector<std::string>& keys) {
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (!Check({key})) missing.push_back(key);
  }
  return missing;
}

int64_t ParseCounter(const std::string& key, const std::string& value) {
  int64_t n = 0;
  FLEET_ENFORCE(absl::SimpleAtoi(value, &n), InvalidArgument, "store key '", key,
                "' holds a value that is not a counter (Add needs a decimal integer)");
  return n;
}

}  // namespace fleet::collective
