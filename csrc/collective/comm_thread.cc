#include "collective/comm_thread.h"

#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fleet::collective {

void Work::Wait(Duration timeout, const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return done_; })) {
    throw Timeout(absl::StrCat(what, " did not finish within ", timeout.count() / 1000.0, " s"));
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::Done() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

double Work::run_seconds() {
  std::lock_guard<std::mutex> lock(mu_);
  return seconds_;
}

void Work::Finish(std::exception_ptr error, double seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
    seconds_ = seconds;
  }
  cv_.notify_all();
}

CommThread::CommThread(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] { Loop(); });
}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<Work> CommThread::Submit(std::function<void()> task) {
  auto work = std::make_shared<Work>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    FLEET_ENFORCE(!stop_, Unavailable, "the communication thread of ", name_, " has stopped");
    queue_.emplace_back(std::move(task), work);
  }
  cv_.notify_one();
  return work;
}

bool CommThread::RunIfIdle(const std::function<void()>& task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || busy_ || !queue_.empty()) return false;
    if (broken_) std::rethrow_exception(broken_);
    busy_ = true;
  }
  std::exception_ptr error = RunTask(task);
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    if (error && !broken_) broken_ = error;
  }
  cv_.notify_all();  // a task queued meanwhile waits for busy_ to clear
  if (error) std::rethrow_exception(error);
  return true;
}

std::exception_ptr CommThread::RunTask(const std::function<void()>& task) {
  try {
    task();
  } catch (const Error&) {
    return std::current_exception();
  } catch (const std::exception& e) {
    return std::make_exception_ptr(Internal(absl::StrCat(name_, ": ", e.what())));
  }
  return nullptr;
}

void CommThread::Loop() {
  for (;;) {
    std::function<void()> task;
    std::shared_ptr<Work> work;
    std::exception_ptr broken;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !busy_ && (stop_ || !queue_.empty()); });
      if (queue_.empty()) return;  // stopping, nothing left
      busy_ = true;
      task = std::move(queue_.front().first);
      work = std::move(queue_.front().second);
      queue_.pop_front();
      broken = stop_ ? std::make_exception_ptr(Unavailable(absl::StrCat(
                           "the communication thread of ", name_, " stopped before this call")))
                     : broken_;
    }
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr error = broken ? broken : RunTask(task);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      if (error && !broken_) broken_ = error;
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    work->Finish(error, broken ? 0 : elapsed.count());
  }
}

}  // namespace fleet::collective
