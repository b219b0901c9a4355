#include "distributed/detail/async_communicator.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"

namespace fleet::distributed::detail {
namespace {

constexpr absl::Duration kMergeWait = absl::Milliseconds(10);
constexpr absl::Duration kRecvPeriod = absl::Milliseconds(10);
// Spare gradient buffers kept for reuse: one being filled by a trainer thread and one being
// pushed at a time, plus those in the queue.
constexpr size_t kMaxSpareDense = 4;
// Retired pull buffers kept for reuse at least: the staged values replace one each refresh, and
// a trainer thread's parameters may still view one or two (the values it installed last).
constexpr size_t kMinRetiredPulls = 4;
// Dense items whose gradients are written into slots of the shared segments (DenseShares): each
// holds a slot per server until its push's reply, and the slots (ShmSlots::kSlots a server)
// serve the sparse calls too; further items use a buffer of their own.
constexpr int kMaxItemsInShares = 2;

// Named, so that a profile or benchmarks/cpu_window.py tells the communicator's CPU and waits
// from the trainers' (at most 15 characters).
void NameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace

AsyncCommunicator::AsyncCommunicator(CommunicatorConfig config,
                                     std::shared_ptr<ps::PsClient> client, Scope* root)
    : CommunicatorBase(std::move(config), std::move(client), root) {
  FLEET_ENFORCE(config_.send_queue_size > 0 && config_.max_merge_var_num > 0 &&
                    config_.thread_pool_size > 0 && config_.send_wait_times >= 0,
                InvalidArgument,
                "async communicator: send_queue_size, max_merge_var_num and "
                "thread_pool_size must be positive, send_wait_times not negative");
  // A prefetch starts before the push is acknowledged: a sparse bound excludes it (see .h).
  if (config_.prefetch_sparse && config_.max_sparse_staleness < 0 && !config_.sparse.empty()) {
    prefetcher_ = std::make_shared<SparsePrefetcher>(client_, config_.sparse);
  }
  auto merge_limit = [this](uint32_t table_id) -> size_t {
    auto table = client_->Table(table_id);
    const bool sgd = table.ok() && table->optimizer().has_sgd();
    return sgd ? config_.max_merge_var_num : 1;
  };
  absl::MutexLock lock(&mu_);
  for (const SparseVar& var : config_.sparse) {
    Queue q;
    q.table_id = var.table_id;
    q.what = absl::StrCat("push of '", var.name, "' gradients");
    q.max_merge = merge_limit(var.table_id);
    queues_.push_back(std::move(q));
  }
  if (config_.dense_table_id) {
    Queue q;
    q.table_id = *config_.dense_table_id;
    q.dense = true;
    q.what = "push of the dense gradients";
    q.max_merge = merge_limit(q.table_id);
    queues_.push_back(std::move(q));
  }
}

AsyncCommunicator::~AsyncCommunicator() {
  if (!stopped_) DestroyedWithoutStop();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    WakeAll();
  }
  JoinThreads();
  AbandonDirectPush();
}

void AsyncCommunicator::StartThreads() {
  // The dense queue has a thread of its own that refreshes the dense values right after each
  // of its pushes: the refresh is what a bounded-staleness step waits for, so no sparse push
  // may sit between the two. The sparse queues share thread_pool_size threads.
  std::vector<size_t> sparse_queues;
  absl::MutexLock lock(&mu_);
  // Each send thread waits on a condition of its own, which only its queues' events signal.
  auto give_sender = [this](const std::vector<size_t>& owned) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::CondVar* work = &sender_work_.emplace_back();
    for (size_t q : owned) queues_[q].sender = work;
  };
  for (size_t q = 0; q < queues_.size(); ++q) {
    if (queues_[q].dense) {
      give_sender({q});
      const bool refresh = !config_.independent_recv;
      threads_.emplace_back([this, q, refresh] {
        NameThisThread("ps_send_dense");
        SendLoop({q}, refresh);
      });
    } else {
      sparse_queues.push_back(q);
    }
  }
  const size_t pool = std::min<size_t>(config_.thread_pool_size, sparse_queues.size());
  for (size_t t = 0; t < pool; ++t) {
    std::vector<size_t> owned;
    for (size_t i = t; i < sparse_queues.size(); i += pool) owned.push_back(sparse_queues[i]);
    give_sender(owned);
    threads_.emplace_back([this, owned] {
      NameThisThread("ps_send_sparse");
      SendLoop(owned, /*refresh_dense=*/false);
    });
  }
  if (config_.dense_table_id && config_.independent_recv) {
    threads_.emplace_back([this] {
      NameThisThread("ps_recv_dense");
      RecvLoop();
    });
  }
  started_ = true;
}

