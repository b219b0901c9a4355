#include "distributed/detail/geo_communicator.h"

#include <pthread.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace fleet::distributed::detail {

GeoCommunicator::GeoCommunicator(CommunicatorConfig config, std::shared_ptr<ps::PsClient> client,
                                 Scope* root)
    : CommunicatorBase(std::move(config), std::move(client), root) {
  FLEET_ENFORCE(config_.geo_steps > 0, InvalidArgument,
                "GEO communicator: update frequency (k_steps) must be positive, got ",
                config_.geo_steps);
  for (const SparseVar& var : config_.sparse) {
    auto rule = ps::MakeUpdateRule(var.local_rule);
    ThrowIfError(rule.status(), absl::StrCat("GEO local optimizer of '", var.name, "'"));
    local_[var.table_id] = std::make_unique<LocalRows>(var.dim, std::move(*rule));
    // The first step's rate: the schedule's rate at its `begin` (AfterStep steps on from there).
    local_[var.table_id]->StepSchedule();
  }
  if (config_.prefetch_sparse) {
    prefetch_ = std::make_unique<GeoRowPrefetch>(client_, config_.sparse);
  }
}

LocalRows& GeoCommunicator::Local(uint32_t table_id) {
  auto it = local_.find(table_id);
  FLEET_ENFORCE(it != local_.end(), NotFound, "GEO communicator: no sparse table ", table_id);
  return *it->second;
}

GeoCommunicator::LastPull& GeoCommunicator::LastPullOf(int thread, uint32_t table_id) {
  std::lock_guard<std::mutex> lock(last_pulls_mu_);
  std::unique_ptr<LastPull>& last = last_pulls_[{thread, table_id}];
  if (last == nullptr) last = std::make_unique<LastPull>();
  return *last;
}

void GeoCommunicator::StartThreads() {
  // Start() pulled the dense values into the root scope: they are the first synced values.
  dense_synced_.resize(dense_size());
  if (dense_size() > 0) ReadDenseParams(dense_synced_.data());
}

void GeoCommunicator::PullSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                 absl::Span<float> out, bool from_servers) {
  if (from_servers) {
    PullFromServers(table_id, keys, out);
    return;
  }
  LocalRows& local = Local(table_id);
  std::vector<size_t> missing;
  {
    LastPull& last = LastPullOf(thread, table_id);
    std::lock_guard<std::mutex> lock(last.mu);
    // A served batch comes with where the prefetch found its rows: the Read looks up only the
    // rest. (Install may wait for the window's pull under last.mu: only callers sharing this
    // thread number wait with it.)
    if (prefetch_) {
      prefetch_->Install(thread, table_id, keys, local, Sparse(table_id).name, &last.lookup);
    }
    missing = local.Read(keys, out, &last.lookup);
  }
  if (missing.empty()) {
    if (prefetch_) prefetch_->Start(thread, table_id, local, false);
    return;
  }
  PullMissingRows(local, Sparse(table_id).dim, keys, missing, out,
                  [&](absl::Span<const int64_t> absent, absl::Span<float> rows) {
                    PullFromServers(table_id, absent, rows);
                  });
  // After this step's new rows are in, so that the next batch's prefetch skips them.
  if (prefetch_) prefetch_->Start(thread, table_id, local, true);
}

void PullMissingRows(LocalRows& local, size_t dim, absl::Span<const int64_t> keys,
                     absl::Span<const size_t> missing, absl::Span<float> out,
                     absl::FunctionRef<void(absl::Span<const int64_t>, absl::Span<float>)> pull) {
  std::vector<int64_t> absent(missing.size());
  for (size_t i = 0; i < missing.size(); ++i) absent[i] = keys[missing[i]];
  std::vector<float> rows(absent.size() * dim);
  pull(absent, absl::MakeSpan(rows));
  // Not Reset: with two trainer threads both can miss a new id, and the one whose reply comes
  // second would overwrite the row the other has trained since, losing that update from the value
  // and from the next exchange. Its rows come back as they are here, trained or not.
  local.InsertAbsentOrRead(absent, absl::MakeSpan(rows));
  for (size_t i = 0; i < missing.size(); ++i) {
    std::memcpy(out.data() + missing[i] * dim, rows.data() + i * dim, dim * sizeof(float));
  }
}

