#include "distributed/detail/geo_row_prefetch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "distributed/detail/communicator_base.h"
#include "distributed/detail/sparse_prefetch.h"

namespace fleet::distributed::detail {

GeoRowPrefetch::Slot::~Slot() { Drop(); }

void GeoRowPrefetch::Slot::Drop() {
  if (future != nullptr) future->Wait().IgnoreError();  // the RPC may still write into `rows`
  future.reset();
}

GeoRowPrefetch::GeoRowPrefetch(std::shared_ptr<ps::PsClient> client,
                               const std::vector<SparseVar>& tables)
    : client_(std::move(client)) {
  for (const SparseVar& table : tables) {
    // Without its id variables a table's next batch is unknown: it is pulled at the step.
    if (!table.ids.empty()) tables_.push_back({table.table_id, table.dim, table.ids});
  }
}

GeoRowPrefetch::~GeoRowPrefetch() = default;

void GeoRowPrefetch::OnPassBegin(const framework::PassInfo& pass) {
  dataset_pass_ = pass.dataset_pass;
  // Only dataset passes announce batches; an Executor.run step leaves the slots alone.
  if (!dataset_pass_) return;
  slots_.clear();
  threads_ = std::max(1, pass.num_threads);
  slots_.resize(static_cast<size_t>(threads_) * tables_.size());
  for (auto& slot : slots_) slot = std::make_unique<Slot>();
}

void GeoRowPrefetch::OnPassEnd() {
  if (!dataset_pass_) return;
  slots_.clear();  // each slot waits for its pull in flight
  dataset_pass_ = false;
}

GeoRowPrefetch::Slot* GeoRowPrefetch::SlotOf(int thread, uint32_t table_id, size_t* dim) {
  if (!dataset_pass_ || thread < 0 || thread >= threads_) return nullptr;
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (tables_[t].table_id != table_id) continue;
    *dim = tables_[t].dim;
    return slots_[static_cast<size_t>(thread) * tables_.size() + t].get();
  }
  return nullptr;
}

void GeoRowPrefetch::OnBatchAhead(const framework::StepInfo& next) {
  if (next.scope == nullptr) return;
  for (const Table& table : tables_) {
    size_t dim = 0;
    Slot* slot = SlotOf(next.thread, table.table_id, &dim);
    if (slot == nullptr) return;
    Batches& announced = slot->announced;
    if (announced.ends.size() >= kMaxAnnounced) announced.Clear();
    // A batch whose ids are not there (a pass of another program) is left out: the steps that
    // follow ask for other keys than the window's, which ends it.
    if (GatherBatchIds(*next.scope, table.ids, &announced.keys)) {
      announced.ends.push_back(announced.keys.size());
    }
  }
}

void GeoRowPrefetch::Start(int thread, uint32_t table_id, const LocalRows& local,
                           bool pulled_at_step) {
  size_t dim = 0;
  Slot* slot = SlotOf(thread, table_id, &dim);
  if (slot == nullptr) return;
  if (pulled_at_step) pulled_at_step_.fetch_add(1, std::memory_order_relaxed);
  const bool served = slot->served;
  slot->served = false;
  // The window still holds the next batch, and this step was its batch before: wait for it.
  if (slot->next < slot->window.ends.size() && served) return;
  if (slot->announced.ends.empty()) return;
  // A window not followed (the step pulled other keys) is of no use now.
  slot->Drop();
  std::swap(slot->window, slot->announced);
  slot->announced.Clear();
  slot->next = 0;
  slot->pulled = false;
  // After this step's own new rows were inserted: what the step pulled is not pulled again.
  // Batch by batch, so that each batch's Lookup can serve its step's Read.
  const Batches& window = slot->window;
  if (slot->lookups.size() < window.ends.size()) slot->lookups.resize(window.ends.size());
  slot->absent.clear();
  for (size_t b = 0; b < window.ends.size(); ++b) {
    const size_t begin = b == 0 ? 0 : window.ends[b - 1];
    const absl::Span<const int64_t> batch(window.keys.data() + begin, window.ends[b] - begin);
    for (size_t missing : local.Absent(batch, &slot->lookups[b])) {
      slot->absent.push_back(batch[missing]);
    }
  }
  // An id new to several of the window's batches is pulled once.
  std::sort(slot->absent.begin(), slot->absent.end());
  slot->absent.erase(std::unique(slot->absent.begin(), slot->absent.end()), slot->absent.end());
  if (slot->absent.empty()) return;
  slot->rows.resize(slot->absent.size() * dim);
  slot->future = std::make_unique<ps::Future>(
      client_->PullSparse(table_id, slot->absent, absl::MakeSpan(slot->rows)));
  slot->pulled = true;
  window_pulls_.fetch_add(1, std::memory_order_relaxed);
}

void GeoRowPrefetch::Install(int thread, uint32_t table_id, absl::Span<const int64_t> keys,
                             LocalRows& local, const std::string& table_name,
                             LocalRows::Lookup* batch_lookup) {
  size_t dim = 0;
  Slot* slot = SlotOf(thread, table_id, &dim);
  if (slot == nullptr || slot->next >= slot->window.ends.size()) return;
  const size_t begin = slot->next == 0 ? 0 : slot->window.ends[slot->next - 1];
  const size_t end = slot->window.ends[slot->next];
  if (end - begin != keys.size() ||
      !std::equal(keys.begin(), keys.end(), slot->window.keys.begin() + begin)) {
    return;  // not the window's next batch: Start ends the window
  }
  // The window's first batch: its pull is waited for and all its rows go in (the later
  // batches' too: they are absent rows, never trained, so inserting them early changes nothing
  // but when their server value was read).
  if (slot->future != nullptr) {
    const bool arrived = slot->future->Ready();
    const absl::Status status = slot->future->Wait();
    slot->future.reset();
    ThrowIfError(
        status, absl::StrCat("GEO prefetch of the coming batches' new rows of '", table_name, "'"));
    if (!arrived) waited_.fetch_add(1, std::memory_order_relaxed);
    // Only rows still absent: one present now was pulled by another trainer thread since Start,
    // and its local value may hold updates the servers' value lacks.
    local.InsertAbsent(slot->absent, slot->rows);
  }
  if (batch_lookup != nullptr) std::swap(*batch_lookup, slot->lookups[slot->next]);
  ++slot->next;
  slot->served = true;
  if (slot->pulled) served_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace fleet::distributed::detail