void AsyncCommunicator::CheckError() {
  if (error_) std::rethrow_exception(error_);
}

int64_t AsyncCommunicator::Enqueue(size_t q, Item item) {
  absl::MutexLock lock(&mu_);
  CheckError();
  FLEET_ENFORCE(started_ && !stop_, Unavailable,
                "the async communicator is not running (fleet.init_worker() starts it, "
                "fleet.stop_worker() stops it)");
  // Training waits only here, when the queue is full (back-pressure on a slow network).
  if (queues_[q].items.size() >= config_.send_queue_size) ++queue_full_waits_;
  while (queues_[q].items.size() >= config_.send_queue_size && !stop_ && !error_) {
    changed_.Wait(&mu_);
  }
  CheckError();
  queues_[q].items.push_back(std::move(item));
  WakeSender(queues_[q]);
  return ++queues_[q].enqueued;
}

void AsyncCommunicator::PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                   absl::Span<const float> grads) {
  PushSparseOwned(thread, table_id, {keys.begin(), keys.end()}, {grads.begin(), grads.end()});
}

void AsyncCommunicator::PushSparseOwned(int thread, uint32_t table_id, std::vector<int64_t> keys,
                                        std::vector<float> grads) {
  CheckPushSize(table_id, keys, grads);
  Enqueue(SparseQueue(table_id), Item{std::move(keys), std::move(grads)});
  // The next batch's rows may now be pulled.
  if (prefetcher_) prefetcher_->Release(thread, table_id);
}

void AsyncCommunicator::PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                   absl::Span<float> out, bool from_servers) {
  // The message is only built on an error: this runs once per table and step.
  if (!from_servers && prefetcher_ &&
      prefetcher_->Take(thread, table_id, keys, out, Sparse(table_id).name)) {
    return;
  }
  PullAtStep(table_id, keys, out, from_servers);
}

std::shared_ptr<Buffer> AsyncCommunicator::PullSparseRows(int thread, uint32_t table_id,
                                                          absl::Span<const int64_t> keys,
                                                          size_t dim, bool from_servers) {
  if (!from_servers && prefetcher_) {
    std::shared_ptr<Buffer> rows =
        prefetcher_->TakeRows(thread, table_id, keys, keys.size() * dim, Sparse(table_id).name);
    if (rows != nullptr) return rows;
  }
  absl::Span<float> out;
  std::shared_ptr<Buffer> rows = RowsBuffer(keys.size() * dim, &out);
  PullAtStep(table_id, keys, out, from_servers);
  return rows;
}

void AsyncCommunicator::PullAtStep(uint32_t table_id, absl::Span<const int64_t> keys,
                                   absl::Span<float> out, bool from_servers) {
  if (!from_servers && config_.max_sparse_staleness >= 0) AwaitSparsePushes(SparseQueue(table_id));
  step_pulls_.fetch_add(1, std::memory_order_relaxed);
  PullFromServers(table_id, keys, out);
}

TrainerWaits AsyncCommunicator::trainer_waits() const {
  TrainerWaits waits;
  {
    absl::MutexLock lock(&mu_);
    waits.dense_refresh = dense_refresh_waits_;
    waits.send_queue_full = queue_full_waits_;
  }
  waits.sparse_prefetch = prefetcher_ ? prefetcher_->waited() : 0;
  waits.sparse_pull = step_pulls_.load(std::memory_order_relaxed);
  return waits;
}

size_t AsyncCommunicator::SparseQueue(uint32_t table_id) const {
  // The sparse queues come first, in config order (the constructor).
  size_t q = 0;
  while (q < config_.sparse.size() && config_.sparse[q].table_id != table_id) ++q;
  return q;
}

