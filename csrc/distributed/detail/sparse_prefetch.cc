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

bool GatherBatchIds(const Scope& scope, const std::vector<std::string>& ids,
                    std::vector<int64_t>* keys) {
  const size_t before = keys->size();
  for (const std::string& name : ids) {
    const Variable* v = scope.FindVar(name);
    const LoDTensor* t = v != nullptr && v->IsType<LoDTensor>() ? &v->Get<LoDTensor>() : nullptr;
    if (t == nullptr || !t->initialized() || t->dtype() != DType::kInt64) {
      keys->resize(before);
      return false;
    }
    keys->insert(keys->end(), t->data<int64_t>(), t->data<int64_t>() + t->numel());
  }
  return true;
}

SparsePrefetcher::Pending::~Pending() {
  if (future) future->Wait().IgnoreError();  // the RPC may still write into `rows`
}

std::vector<SparsePrefetcher::Inputs> SparsePrefetcher::InputsOf(
    const std::vector<SparseVar>& tables) {
  std::vector<SparsePrefetcher::Inputs> inputs;
  for (const SparseVar& table : tables) {
    FLEET_ENFORCE(!table.ids.empty(), InvalidArgument, "sparse prefetch: table ", table.table_id,
                  " ('", table.name,
                  "') names no id variables to prefetch (SparseVar.ids, the pull_sparse op's "
                  "Ids from the PS pass's plan); give them or turn prefetch_sparse off");
    inputs.push_back({table.table_id, table.ids, table.dim});
  }
  return inputs;
}

SparsePrefetcher::SparsePrefetcher(std::shared_ptr<ps::PsClient> client,
                                   const std::vector<SparseVar>& tables)
    : client_(std::move(client)), inputs_(InputsOf(tables)) {}

SparsePrefetcher::~SparsePrefetcher() = default;

void SparsePrefetcher::OnPassBegin(const framework::PassInfo& pass) {
  dataset_pass_ = pass.dataset_pass;
  // Only dataset passes announce batches; an Executor.run step leaves the queues alone.
  if (!dataset_pass_) return;
  pending_.clear();
  pending_.resize(std::max(1, pass.num_threads));
}

void SparsePrefetcher::OnPassEnd() {
  if (dataset_pass_) pending_.clear();
}

void SparsePrefetcher::OnBatchAhead(const framework::StepInfo& next) {
  const int thread = next.thread;
  if (next.scope == nullptr || thread < 0 || static_cast<size_t>(thread) >= pending_.size()) {
    return;
  }
  const Scope& scope = *next.scope;
  auto& queue = pending_[thread];
  for (const Inputs& inputs : inputs_) {
    auto pending = std::make_unique<Pending>();
    pending->table_id = inputs.table_id;
    if (!GatherBatchIds(scope, inputs.ids, &pending->keys)) continue;
    const size_t floats = pending->keys.size() * inputs.dim;
    pending->rows = std::make_shared<Buffer>(floats * sizeof(float));
    pending->row_span = absl::MakeSpan(static_cast<float*>(pending->rows->data()), floats);
    queue.push_back(std::move(pending));
    while (queue.size() > kMaxPendingPerThread) queue.pop_front();
  }
}

void SparsePrefetcher::StartPull(Pending& pending) {
  pending.future = std::make_unique<ps::Future>(
      client_->PullSparse(pending.table_id, pending.keys, pending.row_span));
}

void SparsePrefetcher::Release(int thread, uint32_t table_id) {
  if (thread < 0 || static_cast<size_t>(thread) >= pending_.size()) return;
  for (auto& pending : pending_[thread]) {
    if (pending->table_id == table_id && pending->future == nullptr) StartPull(*pending);
  }
}

std::unique_ptr<SparsePrefetcher::Pending> SparsePrefetcher::Serve(int thread, uint32_t table_id,
                                                                   absl::Span<const int64_t> keys,
                                                                   size_t floats,
                                                                   const std::string& table_name) {
  if (thread < 0 || static_cast<size_t>(thread) >= pending_.size()) return nullptr;
  auto& queue = pending_[thread];
  bool prefetched = false;  // some prefetch of this table, whatever its keys
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    Pending& p = **it;
    prefetched = prefetched || p.table_id == table_id;
    if (p.table_id != table_id || p.keys.size() != keys.size() ||
        !std::equal(keys.begin(), keys.end(), p.keys.begin()) || p.row_span.size() != floats) {
      continue;
    }
    // Older prefetches of this table will not be asked for any more (steps run in order).
    std::unique_ptr<Pending> hit = std::move(*it);
    auto end = std::remove_if(queue.begin(), std::next(it), [&](const auto& q) {
      return q == nullptr || q->table_id == table_id;
    });
    queue.erase(end, std::next(it));
    if (hit->future == nullptr) StartPull(*hit);  // the step pushed nothing of this table
    const bool arrived = hit->future->Ready();
    if (absl::Status s = hit->future->Wait(); !s.ok()) {
      ThrowIfError(s, absl::StrCat("pull_sparse of '", table_name, "'"));
    }
    absl::MutexLock lock(&mu_);
    ++served_;
    if (!arrived) ++waited_;
    return hit;
  }
  if (prefetched) {
    absl::MutexLock lock(&mu_);
    ++missed_;
  }
  return nullptr;
}

bool SparsePrefetcher::Take(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                            absl::Span<float> out, const std::string& table_name) {
  std::unique_ptr<Pending> hit = Serve(thread, table_id, keys, out.size(), table_name);
  if (hit == nullptr) return false;
  std::memcpy(out.data(), hit->row_span.data(), out.size() * sizeof(float));
  return true;
}

std::shared_ptr<Buffer> SparsePrefetcher::TakeRows(int thread, uint32_t table_id,
                                                   absl::Span<const int64_t> keys, size_t floats,
                                                   const std::string& table_name) {
  std::unique_ptr<Pending> hit = Serve(thread, table_id, keys, floats, table_name);
  // The pull has ended (Serve waited for it), so nothing writes the rows any more.
  return hit == nullptr ? nullptr : std::move(hit->rows);
}

int64_t SparsePrefetcher::served() const {
  absl::MutexLock lock(&mu_);
  return served_;
}

int64_t SparsePrefetcher::missed() const {
  absl::MutexLock lock(&mu_);
  return missed_;
}

int64_t SparsePrefetcher::waited() const {
  absl::MutexLock lock(&mu_);
  return waited_;
}

}  // namespace fleet::distributed::detail
