#include "distributed/detail/sparse_prefetch.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/errors.h"
#include "core/lod_tensor.h"
#include "core/status.h"

namespace fleet::distributed::detail {
namespace {

// Pulls of more batches ahead than this per thread are dropped (a thread announces one).
constexpr size_t kMaxPendingPerThread = 8;

}  // namespace

SparsePrefetcher::Pending::~Pending() {
  if (future) future->Wait().IgnoreError();  // the RPC may still write into `rows`
}

SparsePrefetcher::~SparsePrefetcher() = default;

void SparsePrefetcher::StartPass(int num_threads) {
  pending_.clear();
  pending_.resize(std::max(1, num_threads));
}

bool SparsePrefetcher::WantsInputs(uint32_t table_id) const {
  absl::MutexLock lock(&mu_);
  return !inputs_.contains(table_id);
}

void SparsePrefetcher::SetInputs(uint32_t table_id, std::vector<std::string> ids) {
  auto table = client_->Table(table_id);
  if (!table.ok()) return;  // the pull itself reports an unknown table
  absl::MutexLock lock(&mu_);
  inputs_[table_id] = Inputs{std::move(ids), static_cast<size_t>(table->dim())};
}

std::vector<std::pair<uint32_t, SparsePrefetcher::Inputs>> SparsePrefetcher::AllInputs() const {
  absl::MutexLock lock(&mu_);
  return {inputs_.begin(), inputs_.end()};
}

void SparsePrefetcher::Announce(int thread, const Scope& scope) {
  if (thread < 0 || static_cast<size_t>(thread) >= pending_.size()) return;
  auto& queue = pending_[thread];
  for (auto& [table_id, inputs] : AllInputs()) {
    auto pending = std::make_unique<Pending>();
    pending->table_id = table_id;
    bool usable = true;
    for (const std::string& name : inputs.ids) {
      const Variable* v = scope.FindVar(name);
      if (v == nullptr || !v->IsType<LoDTensor>()) {
        usable = false;
        break;
      }
      const LoDTensor& ids = v->Get<LoDTensor>();
      if (!ids.initialized() || ids.dtype() != DType::kInt64) {
        usable = false;
        break;
      }
      pending->keys.insert(pending->keys.end(), ids.data<int64_t>(),
                           ids.data<int64_t>() + ids.numel());
    }
    if (!usable) continue;
    pending->rows.resize(pending->keys.size() * inputs.dim);
    queue.push_back(std::move(pending));
    while (queue.size() > kMaxPendingPerThread) queue.pop_front();
  }
}

void SparsePrefetcher::StartPull(Pending& pending) {
  pending.future = std::make_unique<ps::Future>(
      client_->PullSparse(pending.table_id, pending.keys, absl::MakeSpan(pending.rows)));
}

void SparsePrefetcher::Release(int thread, uint32_t table_id) {
  if (thread < 0 || static_cast<size_t>(thread) >= pending_.size()) return;
  for (auto& pending : pending_[thread]) {
    if (pending->table_id == table_id && pending->future == nullptr) StartPull(*pending);
  }
}

bool SparsePrefetcher::Take(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                            absl::Span<float> out, const std::string& table_name) {
  if (thread < 0 || static_cast<size_t>(thread) >= pending_.size()) return false;
  auto& queue = pending_[thread];
  bool prefetched = false;  // some prefetch of this table, whatever its keys
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    Pending& p = **it;
    prefetched = prefetched || p.table_id == table_id;
    if (p.table_id != table_id || p.keys.size() != keys.size() ||
        !std::equal(keys.begin(), keys.end(), p.keys.begin()) || p.rows.size() != out.size()) {
      continue;
    }
    // Older prefetches of this table will not be asked for any more (steps run in order).
    std::unique_ptr<Pending> hit = std::move(*it);
    auto end = std::remove_if(queue.begin(), std::next(it), [&](const auto& q) {
      return q == nullptr || q->table_id == table_id;
    });
    queue.erase(end, std::next(it));
    if (hit->future == nullptr) StartPull(*hit);  // the step pushed nothing of this table
    if (absl::Status s = hit->future->Wait(); !s.ok()) {
      ThrowIfError(s, absl::StrCat("pull_sparse of '", table_name, "'"));
    }
    std::memcpy(out.data(), hit->rows.data(), out.size() * sizeof(float));
    absl::MutexLock lock(&mu_);
    ++served_;
    return true;
  }
  if (prefetched) {
    absl::MutexLock lock(&mu_);
    ++missed_;
  }
  return false;
}

int64_t SparsePrefetcher::served() const {
  absl::MutexLock lock(&mu_);
  return served_;
}

int64_t SparsePrefetcher::missed() const {
  absl::MutexLock lock(&mu_);
  return missed_;
}

}  // namespace fleet::distributed::detail