void AsyncCommunicator::AwaitSparsePushes(size_t q) {
  absl::MutexLock lock(&mu_);
  CheckError();
  Queue& queue = queues_[q];
  const int64_t target = queue.enqueued - config_.max_sparse_staleness;
  if (queue.pushed >= target) return;
  ++queue.pulls_waiting;
  WakeSender(queue);  // a send thread waiting for a fuller merge pushes now
  while (queue.pushed < target && !error_ && !stop_) changed_.Wait(&mu_);
  --queue.pulls_waiting;
  CheckError();
}

std::vector<std::shared_ptr<framework::StepHook>> AsyncCommunicator::hooks() {
  std::vector<std::shared_ptr<framework::StepHook>> all = CommunicatorBase::hooks();
  if (prefetcher_) all.push_back(prefetcher_);
  return all;
}

void AsyncCommunicator::SendDense(int thread, const std::vector<const LoDTensor*>& grads) {
  Item item;
  {
    absl::MutexLock lock(&mu_);
    // Straight into the memory the push sends from, when its gradients go alone (not merged).
    const size_t q = config_.sparse.size();  // the dense queue, when there is a dense table
    if (q < queues_.size() && queues_[q].max_merge == 1 && items_in_shares_ < kMaxItemsInShares) {
      item.shares = client_->TakeDenseShares(queues_[q].table_id);
    }
    if (item.shares != nullptr) {
      ++items_in_shares_;
    } else {
      item.values = TakeDenseBuffer();
    }
  }
  // The dense variables tile [0, dense_size()) (checked at construction): every float is set.
  try {
    if (item.shares != nullptr) {
      GatherDense(grads, item.shares.get());
    } else {
      GatherDense(grads, item.values.data(), /*add=*/false);
    }
  } catch (...) {
    absl::MutexLock lock(&mu_);
    if (item.shares != nullptr) --items_in_shares_;
    throw;
  }
  const int64_t number = SendOrEnqueueDense(std::move(item));
  absl::MutexLock lock(&mu_);
  // Sized before the pass's threads start (OnPassBegin); this covers a caller without a pass.
  if (static_cast<size_t>(thread) >= own_dense_.size()) own_dense_.resize(thread + 1);
  own_dense_[thread].push_back(number);
}

bool AsyncCommunicator::MayPushDirectly(const Queue& queue) const {
  // With a bound above 0 or none the step boundary does not wait for the push, which would then
  // wait for its finish longer than the send thread takes to stage its values.
  return config_.max_dense_staleness == 0 && !config_.independent_recv && queue.max_merge == 1 &&
         queue.items.empty() && queue.in_flight == 0 && !direct_.has_value() && !stop_ && !error_;
}

int64_t AsyncCommunicator::SendOrEnqueueDense(Item item) {
  const size_t q = config_.sparse.size();  // the dense queue
  DirectPush* direct = nullptr;
  int64_t number = 0;
  uint32_t table_id = 0;
  {
    absl::MutexLock lock(&mu_);
    Queue& queue = queues_[q];
    if (started_ && MayPushDirectly(queue)) {
      ++queue.in_flight;
      number = ++queue.enqueued;
      table_id = queue.table_id;
      direct = &direct_.emplace();
      direct->refreshed = TakePullBuffer();
      direct->in_shares = item.shares != nullptr ? 1 : 0;
      direct->item = std::move(item);
      ++direct_pushes_;
    }
  }
  if (direct == nullptr) return Enqueue(q, std::move(item));
  // No other thread touches *direct until its future is set (DirectPushToFinish).
  const absl::Span<float> out(static_cast<float*>(direct->refreshed->data()), dense_size());
  ps::Future future = direct->item.shares != nullptr
                          ? client_->PushPullDense(table_id, std::move(direct->item.shares), out)
                          : client_->PushPullDense(table_id, direct->item.values, out);
  absl::MutexLock lock(&mu_);
  direct->future = std::move(future);
  if (direct->launch_awaited) {
    dense_staged_.SignalAll();
    changed_.SignalAll();
    WakeSender(queues_[q]);
  }
  return number;
}