void GeoCommunicator::PushSparse(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                                 absl::Span<const float> grads) {
  CheckPushSize(table_id, keys, grads);
  LastPull& last = LastPullOf(thread, table_id);
  std::lock_guard<std::mutex> lock(last.mu);
  Local(table_id).Update(keys, grads, &last.lookup);
}

void GeoCommunicator::SendDense(int thread, const std::vector<const LoDTensor*>& grads) {
  throw InvalidArgument(
      "GEO mode updates dense parameters locally: the program must not send dense gradients "
      "(was it rewritten for another mode?)");
}

GeoCommunicator::Deltas GeoCommunicator::TakeDeltas() {
  // Every worker trained a full step size from the same values: the servers add the average of
  // their changes (geo-SGD's model averaging, as Paddle's GEO scales deltas by 1/trainers).
  const float scale = 1.0f / static_cast<float>(config_.num_workers);
  Deltas deltas;
  deltas.keys.resize(config_.sparse.size());
  deltas.rows.resize(config_.sparse.size());
  deltas.places.resize(config_.sparse.size());
  for (size_t t = 0; t < config_.sparse.size(); ++t) {
    Local(config_.sparse[t].table_id)
        .TakeDeltas(scale, &deltas.keys[t], &deltas.rows[t], &deltas.places[t]);
  }
  if (dense_size() > 0) {
    // The current values become the synced ones; SendAndRebase keeps what changes meanwhile.
    deltas.dense.resize(dense_size());
    ReadDenseParams(deltas.dense.data());
    for (size_t i = 0; i < deltas.dense.size(); ++i) {
      const float current = deltas.dense[i];
      deltas.dense[i] = scale * (current - dense_synced_[i]);
      dense_synced_[i] = current;
    }
  }
  return deltas;
}

void GeoCommunicator::SendAndRebase(const Deltas& deltas) {
  std::vector<ps::Future> calls;
  std::vector<std::string> what;
  // Each push brings back the values after it (other workers' pushes included): one round trip
  // per server and table, and one pass over the rows on the server, instead of a push and then
  // a pull.
  // The replies' buffers are kept from one exchange to the next: a new one each time was zeroed
  // (2.5 MB an exchange for CTR-DNN) only to be overwritten by the reply.
  dense_fresh_.resize(dense_size());
  fresh_.resize(config_.sparse.size());
  for (size_t t = 0; t < config_.sparse.size(); ++t) {
    if (deltas.keys[t].empty()) continue;
    const SparseVar& var = config_.sparse[t];
    fresh_[t].resize(deltas.keys[t].size() * var.dim);
    calls.push_back(client_->PushPullSparse(var.table_id, deltas.keys[t], deltas.rows[t],
                                            absl::MakeSpan(fresh_[t]), ps::PushKind::kDelta));
    what.push_back(
        absl::StrCat("GEO push of '", var.name, "' deltas and pull of the values after it"));
  }
  if (dense_size() > 0) {
    calls.push_back(client_->PushPullDense(*config_.dense_table_id, deltas.dense,
                                           absl::MakeSpan(dense_fresh_), ps::PushKind::kDelta));
    what.push_back("GEO push of the dense deltas and pull of the values after it");
  }
  // Every call ends before an error is raised: the replies are written into fresh_ and
  // dense_fresh_.
  for (const ps::Future& call : calls) call.Wait().IgnoreError();
  for (size_t i = 0; i < calls.size(); ++i) WaitOk(calls[i], what[i]);
  if (dense_size() > 0) RebaseDenseParams(dense_fresh_.data(), dense_synced_.data());
  // Fresh values: everything the other workers pushed meanwhile, on the rows this one touched.
  for (size_t t = 0; t < config_.sparse.size(); ++t) {
    if (deltas.keys[t].empty()) continue;
    Local(config_.sparse[t].table_id).Rebase(deltas.keys[t], fresh_[t], &deltas.places[t]);
  }
}

