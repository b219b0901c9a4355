#include "ps/server/detail/round_pool.h"

#include <algorithm>

namespace fleet::ps::detail {

RoundPool::RoundPool(size_t threads) {
  for (size_t i = 1; i < threads; ++i) helpers_.emplace_back([this] { HelperLoop(); });
}

RoundPool::~RoundPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& helper : helpers_) helper.join();
}

size_t RoundPool::ThreadsFor(int configured) {
  if (configured > 0) return static_cast<size_t>(configured);
  const size_t cores = std::max<size_t>(std::thread::hardware_concurrency(), 1);
  return std::min(cores, kMaxAutoThreads);
}

size_t RoundPool::Drain(Batch& batch) {
  size_t ran = 0;
  for (size_t i = batch.next.fetch_add(1); i < batch.n; i = batch.next.fetch_add(1)) {
    try {
      (*batch.task)(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(batch.error_mu);
      if (!batch.error) batch.error = std::current_exception();
    }
    ++ran;
  }
  return ran;
}

RoundPool::Batch* RoundPool::Pending() const {
  for (Batch* posted : batches_) {
    if (posted->next.load() < posted->n) return posted;
  }
  return nullptr;
}

void RoundPool::Help(Batch* batch, std::unique_lock<std::mutex>& lock) {
  ++batch->users;  // its owner waits for this before the batch goes out of scope
  lock.unlock();
  const size_t ran = Drain(*batch);
  lock.lock();
  batch->finished += ran;
  --batch->users;
  if (batch->finished == batch->n && batch->users == 0) changed_.notify_all();
}

void RoundPool::ParallelFor(size_t n, const std::function<void(size_t)>& task) {
  if (n == 0) return;
  Batch batch(n, &task);
  if (helpers_.empty() || n == 1) {
    Drain(batch);
    if (batch.error) std::rethrow_exception(batch.error);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    batches_.push_back(&batch);
  }
  changed_.notify_all();
  const size_t ran = Drain(batch);
  std::unique_lock<std::mutex> lock(mu_);
  // Every index is handed out: no thread may pick the batch up any more.
  batches_.remove(&batch);
  batch.finished += ran;
  // Threads that took the batch before it left the list still run their last tasks and hold a
  // pointer to it until they have counted them; meanwhile this thread helps elsewhere.
  while (batch.finished != batch.n || batch.users != 0) {
    if (Batch* other = Pending()) {
      Help(other, lock);
    } else {
      changed_.wait(lock);
    }
  }
  lock.unlock();
  if (batch.error) std::rethrow_exception(batch.error);
}

void RoundPool::HelperLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (Batch* batch = Pending()) {
      Help(batch, lock);
    } else {
      changed_.wait(lock);
    }
  }
}

}  // namespace fleet::ps::detail