bool AsyncCommunicator::DirectPushToFinish() const {
  return direct_.has_value() && direct_->future.has_value() && !direct_->finishing;
}

bool AsyncCommunicator::AwaitDirectPush() {
  if (!direct_.has_value() || DirectPushToFinish()) return false;
  // The thread that launches or finishes it wakes the waiters when it is done.
  direct_->launch_awaited = true;
  return true;
}

bool AsyncCommunicator::FinishOrAwaitDirectPush() {
  if (!DirectPushToFinish()) {
    AwaitDirectPush();
    return false;
  }
  FinishDirectPush();
  return true;
}

void AsyncCommunicator::FinishDirectPush() {
  direct_->finishing = true;
  const ps::Future future = *direct_->future;
  // Others may queue, take and stage meanwhile; they see the push as being finished.
  mu_.Unlock();
  const absl::Status status = future.Wait();
  mu_.Lock();
  Queue& queue = queues_[config_.sparse.size()];
  DirectPush done = std::move(*direct_);
  direct_.reset();
  --queue.in_flight;
  items_in_shares_ -= done.in_shares;
  if (status.ok()) {
    ++queue.pushed;
    ++dense_pushed_;
    ReturnDenseBuffer(std::move(done.item.values));
    // Its reply holds every dense push of this worker so far: none was queued or in flight.
    StageDense(std::move(done.refreshed), dense_pushed_);
  } else if (!error_) {
    try {
      ThrowIfError(status, absl::StrCat(queue.what, " and the refresh of the dense values"));
    } catch (...) {
      error_ = std::current_exception();
    }
    WakeAll();
  }
  changed_.SignalAll();
  // Only a dense item queued behind the push has its send thread wait for it.
  if (!queue.items.empty()) WakeSender(queue);
}

void AsyncCommunicator::AbandonDirectPush() {
  std::optional<ps::Future> future;
  {
    absl::MutexLock lock(&mu_);
    if (direct_.has_value()) future = direct_->future;
  }
  // Its RPC writes the refreshed buffer until it ends; its error was not asked for.
  if (future.has_value()) future->Wait().IgnoreError();
  absl::MutexLock lock(&mu_);
  direct_.reset();
}

int64_t AsyncCommunicator::direct_dense_pushes() const {
  absl::MutexLock lock(&mu_);
  return direct_pushes_;
}

void AsyncCommunicator::PrepareThreadScope(int thread, Scope* scope) {
  if (!config_.dense_table_id) return;
  absl::MutexLock lock(&mu_);
  CopyDenseParamsInto(scope);
  const size_t t = static_cast<size_t>(thread);
  if (t >= thread_installed_.size()) thread_installed_.resize(t + 1);
  thread_installed_[t] = root_installed_;
  private_dense_ = true;
}

void AsyncCommunicator::OnPassBegin(const framework::PassInfo& pass) {
  dataset_pass_ = pass.dataset_pass;
  absl::MutexLock lock(&mu_);
  // Before any thread runs: SendDense and BeforeStep then never resize it under each other.
  if (own_dense_.size() < static_cast<size_t>(pass.num_threads)) {
    own_dense_.resize(pass.num_threads);
  }
  // A pass whose threads got no private copies (Executor.run) reads the root scope's values.
  if (!pass.dataset_pass) private_dense_ = false;
  share_staged_ = pass.dataset_pass && (pass.num_threads == 1 || !WritesDenseParams(pass));
  // Besides the staged values and the one being pulled, each thread's views may hold one.
  retired_limit_ = std::max<size_t>(kMinRetiredPulls, 2 + static_cast<size_t>(pass.num_threads));
}

bool AsyncCommunicator::WritesDenseParams(const framework::PassInfo& pass) const {
  if (!pass.written_vars) return true;  // unknown: any may be
  for (const std::string& written : *pass.written_vars) {
    for (const DenseVar& var : config_.dense) {
      if (var.param == written) return true;
    }
  }
  return false;
}

AsyncCommunicator::Installed& AsyncCommunicator::InstalledFor(int thread) {
  const size_t t = static_cast<size_t>(thread);
  return private_dense_ && t < thread_installed_.size() ? thread_installed_[t] : root_installed_;
}