void GeoCommunicator::ExchangeLoop() {
  // Named, so that a profile or benchmarks/cpu_window.py tells its CPU from the trainers'.
  pthread_setname_np(pthread_self(), "geo_exchange");
  std::unique_lock<std::mutex> lock(pending_mu_);
  while (true) {
    pending_cv_.wait(lock, [&] { return quit_ || pending_ != nullptr; });
    if (pending_ == nullptr) return;  // quit, with nothing handed over
    std::shared_ptr<const Deltas> deltas = std::move(pending_);
    lock.unlock();
    std::exception_ptr error;
    try {
      SendAndRebase(*deltas);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    pending_error_ = error;
    in_flight_ = false;
    pending_cv_.notify_all();
  }
}

void GeoCommunicator::StopExchangeThread() {
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    quit_ = true;
  }
  pending_cv_.notify_all();
  if (exchange_thread_.joinable()) exchange_thread_.join();
}

GeoCommunicator::~GeoCommunicator() { StopExchangeThread(); }

void GeoCommunicator::FinishPending() {
  std::unique_lock<std::mutex> lock(pending_mu_);
  pending_cv_.wait(lock, [&] { return !in_flight_; });
  if (pending_error_ != nullptr) {
    std::exception_ptr error = pending_error_;
    pending_error_ = nullptr;
    std::rethrow_exception(error);
  }
}

void GeoCommunicator::StartExchange() {
  std::lock_guard<std::mutex> lock(exchange_mu_);
  FinishPending();
  auto deltas = std::make_shared<const Deltas>(TakeDeltas());
  {
    std::lock_guard<std::mutex> pending_lock(pending_mu_);
    if (!quit_) {
      if (!exchange_thread_.joinable()) {
        exchange_thread_ = std::thread([this] { ExchangeLoop(); });
      }
      pending_ = std::move(deltas);
      in_flight_ = true;
    }
  }
  if (deltas != nullptr) {  // after Stop() there is no exchange thread
    SendAndRebase(*deltas);
    return;
  }
  pending_cv_.notify_all();
}

void GeoCommunicator::Exchange() {
  std::lock_guard<std::mutex> lock(exchange_mu_);
  FinishPending();
  SendAndRebase(TakeDeltas());
}

void GeoCommunicator::AfterStep(const framework::StepInfo& info) {
  // A step of the worker (of any of its threads) is a step of the local schedules, as it is one
  // run of the program's increment op, whatever k_steps is.
  for (auto& [table_id, local] : local_) local->StepSchedule();
  const int64_t step = steps_.fetch_add(1) + 1;
  if (step % config_.geo_steps == 0) StartExchange();
}

void GeoCommunicator::OnPassBegin(const framework::PassInfo& pass) {
  dataset_pass_ = pass.dataset_pass;
  if (prefetch_) prefetch_->OnPassBegin(pass);
}

void GeoCommunicator::OnBatchAhead(const framework::StepInfo& next) {
  if (prefetch_) prefetch_->OnBatchAhead(next);
}

int GeoCommunicator::BatchesAhead() const { return prefetch_ ? GeoRowPrefetch::kBatchesAhead : 1; }

void GeoCommunicator::OnPassEnd() {
  if (prefetch_) prefetch_->OnPassEnd();
  if (dataset_pass_ && !failed()) Exchange();
}

void GeoCommunicator::Flush() { Exchange(); }

void GeoCommunicator::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (failed()) {  // after a failed step nothing more is pushed
    StopExchangeThread();
    return;
  }
  try {
    Flush();
    StopExchangeThread();
    Leave();
  } catch (const std::exception& e) {
    MarkFailed(e.what());
    throw;
  }
}

}  // namespace fleet::distributed::detail
