#include "ps/table/ssd/tier.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"

namespace fleet::ps::ssd {

uint64_t Tier::BytesPerRow(uint32_t width) {
  // RowStore: key, stamp and floats in the slab, a 32-bit index slot at about 2/3 load.
  // Here: a flat_hash_map slot of key and HotEntry (16 bytes) and its control byte, at 7/8 load.
  return (3 + uint64_t{width}) * 4 + 6 + 20;
}

absl::StatusOr<std::unique_ptr<Tier>> Tier::Open(const proto::TableConfig& config, uint32_t width,
                                                 uint32_t num_shards) {
  const std::string name =
      absl::StrCat("sparse table ", config.table_id(), " '", config.name(), "'");
  if (config.ssd_path().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": storage \"ssd\" needs an ssd_path (a directory for its rows)"));
  }
  const double budget_mb = config.memory_budget_mb();
  if (!(budget_mb > 0) || !std::isfinite(budget_mb)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": storage \"ssd\" needs memory_budget_mb > 0, got ", budget_mb));
  }
  // Three quarters for the rows in memory, a quarter for RocksDB's write buffers and cache.
  const uint64_t budget = static_cast<uint64_t>(budget_mb * (1 << 20));
  const uint64_t rows = budget / 4 * 3 / BytesPerRow(width);
  const uint64_t shard_capacity = rows / num_shards;
  if (shard_capacity < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": memory_budget_mb ", budget_mb, " holds ", rows, " rows of ", BytesPerRow(width),
        " bytes in memory, fewer than one for each of its ", num_shards, " shards"));
  }
  TableIdentity identity;
  identity.table_id = config.table_id();
  identity.name = config.name();
  identity.dim = config.dim();
  identity.width = width;
  identity.rule = config.optimizer().rule_case();
  identity.num_shards = num_shards;
  auto store = ColdStore::Open(config.ssd_path(), identity, budget / 4);
  if (!store.ok()) {
    return absl::Status(store.status().code(), absl::StrCat(name, ": ", store.status().message()));
  }
  return std::unique_ptr<Tier>(
      new Tier(std::move(*store), width, num_shards, shard_capacity, budget_mb));
}

Tier::Tier(std::unique_ptr<ColdStore> store, uint32_t width, uint32_t num_shards,
           uint64_t shard_capacity, double budget_mb)
    : store_(std::move(store)),
      width_(width),
      shard_capacity_(shard_capacity),
      budget_mb_(budget_mb),
      shards_(num_shards) {}

Tier::~Tier() = default;

absl::Status Tier::CheckRequest(uint32_t shard, size_t keys) const {
  if (keys <= shard_capacity_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "memory_budget_mb ", budget_mb_, " keeps ", shard_capacity_, " rows in memory in each of ",
      shards_.size(), " shards; a request put ", keys, " keys in shard ", shard,
      ", whose rows must all be in memory at once: raise memory_budget_mb or send smaller "
      "batches"));
}