void AsyncCommunicator::BeforeStep(const framework::StepInfo& info) {
  if (!config_.dense_table_id) return;
  absl::MutexLock lock(&mu_);
  // A dataset pass's thread reads its private copy (which info.scope finds), others the root's.
  Installed& installed = InstalledFor(info.thread);
  const bool root = &installed == &root_installed_;
  const Scope* target = root ? root_ : info.scope;
  // A thread's private copy in a pass whose steps write no dense parameter, or of its only
  // thread: no step writes the staged buffer (see the class comment).
  const bool share = !root && share_staged_;
  InstallStagedDense(target, &installed, share);
  if (config_.max_dense_staleness < 0) return;
  // The thread may have S gradients of its own not yet in the values it reads.
  const size_t t = static_cast<size_t>(info.thread);
  if (t >= own_dense_.size()) return;
  const size_t allowed = static_cast<size_t>(config_.max_dense_staleness);
  bool waited = false;
  while (true) {
    std::deque<int64_t>& mine = own_dense_[t];
    while (!mine.empty() && mine.front() <= installed.through) mine.pop_front();
    if (mine.size() <= allowed || error_ || stop_) break;
    // A push this thread may finish (its own or a sibling's) is finished here, its reply waking
    // this thread directly; the step counts as waiting unless that reply was already there.
    waited = waited || !(DirectPushToFinish() && direct_->future->Ready());
    if (!FinishOrAwaitDirectPush()) dense_staged_.Wait(&mu_);
    InstallStagedDense(target, &installed, share);
  }
  if (waited) ++dense_refresh_waits_;
  CheckError();
}

void AsyncCommunicator::InstallStagedDense(const Scope* scope, Installed* installed, bool share) {
  if (staged_count_ == installed->stage) return;
  if (share) {
    ShareDenseParams(staged_dense_, scope);
  } else {
    WriteDenseParams(static_cast<const float*>(staged_dense_->data()), scope);
  }
  installed->stage = staged_count_;
  installed->through = staged_through_;
}

void AsyncCommunicator::RefreshDense() {
  int64_t through;
  std::shared_ptr<Buffer> values;
  {
    absl::MutexLock lock(&mu_);
    through = dense_pushed_;
    values = TakePullBuffer();
  }
  WaitOk(client_->PullDense(*config_.dense_table_id,
                            absl::MakeSpan(static_cast<float*>(values->data()), dense_size())),
         "pull of the dense parameters");
  absl::MutexLock lock(&mu_);
  StageDense(std::move(values), through);
}

void AsyncCommunicator::StageDense(std::shared_ptr<Buffer> values, int64_t through) {
  if (through >= staged_through_) {
    // The previous staged values, installed or superseded, retire.
    staged_dense_.swap(values);
    staged_through_ = through;
    ++staged_count_;
  }
  if (values != nullptr) RetirePullBuffer(std::move(values));
  dense_staged_.SignalAll();
}

void AsyncCommunicator::WakeAll() {
  changed_.SignalAll();
  dense_staged_.SignalAll();
  for (absl::CondVar& work : sender_work_) work.SignalAll();
}

void AsyncCommunicator::WakeSender(const Queue& queue) {
  // Before StartThreads no thread waits.
  if (queue.sender != nullptr) queue.sender->Signal();
}

std::vector<float> AsyncCommunicator::TakeDenseBuffer() {
  std::vector<float> buffer;
  if (!spare_dense_.empty()) {
    buffer = std::move(spare_dense_.back());
    spare_dense_.pop_back();
  }
  buffer.resize(dense_size());
  return buffer;
}

void AsyncCommunicator::ReturnDenseBuffer(std::vector<float> buffer) {
  if (buffer.size() == dense_size() && spare_dense_.size() < kMaxSpareDense) {
    spare_dense_.push_back(std::move(buffer));
  }
}

std::shared_ptr<Buffer> AsyncCommunicator::TakePullBuffer() {
  for (size_t i = 0; i < retired_pulls_.size(); ++i) {
    // Held by this list alone: no parameter views it any more. The acquire pairs with the
    // release of the last view's reference, so its reads happen before the pull's writes.
    if (retired_pulls_[i].use_count() != 1) continue;
    std::atomic_thread_fence(std::memory_order_acquire);
    std::shared_ptr<Buffer> buffer = std::move(retired_pulls_[i]);
    retired_pulls_[i] = std::move(retired_pulls_.back());
    retired_pulls_.pop_back();
    return buffer;
  }
  return std::make_shared<Buffer>(dense_size() * sizeof(float));
}

