#pragma once
// A sparse table: rows of `dim` floats addressed by int64 keys (the whole range, negatives
// included), created on first pull with the table's initializer, updated by its update rule.
//
// Rows are spread over shards (by a hash of the key independent of the server sharding), each
// with its own lock, so that many RPC threads pull and push in parallel; a request locks each
// shard it touches once. A row stores its value and its update-rule state contiguously
// (detail::RowStore), plus a save-cycle stamp used by delta saves and shrink.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fleet/ps/ps.pb.h"
#include "ps/table/detail/overflow_guard.h"
#include "ps/table/detail/row_store.h"
#include "ps/table/initializer.h"
#include "ps/table/table_file.h"
#include "ps/table/update_rule.h"

namespace fleet::ps {
namespace ssd {
class Tier;
}

class SparseTable {
 public:
  // InvalidArgument naming the table for a wrong type, a zero dim or a bad optimizer/initializer.
  // With storage "ssd", the errors of opening its SSD tier (ssd/tier.h: the path, the budget).
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(const proto::TableConfig& config);
  ~SparseTable();

  uint32_t id() const { return config_.table_id(); }
  size_t dim() const { return dim_; }
  // Floats per row: value then update-rule state.
  size_t row_width() const { return width_; }
  const proto::TableConfig& config() const { return config_; }
  // The current save cycle (stamped on rows changed now); each save or load ends one.
  uint32_t epoch() const { return epoch_.load(); }

  // Copies the value of keys[i] to out[i * dim, (i + 1) * dim). Missing rows are created with
  // the initializer; while the count filter holds a key back, its value reads as zeros. Keys may
  // repeat. Thread-safe. InvalidArgument when out has the wrong size.
  absl::Status Pull(absl::Span<const int64_t> keys, absl::Span<float> out);

  // Applies grads[i * dim, (i + 1) * dim) to keys[i] through the update rule, or, with is_delta
  // (GEO), adds them to the value. Missing rows are created first, unless the count filter holds
  // them back (then the gradient is dropped). Repeated keys are applied in order. Thread-safe.
  // InvalidArgument, with the table unchanged, for a size mismatch or a NaN or infinite value.
  // A row whose update would leave a value or state out of range (TableConfig.overflow) is left
  // as it was (or clipped, as configured); the other rows are applied and the push returns
  // OutOfRange naming the table and the first such key.
  absl::Status Push(absl::Span<const int64_t> keys, absl::Span<const float> grads, bool is_delta);
  // Push, then the value of every pushed key copied to values_after[i * dim, (i + 1) * dim):
  // what Push followed by Pull of the same keys gives when no other call runs between them, in
  // one pass over the shards (each shard locked once, each row found once). GEO's exchange adds
  // a worker's deltas and takes the rows' fresh values this way. A repeated key reads as its row
  // after all its repeats; a refused row (OutOfRange, as Push) as it was left; a key the count
  // filter holds back as Pull reads it. InvalidArgument, with the table unchanged, when grads or
  // values_after is not keys.size() * dim floats, or for a NaN or infinite value. Thread-safe.
  absl::Status PushAndPull(absl::Span<const int64_t> keys, absl::Span<const float> grads,
                           bool is_delta, absl::Span<float> values_after);

  // Writes every row (BASE) or the rows created or changed since the previous successful save
  // (DELTA) to `path` (see table_file.h) and returns how many. Ends the current save cycle.
  // Pushes may run meanwhile; a row pushed during the save is also in the next delta.
  absl::StatusOr<uint64_t> Save(const std::string& path, proto::SaveMode mode);
  // Save in two steps, for a checkpoint that counts only once every server wrote its part
  // (checkpoint.h): WritePart writes like Save and sets *cycle to the save cycle it ended; the
  // next delta save starts after that cycle only once CommitCycle(*cycle) is called, so a
  // delta save after an uncommitted one still holds the rows of both.
  // Without `end_cycle` (an export) the save cycle goes on: rows keep their stamps, the next
  // delta save and shrink do not see this write (and *cycle is left alone).
  absl::StatusOr<uint64_t> WritePart(const std::string& path, proto::SaveMode mode, uint32_t* cycle,
                                     bool end_cycle = true);
  void CommitCycle(uint32_t cycle);

  // Loads parts written by Save (on any number of servers): checks that every part belongs to
  // this table (id, dim, update rule) before changing anything, clears the table when a base
  // part is present, then applies the parts in order, keeping the keys for which keep(key) is
  // true (all keys without it). Returns the rows loaded. Ends the current save cycle, so that
  // the next delta save holds only what changed after the load. Not meant to run beside pushes.
  // Parts opened with TableFileReader::Check::kWhileReading are checked as their records load,
  // saving a pass over each, when the table is empty; into a table that holds rows they are
  // checked whole before anything changes, so a damaged part leaves the table as it was either
  // way. A load that fails once rows changed (a part found damaged as it loaded, no memory left)
  // empties the table, never leaving it partly loaded, and its error says so.
  // The loading itself is the checkpoint loader's (shard_load.h: LoadParts), over the bulk
  // insert below.
  absl::StatusOr<uint64_t> Load(absl::Span<TableFileReader* const> parts,
                                absl::FunctionRef<bool(int64_t)> keep);
  absl::StatusOr<uint64_t> Load(absl::Span<TableFileReader* const> parts);
  // Rows in all shards (in memory and, with storage "ssd", on disk). Thread-safe.
  uint64_t RowCount() const;
  // Drops every row (the state of a fresh table). Not meant to run beside pushes.
  void Clear();

