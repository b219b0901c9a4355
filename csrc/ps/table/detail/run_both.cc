#include "ps/table/detail/run_both.h"

#include <exception>
#include <system_error>
#include <thread>

namespace fleet::ps::detail {

bool HaveSecondCore() { return std::thread::hardware_concurrency() >= 2; }

void RunBoth(const std::function<void()>& here, const std::function<void()>& beside) {
  std::thread helper;
  try {
    helper = std::thread(beside);
  } catch (const std::system_error&) {
    // No thread to be had: `beside` runs here after `here`.
  }
  std::exception_ptr error;
  try {
    here();
  } catch (...) {
    error = std::current_exception();
  }
  if (helper.joinable()) {
    helper.join();
  } else {
    beside();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace fleet::ps::detail