void AsyncCommunicator::RetirePullBuffer(std::shared_ptr<Buffer> buffer) {
  // Beyond the limit it goes with its last view (a long-lived view of a parameter).
  if (retired_pulls_.size() < retired_limit_) retired_pulls_.push_back(std::move(buffer));
}

std::vector<AsyncCommunicator::Item> AsyncCommunicator::Take(size_t q) {
  Queue& queue = queues_[q];
  // Wait a little for a full merge, as Paddle's send_wait_times does; but never for more than
  // the queue can hold: with send_queue_size < max_merge_var_num the trainer is blocked on the
  // full queue, and each wait would add send_wait_times x 10 ms to every step (word2vec with
  // SGD and a queue of 1 ran 11x slower so).
  const size_t merge_target = std::min(queue.max_merge, config_.send_queue_size);
  // Nor while a pull waits for this queue's pushes (max_sparse_staleness).
  for (int i = 0; i < config_.send_wait_times && !stop_ && merge_target > 1 &&
                  queue.pulls_waiting == 0 && queue.items.size() < merge_target;
       ++i) {
    queue.sender->WaitWithTimeout(&mu_, kMergeWait);
  }
  std::vector<Item> items;
  while (!queue.items.empty() && items.size() < queue.max_merge) {
    items.push_back(std::move(queue.items.front()));
    queue.items.pop_front();
  }
  queue.in_flight += static_cast<int>(items.size());
  if (!items.empty()) changed_.SignalAll();  // room in the queue
  return items;
}

void AsyncCommunicator::Send(const Queue& queue, std::vector<Item>& items,
                             std::shared_ptr<Buffer>* refreshed) {
  if (queue.dense && items[0].shares != nullptr) {
    // Alone (max_merge 1, see SendDense): the push sends from the shares.
    if (refreshed == nullptr) {
      WaitOk(client_->PushDense(queue.table_id, std::move(items[0].shares)), queue.what);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      *refreshed = TakePullBuffer();
    }
    WaitOk(client_->PushPullDense(
               queue.table_id, std::move(items[0].shares),
               absl::MakeSpan(static_cast<float*>((*refreshed)->data()), dense_size())),
           absl::StrCat(queue.what, " and the refresh of the dense values"));
    return;
  }
  if (queue.dense) {
    std::vector<float>& sum = items[0].values;
    for (size_t i = 1; i < items.size(); ++i) {
      for (size_t j = 0; j < sum.size(); ++j) sum[j] += items[i].values[j];
    }
    if (refreshed == nullptr) {
      WaitOk(client_->PushDense(queue.table_id, sum), queue.what);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      *refreshed = TakePullBuffer();
    }
    // The values after this push in its reply: no PullDense, one round trip a step.
    WaitOk(client_->PushPullDense(
               queue.table_id, sum,
               absl::MakeSpan(static_cast<float*>((*refreshed)->data()), dense_size())),
           absl::StrCat(queue.what, " and the refresh of the dense values"));
    return;
  }
  Item merged = std::move(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    merged.keys.insert(merged.keys.end(), items[i].keys.begin(), items[i].keys.end());
    merged.values.insert(merged.values.end(), items[i].values.begin(), items[i].values.end());
  }
  // The client sums the rows of repeated ids before sending (merge by id).
  WaitOk(client_->PushSparse(queue.table_id, merged.keys, merged.values), queue.what);
}