  // Drops the rows last created or changed more than `max_unseen_saves` saves ago (0 drops
  // every row untouched since the previous save). Returns how many. Thread-safe.
  uint64_t Shrink(uint32_t max_unseen_saves);

  // Row count, memory held and keys pending in the count filter, and the SSD tier's counters.
  // Thread-safe.
  proto::TableStats Stats() const;

  // Bulk insert: what the checkpoint loader (shard_load.h) fills the table through. A load
  // checks its parts (CheckPart), empties the table for a base (DropAllRows), sizes the shards
  // (ReserveShards), takes a stamp (BeginBulkInsert), inserts blocks of records shard by shard
  // (InsertRecords, from several threads at once if it likes: each call locks its shard) and
  // ends with EndBulkInsert. Not meant to run beside pushes.
  //
  // InvalidArgument naming the part when its header is not of this table (id, type, dim, update
  // rule; a values-only part fits any rule), DataLoss when its size disagrees with its header.
  absl::Status CheckPart(const TableFileReader& part) const;
  // Clear, and the SSD tier's error when its database could not be emptied.
  absl::Status DropAllRows();
  size_t num_shards() const { return shards_.size(); }
  // The hash of a row's key (the index's and ShardOf's).
  static uint64_t KeyHash(int64_t key) { return detail::RowStore::Hash(key); }
  // The shard of a row: the low 32 bits of its RowStore hash modulo the shard count (the index
  // uses the high bits), computed without a division (Lemire, Kaser and Kurz, "Faster remainder
  // by direct computation", 2019): two divisions a key were a tenth of a pull.
  size_t ShardOf(uint64_t hash) const {
    const uint64_t low_bits = shard_magic_ * static_cast<uint32_t>(hash);
    return static_cast<size_t>((static_cast<unsigned __int128>(low_bits) * shards_.size()) >> 64);
  }
  // Sizes the indexes of shards [first, last) for `rows_per_shard` more rows each, plus slack
  // (an SSD table's for no more than its memory budget), so that a load rehashes once.
  // ResourceExhausted naming the table and `total_rows` when memory runs out.
  absl::Status ReserveShards(size_t first, size_t last, uint64_t rows_per_shard,
                             uint64_t total_rows);
  // Ends the current save cycle and returns the stamp of the rows a bulk insert brings.
  uint32_t BeginBulkInsert() { return epoch_.fetch_add(1); }
  // Saved records in memory (table_file.h's layout): record r starts at data + r * stride
  // floats, its int64 key in the bytes of the first two floats, then row_floats floats: the row
  // (row_width()) or the value alone (dim(): the update rule's state starts afresh).
  // hashes[r] is KeyHash of record r's key.
  struct RecordBlock {
    const float* data;
    size_t stride;
    size_t row_floats;
    const uint64_t* hashes;
  };
  // Sets the rows of block's `records` (all in shard `shard`, applied in order, so a later
  // repeat wins), stamped `stamp`, and adds their count to *inserted. Locks the shard once.
  // ResourceExhausted naming the table when the shard is full; the SSD tier's errors.
  absl::Status InsertRecords(size_t shard, const RecordBlock& block,
                             absl::Span<const uint32_t> records, uint32_t stamp,
                             uint64_t* inserted);
  // Ends a bulk insert that succeeded: the next delta save holds what changed after it.
  void EndBulkInsert(uint32_t stamp) { delta_since_.store(stamp + 1); }
  // "sparse table <id> '<name>'", for errors.
  std::string Name() const;

 private:
  struct alignas(64) Shard {
    explicit Shard(size_t width) : rows(width) {}
    mutable std::mutex mu;
    detail::RowStore rows;
    absl::flat_hash_map<int64_t, uint32_t> pending;  // count filter: pulls seen so far
  };
  // A request's keys sorted by shard and, within a shard, by the top bits of their hash (stable,
  // so repeats of a key keep their order), with their hashes and request positions, so that
  // each shard is locked once and its keys are read sequentially. Reused across requests
  // (see AcquireGroups) so that large requests do not fault in fresh pages each time.
  struct Groups {
    std::vector<int64_t> keys;
    std::vector<uint64_t> hashes;
    std::vector<uint32_t> order;         // position of keys[j] in the request
    std::vector<uint32_t> begin;         // shard s holds [begin[s], begin[s + 1])
    std::vector<uint64_t> hash_of;       // scratch: per request position
    std::vector<uint32_t> bucket_of;     // scratch: per request position
    std::vector<uint32_t> bucket_begin;  // scratch: counting sort by (shard, index position)
    std::vector<uint32_t> candidates;    // scratch: RowStore::ProbeCandidates, per keys[j]
    std::vector<uint32_t> missing;       // scratch: the j of one shard's absent keys
    std::vector<const float*> rows;      // scratch: PushAndPull's row of keys[j], per j
  };

