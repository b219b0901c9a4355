#pragma once
// The rows of one sparse table on one server that do not fit its memory budget, in a RocksDB
// database of their own (the SSD tier, tier.h). Not a cache: the tier decides which copy of a
// row is the row (tier.h); this store only reads and writes rows in batches.
//
// Durability: none of its own. Writes skip RocksDB's write-ahead log and nothing is synced,
// since a server empties its database when it opens it (as an in-memory table starts empty):
// what survives a restart is a checkpoint (save_persistables).
//
// Layout. Key: the shard (2 bytes, big-endian) then the row's key (8 bytes, big-endian with the
// sign bit flipped, so a shard's rows sort by key). Value: the row as a checkpoint record holds
// it after its key (value then update-rule state, `width` floats), then its save-cycle stamp
// and its show count (uint32 each). One more key, kMetaKey, names the table the database
// belongs to, so that a directory left by another table (or another dim) is refused at open.
//
// Thread-safe (RocksDB is); the table calls it under the lock of the shard whose rows move.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fleet::ps::ssd {

// What a database must belong to: written at creation, compared at every open.
struct TableIdentity {
  uint32_t table_id = 0;
  std::string name;
  uint64_t dim = 0;
  uint32_t width = 0;  // floats a row: value and update-rule state
  uint32_t rule = 0;   // OptimizerConfig's rule case
  uint32_t num_shards = 0;
  std::string Describe() const;
};

// One row as the tier moves it: its floats, save-cycle stamp and show count.
struct DiskRow {
  int64_t key = 0;
  uint32_t stamp = 0;
  uint32_t shows = 0;
  const float* data = nullptr;  // width floats
};

class ColdStore {
 public:
  // Opens (creating when absent) the database in directory `path`. A database there that holds
  // another table's rows is refused (FailedPrecondition naming the path and both tables); one
  // of this table's is emptied, since a server starts empty as the in-memory table does.
  // InvalidArgument naming the path when it cannot be created or written, ResourceExhausted
  // naming it and the free bytes when the file system has less than kMinFreeBytes left.
  // `buffer_bytes` bounds RocksDB's write buffers and block cache together.
  static absl::StatusOr<std::unique_ptr<ColdStore>> Open(const std::string& path,
                                                         const TableIdentity& identity,
                                                         uint64_t buffer_bytes);
  ~ColdStore();

  // Below this much free space an ssd_path is refused at open.
  static constexpr uint64_t kMinFreeBytes = uint64_t{64} << 20;

  const std::string& path() const { return path_; }

  // Reads `keys` (distinct, sorted) of `shard` in one MultiGet. For each key found, calls
  // found(index in keys, row). Rows stay on disk until Remove.
  absl::Status Read(uint32_t shard, absl::Span<const int64_t> keys,
                    absl::FunctionRef<void(size_t, const DiskRow&)> found);
  // One atomic write: `put` rows stored (evicted from memory), `remove` keys deleted (promoted).
  absl::Status Write(uint32_t shard, absl::Span<const DiskRow> put,
                     absl::Span<const int64_t> remove);
  // Calls fn(row) for every row of `shard`, in key order.
  absl::Status ForEach(uint32_t shard, absl::FunctionRef<void(const DiskRow&)> fn) const;
  // Deletes every row (the metadata stays).
  absl::Status Clear();
  // Drops the rows stamped before `stamp` through a compaction of the whole database (a
  // RocksDB compaction filter: no read of the rows into this process). Returns how many.
  absl::StatusOr<uint64_t> DropStampedBefore(uint32_t stamp);

  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  uint64_t bytes_written() const { return bytes_written_.load(std::memory_order_relaxed); }

 private:
  struct Impl;
  ColdStore(std::string path, uint32_t width, std::unique_ptr<Impl> impl);
  // The error of a failed RocksDB call, naming the path and what was being done.
  absl::Status Fail(const std::string& what, const std::string& detail) const;

  std::string path_;
  uint32_t width_;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> bytes_written_{0};
};

}  // namespace fleet::ps::ssd