void AsyncCommunicator::SendLoop(std::vector<size_t> queues, bool refresh_dense) {
  try {
    while (true) {
      bool sent = false;
      for (size_t q : queues) {
        std::vector<Item> items;
        Queue* queue;
        {
          absl::MutexLock lock(&mu_);
          if (queues_[q].dense && direct_.has_value()) {
            // A later dense item waits behind the push a trainer thread started (it goes
            // first: the pushes of the dense queue go one at a time, in order).
            if (queues_[q].items.empty() || !FinishOrAwaitDirectPush()) continue;
            CheckError();
          }
          items = Take(q);
          queue = &queues_[q];
        }
        if (items.empty()) continue;
        const int n = static_cast<int>(items.size());
        int in_shares = 0;
        for (const Item& item : items) in_shares += item.shares != nullptr ? 1 : 0;
        // The dense queue's own thread refreshes the values with its push (refresh_dense).
        std::shared_ptr<Buffer> refreshed;
        const bool refresh = queue->dense && refresh_dense;
        Send(*queue, items, refresh ? &refreshed : nullptr);
        sent = true;
        absl::MutexLock lock(&mu_);
        queue->in_flight -= n;
        queue->pushed += n;
        if (queue->dense) {
          dense_pushed_ += n;
          items_in_shares_ -= in_shares;
          for (Item& item : items) ReturnDenseBuffer(std::move(item.values));
          // The reply's values include every push of this worker so far: the pushes of the
          // dense queue go one at a time, on this thread.
          if (refresh) StageDense(std::move(refreshed), dense_pushed_);
        }
        changed_.SignalAll();
      }
      absl::MutexLock lock(&mu_);
      // Queues without an item this thread may push now (a dense item behind a direct push
      // that another thread launches or finishes waits for that thread's signal).
      auto all_empty = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        for (size_t q : queues) {
          if (!queues_[q].items.empty() && !(queues_[q].dense && AwaitDirectPush())) return false;
        }
        return true;
      };
      if (stop_) {
        if (all_empty()) return;
      } else if (!sent) {
        // Until an item is queued (Enqueue signals this thread's condition) or stop.
        while (!stop_ && all_empty()) queues_[queues.front()].sender->Wait(&mu_);
      }
    }
  } catch (...) {
    absl::MutexLock lock(&mu_);
    if (!error_) error_ = std::current_exception();
    for (size_t q : queues) {
      queues_[q].items.clear();
      queues_[q].in_flight = 0;
    }
    WakeAll();
  }
}

void AsyncCommunicator::RecvLoop() {
  try {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stop_ || error_) return;
        changed_.WaitWithTimeout(&mu_, kRecvPeriod);
        if (stop_) return;
      }
      RefreshDense();
    }
  } catch (...) {
    absl::MutexLock lock(&mu_);
    if (!error_) error_ = std::current_exception();
    WakeAll();
  }
}

void AsyncCommunicator::Flush() {
  {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (error_) return true;
      for (const Queue& q : queues_) {
        if (!q.items.empty() || q.in_flight > 0) return false;
      }
      return true;
    };
    while (started_ && !drained()) {
      // A trainer thread's pass may have ended with its direct push outstanding.
      if (!FinishOrAwaitDirectPush()) changed_.WaitWithTimeout(&mu_, kMergeWait);
    }
    CheckError();
  }
  // Every gradient is applied: bring the root scope's dense parameters up to date for what
  // follows (evaluation, a save). No step runs now, so they are written at once.
  if (!config_.dense_table_id) return;
  RefreshDense();
  absl::MutexLock lock(&mu_);
  InstallStagedDense(root_, &root_installed_);
}

void AsyncCommunicator::OnPassEnd() {
  if (!dataset_pass_) return;
  if (!failed()) Flush();
  // The threads' scopes (and private copies) go with the pass.
  absl::MutexLock lock(&mu_);
  private_dense_ = false;
  share_staged_ = false;
  thread_installed_.clear();
}

void AsyncCommunicator::JoinThreads() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void AsyncCommunicator::Stop() {
  if (stopped_) return;
  stopped_ = true;
  std::exception_ptr flush_error;
  try {
    if (!failed()) Flush();  // after a failed step nothing more is pushed
  } catch (const std::exception& e) {
    MarkFailed(e.what());
    flush_error = std::current_exception();
  }
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    WakeAll();
  }
  JoinThreads();
  if (flush_error) std::rethrow_exception(flush_error);
  {
    absl::MutexLock lock(&mu_);
    CheckError();
  }
  if (!failed()) Leave();
}

}  // namespace fleet::distributed::detail