absl::Status Tier::Promote(uint32_t shard, detail::RowStore& rows, absl::Span<const int64_t> keys) {
  if (keys.empty() || rows_on_disk() == 0) return absl::OkStatus();
  std::vector<int64_t> distinct(keys.begin(), keys.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  ShardState& state = shards_[shard];
  uint64_t promoted = 0;
  absl::Status status = store_->Read(shard, distinct, [&](size_t, const DiskRow& r) {
    const uint64_t hash = detail::RowStore::Hash(r.key);
    if (rows.Find(r.key, hash) != nullptr) return;  // a stale copy: the row in memory is newer
    float* row = rows.Insert(r.key, hash, r.stamp);
    if (row == nullptr) return;  // a full shard: the pull reports it as it creates rows
    std::copy(r.data, r.data + width_, row);
    detail::RowStore::SetStamp(row, r.stamp);
    HotEntry& e = state.hot[r.key];
    e = HotEntry{state.clock, std::min(r.shows, kMaxShows), 1, 1};
    ++promoted;
  });
  if (!status.ok()) return status;
  // The disk copy stays, equal to the row until a push changes it: evicting a row no push
  // touched then writes nothing, and a promotion writes nothing either (no delete).
  rows_on_disk_.fetch_sub(static_cast<int64_t>(promoted), std::memory_order_relaxed);
  disk_reads_.fetch_add(promoted, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Tier::Loaded(uint32_t shard, detail::RowStore& rows, absl::Span<const int64_t> keys) {
  if (rows_on_disk() > 0) {
    // The loaded rows replace the copies on disk: promote them first, then load over them.
    if (auto s = Promote(shard, rows, keys); !s.ok()) return s;
  }
  ShardState& state = shards_[shard];
  ++state.clock;
  for (const int64_t key : keys) {
    HotEntry& e = state.hot.try_emplace(key, HotEntry{state.clock, 0, 0, 0}).first->second;
    e.disk_current = 0;  // loaded over: a disk copy is stale now
  }
  return absl::OkStatus();
}

void Tier::Touch(uint32_t shard, absl::Span<const int64_t> keys, size_t hits, bool is_pull) {
  ShardState& state = shards_[shard];
  const uint32_t now = ++state.clock;
  for (const int64_t key : keys) {
    HotEntry& e = state.hot[key];
    e.last_use = now;
    if (!is_pull) e.disk_current = 0;  // every key of a push is updated
    if (is_pull && e.shows < kMaxShows) ++e.shows;
  }
  memory_hits_.fetch_add(hits, std::memory_order_relaxed);
}

absl::Status Tier::Evict(uint32_t shard, detail::RowStore& rows) {
  ShardState& state = shards_[shard];
  if (state.hot.size() <= shard_capacity_) return absl::OkStatus();
  const uint64_t keep = shard_capacity_ - shard_capacity_ / 8;
  const size_t victims_count = state.hot.size() - keep;
  // Rank: last use, plus kShowBonus ticks for each doubling of the show count.
  std::vector<std::pair<uint64_t, int64_t>> ranked;
  ranked.reserve(state.hot.size());
  for (const auto& [key, e] : state.hot) {
    ranked.emplace_back(uint64_t{e.last_use} + kShowBonus * absl::bit_width(e.shows), key);
  }
  std::nth_element(ranked.begin(), ranked.begin() + victims_count, ranked.end());
  ranked.resize(victims_count);
  std::vector<DiskRow> out;
  out.reserve(victims_count);
  absl::flat_hash_set<int64_t> victims;
  victims.reserve(victims_count);
  uint64_t moved = 0;
  for (const auto& [rank, key] : ranked) {
    victims.insert(key);
    const float* row = rows.Find(key, detail::RowStore::Hash(key));
    if (row == nullptr) continue;  // a key the count filter still holds back: no row
    ++moved;
    const HotEntry& e = state.hot[key];
    if (e.disk_current) continue;  // the disk holds this row as it is: nothing to write
    DiskRow r;
    r.key = key;
    r.stamp = detail::RowStore::GetStamp(row);
    r.shows = e.shows;
    r.data = row;
    out.push_back(r);
  }
  // Disk first: a failed write leaves every row in memory.
  if (auto s = store_->Write(shard, out, {}); !s.ok()) return s;
  rows.RemoveIf([&](int64_t key, uint32_t, const float*) { return victims.contains(key); });
  for (const int64_t key : victims) state.hot.erase(key);
  rows_on_disk_.fetch_add(static_cast<int64_t>(moved), std::memory_order_relaxed);
  evictions_.fetch_add(moved, std::memory_order_relaxed);
  return absl::OkStatus();
}

void Tier::Forget(uint32_t shard, int64_t key) {
  ShardState& state = shards_[shard];
  auto it = state.hot.find(key);
  if (it == state.hot.end()) return;
  if (it->second.disk_copy) state.stale.push_back(key);
  state.hot.erase(it);
}

absl::Status Tier::DropStaleCopies(uint32_t shard) {
  ShardState& state = shards_[shard];
  // Copies of rows pushed since their promotion: the rows in memory are newer.
  for (auto& [key, e] : state.hot) {
    if (e.disk_copy && !e.disk_current) state.stale.push_back(key);
  }
  if (state.stale.empty()) return absl::OkStatus();
  if (auto s = store_->Write(shard, {}, state.stale); !s.ok()) return s;
  for (const int64_t key : state.stale) {
    auto it = state.hot.find(key);
    if (it != state.hot.end()) it->second.disk_copy = 0;
  }
  state.stale.clear();
  return absl::OkStatus();
}

absl::Status Tier::ForEachOnDisk(uint32_t shard, absl::FunctionRef<void(const DiskRow&)> fn) const {
  const ShardState& state = shards_[shard];
  // A row in memory may keep a copy here; the one in memory is the row.
  return store_->ForEach(shard, [&](const DiskRow& r) {
    if (!state.hot.contains(r.key)) fn(r);
  });
}

absl::StatusOr<uint64_t> Tier::DropStampedBefore(uint32_t stamp) {
  auto dropped = store_->DropStampedBefore(stamp);
  if (dropped.ok()) rows_on_disk_.fetch_sub(static_cast<int64_t>(*dropped));
  return dropped;
}

absl::Status Tier::Clear() {
  for (ShardState& state : shards_) {
    state.hot.clear();
    state.stale.clear();
  }
  rows_on_disk_.store(0);
  return store_->Clear();
}

void Tier::AddStats(uint64_t rows_in_memory, proto::TableStats* stats) const {
  proto::SsdTierStats* ssd = stats->mutable_ssd();
  ssd->set_rows_in_memory(rows_in_memory);
  ssd->set_rows_on_disk(rows_on_disk());
  ssd->set_memory_hits(memory_hits_.load(std::memory_order_relaxed));
  ssd->set_disk_reads(disk_reads_.load(std::memory_order_relaxed));
  ssd->set_bytes_read(store_->bytes_read());
  ssd->set_bytes_written(store_->bytes_written());
  ssd->set_evictions(evictions_.load(std::memory_order_relaxed));
}

}  // namespace fleet::ps::ssd
