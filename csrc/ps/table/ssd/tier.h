#pragma once
// The SSD tier of a sparse table (TableConfig.storage = "ssd"): the rows the table's memory
// budget cannot hold live in a ColdStore (RocksDB) and the hot ones in the table's RowStores as
// usual. The table calls the tier under each shard's lock:
//   before a request: CheckRequest (the request's rows must fit the shard's budget at once);
//   for the keys the shard's memory lacks: Promote (one MultiGet; the rows found move to memory);
//   after the request: Touch (recency and show counts) then Evict (the coldest rows move to
//   disk until the shard is under its budget again).
// A row's home is memory or disk, and every move happens under the shard's lock, so a push to a
// row on disk is a read-modify-write that no other request can interleave with. A promoted row
// keeps its disk copy (no delete): while no push changes it, the copy is current and evicting
// the row writes nothing; once pushed, the copy is stale, overwritten when the row is evicted
// and skipped by ForEachOnDisk meanwhile.
//
// Which rows stay: the often seen, then the recently used. A per-shard clock ticks once a
// request; a row pulled 2^k times (its show count, kept on disk with it) ranks as if used
// kShowBonus * k ticks later, far more ticks than the budget lasts under steady misses. So a
// row seen once ranks below every row seen twice in the last kShowBonus ticks: a new row is
// admitted on probation (its push then needs no second read) and mostly goes at the next
// eviction unless used again, while a row that stops being used still goes in the end.
// Zipf 1.1 ids over 5M rows with the budget's 395k rows (benchmarks/ps_ssd.py's ratio),
// simulated: 73.6% of pulled keys are found in memory (a bonus of 4 ticks: 70.9%); the 395k
// most frequent ids, which an exact frequency cache converges to, would hold 75.8%.
// Eviction drops a shard to 7/8 of its budget at once, so that its scan of the shard
// (O(rows)) is paid once per budget/8 evictions.
//
// A restart keeps nothing: the database is emptied when the server opens it, as the in-memory
// table starts empty; what survives a restart is a checkpoint (save_persistables), which an SSD
// table writes in the in-memory table's format.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fleet/ps/ps.pb.h"
#include "ps/table/detail/row_store.h"
#include "ps/table/ssd/cold_store.h"

namespace fleet::ps::ssd {

class Tier {
 public:
  static constexpr uint32_t kShowBonus = 1024;

  // Opens config.ssd_path for a table of `width` floats a row and `num_shards` shards, with
  // config.memory_budget_mb split between the rows in memory and RocksDB's buffers. Errors
  // name the path or the budget (see ColdStore::Open; InvalidArgument for a budget that holds
  // less than one row a shard). FailedPrecondition naming librocksdb-dev in a build without it.
  static absl::StatusOr<std::unique_ptr<Tier>> Open(const proto::TableConfig& config,
                                                    uint32_t width, uint32_t num_shards);
  ~Tier();

  // Memory a row in memory costs: its RowStore slot and slab entry, and its entry here.
  static uint64_t BytesPerRow(uint32_t width);
  // Rows a shard keeps in memory after an eviction: its budget.
  uint64_t shard_capacity() const { return shard_capacity_; }

  // ResourceExhausted naming the budget and the numbers when `keys` distinct keys of one request
  // fall in one shard and its budget cannot hold them at once.
  absl::Status CheckRequest(uint32_t shard, size_t keys) const;
  // Moves the rows of `keys` (absent from `rows`; repeats allowed) found on disk into `rows`.
  // Caller holds the shard's lock.
  absl::Status Promote(uint32_t shard, detail::RowStore& rows, absl::Span<const int64_t> keys);
  // Marks `keys` used by this request (shows counted for pulls), and counts `hits` of them as
  // found in memory. Caller holds the shard's lock.
  void Touch(uint32_t shard, absl::Span<const int64_t> keys, size_t hits, bool is_pull);
  // When the shard holds more rows than its budget, writes the coldest to disk and drops them
  // from memory (none dropped when the write fails). Caller holds the shard's lock.
  absl::Status Evict(uint32_t shard, detail::RowStore& rows);
  // A row the table dropped from memory itself (shrink); its disk copy goes at DropStaleCopies.
  // Caller holds the shard's lock.
  void Forget(uint32_t shard, int64_t key);
  // Deletes the shard's stale disk copies (of rows forgotten or pushed since their promotion),
  // so that DropStampedBefore's compaction counts only rows whose home is disk. Caller holds
  // the shard's lock; called by shrink after Forget, before DropStampedBefore.
  absl::Status DropStaleCopies(uint32_t shard);
  // A row loaded from a checkpoint into memory: it replaces any copy on disk.
  absl::Status Loaded(uint32_t shard, detail::RowStore& rows, absl::Span<const int64_t> keys);

  // Every row of `shard` whose home is disk (copies of rows in memory skipped). Caller holds
  // the shard's lock.
  absl::Status ForEachOnDisk(uint32_t shard, absl::FunctionRef<void(const DiskRow&)> fn) const;
  // Drops the rows on disk stamped before `stamp` (shrink), by a compaction. Returns how many.
  absl::StatusOr<uint64_t> DropStampedBefore(uint32_t stamp);
  // Every row gone, from memory bookkeeping and disk. Caller holds every shard's lock.
  absl::Status Clear();

  uint64_t rows_on_disk() const {
    const int64_t n = rows_on_disk_.load(std::memory_order_relaxed);
    return n < 0 ? 0 : static_cast<uint64_t>(n);
  }
  // Adds the tier's counters (and the rows in memory, counted by the table) to its stats.
  void AddStats(uint64_t rows_in_memory, proto::TableStats* stats) const;
  const std::string& path() const { return store_->path(); }

 private:
  static constexpr uint32_t kMaxShows = (uint32_t{1} << 30) - 1;
  struct HotEntry {
    uint32_t last_use = 0;
    // Bit-fields keep an entry at 8 bytes; HotEntry() (value-initialized) zeroes them.
    uint32_t shows : 30;
    uint32_t disk_copy : 1;     // the database holds a copy of this row
    uint32_t disk_current : 1;  // ... equal to the row here (no push since its promotion)
  };
  struct ShardState {
    absl::flat_hash_map<int64_t, HotEntry> hot;  // every row in memory, and no other
    std::vector<int64_t> stale;                  // forgotten rows whose disk copy must go
    uint32_t clock = 0;
  };
  Tier(std::unique_ptr<ColdStore> store, uint32_t width, uint32_t num_shards,
       uint64_t shard_capacity, double budget_mb);

  std::unique_ptr<ColdStore> store_;
  uint32_t width_;
  uint64_t shard_capacity_;
  double budget_mb_;
  std::vector<ShardState> shards_;
  std::atomic<int64_t> rows_on_disk_{0};
  std::atomic<uint64_t> memory_hits_{0};
  std::atomic<uint64_t> disk_reads_{0};  // rows promoted from disk
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace fleet::ps::ssd