  SparseTable(const proto::TableConfig& config, std::unique_ptr<UpdateRule> rule,
              Initializer initializer);
  std::unique_ptr<Groups> GroupByShard(absl::Span<const int64_t> keys);
  void ReleaseGroups(std::unique_ptr<Groups> groups);
  // Pull and Push on keys already grouped (the requests were validated).
  absl::Status PullGrouped(Groups& g, absl::Span<float> out);
  // InvalidArgument naming the table when grads is not keys.size() * dim floats or holds a NaN
  // or infinity.
  absl::Status CheckPush(absl::Span<const int64_t> keys, absl::Span<const float> grads,
                         bool is_delta) const;
  // Push and PushAndPull's one path: checks, a schedule step for gradients, groups and pushes.
  absl::Status CheckAndPush(absl::Span<const int64_t> keys, absl::Span<const float> grads,
                            bool is_delta, absl::Span<float> values_after);
  // With values_after (PushAndPull), each shard's rows are copied out once its keys are pushed.
  absl::Status PushGrouped(Groups& g, absl::Span<const float> grads, bool is_delta,
                           absl::Span<float> values_after);
  // The SSD tier's steps (no-ops without one; see ssd/tier.h): CheckTierRequest before a
  // request, TierBefore once a shard's missing keys are known (promotes those on disk),
  // TierAfter at the end of the shard's part (recency, then eviction). `missed` of the shard's
  // keys were not in memory. Caller holds shard s's lock for the last two.
  absl::Status CheckTierRequest(const Groups& g) const;
  absl::Status TierBefore(Groups& g, size_t s);
  absl::Status TierAfter(const Groups& g, size_t s, size_t missed, bool is_pull);
  // A batched lookup of one shard's keys (see RowStore::ProbeCandidates), in two steps:
  // ProbeShard probes the index for all of them into g.candidates and prefetches the first
  // rows; ConfirmAt(j) returns the row of g.keys[j] (nullptr when absent) and prefetches the
  // row kRowAhead keys on. `floats` is how much of each row the caller reads: the value for a
  // pull, value and state for a push.
  // 64 keys ahead: a confirm and copy take a few ns when the row is cached and a DRAM miss
  // (through a virtualised TLB) over 100; 16 and 32 measured slower at a million rows, 128 no
  // faster.
  static constexpr uint32_t kRowAhead = 64;
  // Each shard holds a RowStore and a lock; more shards than this only cost memory.
  static constexpr uint32_t kMaxShards = 1 << 16;
  static void ProbeShard(const detail::RowStore& rows, Groups& g, size_t s, size_t floats);
  static float* ConfirmAt(const detail::RowStore& rows, const Groups& g, uint32_t j, uint32_t end,
                          size_t floats);
  // Sorts positions j of g by their place in the request.
  static void SortByRequestOrder(const Groups& g, std::vector<uint32_t>* positions);
  // Applies one pushed gradient (or GEO delta) to a row and stamps it; false, with the row as it
  // was, when the guard refuses the result. Caller holds the lock.
  bool ApplyPush(float* row, const float* grad, bool is_delta, uint32_t stamp,
                 detail::OverflowGuard* guard);
  // The row of `key`, created (initialised) when absent, in one probe of the index; nullptr
  // when the shard is full. Caller holds shard.mu.
  float* FindOrCreateRow(Shard& shard, int64_t key, uint64_t hash, uint32_t stamp);

  proto::TableConfig config_;
  std::unique_ptr<UpdateRule> rule_;
  Initializer initializer_;
  size_t dim_;
  size_t width_;
  uint32_t min_count_;  // count filter; <= 1 admits every key at once
  std::vector<std::unique_ptr<Shard>> shards_;
  uint64_t shard_magic_;  // 2^64 / shards_.size(), rounded up (see ShardOf)
  std::mutex groups_mu_;
  std::vector<std::unique_ptr<Groups>> idle_groups_;  // at most a few, for reuse
  // Save cycles: rows are stamped with epoch_ when created or changed; a save advances it.
  std::atomic<uint32_t> epoch_{1};
  std::atomic<uint32_t> delta_since_{0};  // a delta save writes rows stamped >= this
  // Storage "ssd": the rows beyond the memory budget, on disk. Called under the shard locks.
  std::unique_ptr<ssd::Tier> tier_;
};

// True when every value is finite (no NaN or infinity).
bool AllFinite(absl::Span<const float> values);

}  // namespace fleet::ps
