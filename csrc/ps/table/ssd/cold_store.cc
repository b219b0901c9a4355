#include "ps/table/ssd/cold_store.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "rocksdb/compaction_filter.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"

namespace fleet::ps::ssd {
namespace {

constexpr char kMetaKey[] = "fleet.sparse_table";  // not 10 bytes long: never a row's key
constexpr size_t kKeyBytes = 10;

// A row key: shard (big-endian), then the key big-endian with its sign bit flipped.
void EncodeKey(uint32_t shard, int64_t key, char* out) {
  out[0] = static_cast<char>(shard >> 8);
  out[1] = static_cast<char>(shard);
  const uint64_t bits = static_cast<uint64_t>(key) ^ (uint64_t{1} << 63);
  for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<char>(bits >> (56 - 8 * i));
}

int64_t DecodeKey(const char* in) {
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(in[2 + i]);
  return static_cast<int64_t>(bits ^ (uint64_t{1} << 63));
}

// The stamp sits after the row's floats; the show count after it.
uint32_t StampOf(const rocksdb::Slice& value) {
  uint32_t stamp = 0;
  if (value.size() >= 8) std::memcpy(&stamp, value.data() + value.size() - 8, sizeof(stamp));
  return stamp;
}

// Drops rows stamped before `drop_below` while a shrink sets it (0: keeps everything).
// Called by RocksDB's compaction threads.
class StaleRowFilter : public rocksdb::CompactionFilter {
 public:
  bool Filter(int, const rocksdb::Slice& key, const rocksdb::Slice& value, std::string*,
              bool*) const override {
    const uint32_t below = drop_below.load(std::memory_order_relaxed);
    if (below == 0 || key.size() != kKeyBytes || StampOf(value) >= below) return false;
    dropped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const char* Name() const override { return "fleet.StaleRowFilter"; }

  std::atomic<uint32_t> drop_below{0};
  mutable std::atomic<uint64_t> dropped{0};
};

std::string EncodeIdentity(const TableIdentity& id) {
  return absl::StrCat(id.table_id, "|", id.name, "|", id.dim, "|", id.width, "|", id.rule, "|",
                      id.num_shards);
}

}  // namespace

std::string TableIdentity::Describe() const {
  return absl::StrCat("sparse table ", table_id, " '", name, "' (dim ", dim, ", ", width,
                      " floats a row, rule ", rule, ", ", num_shards, " shards)");
}

struct ColdStore::Impl {
  StaleRowFilter filter;
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::WriteOptions write_options;
  std::string identity;  // EncodeIdentity of the table: the value of kMetaKey
};

ColdStore::ColdStore(std::string path, uint32_t width, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), width_(width), impl_(std::move(impl)) {}

ColdStore::~ColdStore() {
  if (impl_->db) impl_->db->Close().PermitUncheckedError();
}

absl::Status ColdStore::Fail(const std::string& what, const std::string& detail) const {
  return absl::UnavailableError(absl::StrCat("ssd_path ", path_, ": ", what, ": ", detail));
}

absl::StatusOr<std::unique_ptr<ColdStore>> ColdStore::Open(const std::string& path,
                                                           const TableIdentity& identity,
                                                           uint64_t buffer_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("ssd_path ", path, " cannot be created: ", ec.message()));
  }
  // Writable: a probe file, since access() says yes to root on a read-only mount.
  const std::string probe = path + "/.fleet_write_probe";
  if (FILE* f = std::fopen(probe.c_str(), "w"); f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("ssd_path ", path, " is not writable: ", std::strerror(errno)));
  } else {
    std::fclose(f);
    std::remove(probe.c_str());
  }
  struct statvfs fs;
  if (statvfs(path.c_str(), &fs) == 0) {
    const uint64_t free_bytes = uint64_t{fs.f_bavail} * fs.f_frsize;
    if (free_bytes < kMinFreeBytes) {
      return absl::ResourceExhaustedError(absl::StrCat("ssd_path ", path, " has ", free_bytes,
                                                       " bytes free; the SSD tier needs at least ",
                                                       kMinFreeBytes));
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->identity = EncodeIdentity(identity);
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kNoCompression;  // floats barely compress
  // One cache holds everything RocksDB keeps in memory, so that `buffer_bytes` bounds it: data
  // blocks, index and filter blocks (not held by each table reader outside any bound), and the
  // write buffers, charged to it by a WriteBufferManager. Write buffers: two of a quarter each.
  const uint64_t cache_bytes = std::max<uint64_t>(uint64_t{4} << 20, buffer_bytes);
  const uint64_t write_buffer = cache_bytes / 4;
  options.write_buffer_size = write_buffer;
  options.max_write_buffer_number = 2;
  std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(cache_bytes);
  options.write_buffer_manager =
      std::make_shared<rocksdb::WriteBufferManager>(2 * write_buffer, cache);
  options.compaction_filter = &impl->filter;
  // Rows are overwritten at random (each eviction of a pushed row), so the database is mostly
  // rewrites of rows it holds: universal compaction merges whole sorted runs, writing each row
  // far fewer times than leveled compaction's level-by-level merges. Side by side (5M rows under
  // 51.2 MB, index and filters pinned as below, against two leveled runs): compaction wrote 229
  // bytes a row read from disk against 636-641, the server spent 1.11 us of CPU a key against
  // 1.43-1.44, and 18.8 s against 24.4 s of CPU to fill the table. Its cost is disk: up to 3x
  // the rows' size while a full merge runs (max_size_amplification_percent 200; 100 measured
  // 1.27 us a key against 1.08); 513 MB for 410 MB of rows at the end of such a run. Merges start
  // at 8 sorted runs (not 4): fewer, larger merges; the bloom filters keep the runs cheap to
  // look up.
  options.compaction_style = rocksdb::kCompactionStyleUniversal;
  options.level0_file_num_compaction_trigger = 8;
  // A pull of ids never seen (a table filling up) looks for each in the memtable first: its own
  // bloom filter answers without a skip-list search.
  options.memtable_prefix_bloom_size_ratio = 0.02;
  options.memtable_whole_key_filtering = true;
  // No bloom filter on the last level (universal compaction's oldest and largest sorted run),
  // which holds most of the rows: a filter there costs 10 bits a row on disk (62 MB at 50M rows,
  // an eighth of a 512 MB budget) and answers only lookups of ids never written, which then read
  // one block of the last level instead.
  options.optimize_filters_for_hits = true;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  // Every file's index and filter blocks stay in the cache while the file lives (charged to it,
  // so still within the bound). Unpinned, the cache dropped them: a filter block of a 64 MB file
  // is about 0.9 MB, more than one of the cache's 16 shards holds at 12.8 MB, and a read with
  // fill_cache = false (Read below) does not put a block it misses back. So every MultiGet read
  // and checksummed the whole filter of each file it looked in: 15% of the server's CPU in a
  // profile (5M rows under 51.2 MB), and 1.81 against 1.33 us of server CPU a key side by side.
  table.metadata_cache_options.unpartitioned_pinning = rocksdb::PinningTier::kAll;
  // A row lookup in a data block goes through a small hash index, not a binary search.
  table.data_block_index_type = rocksdb::BlockBasedTableOptions::kDataBlockBinaryAndHash;
  // A pull of a key never seen looks it up here first: the filter answers most without a read.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &raw);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ssd_path ", path, ": cannot open a RocksDB database: ", s.ToString()));
  }
  impl->db.reset(raw);
  // The server starts empty, as the in-memory table does (tier.h): no log to replay.
  impl->write_options.disableWAL = true;
  std::unique_ptr<ColdStore> store(new ColdStore(path, identity.width, std::move(impl)));
  rocksdb::DB& db = *store->impl_->db;
  std::string meta;
  s = db.Get(rocksdb::ReadOptions(), kMetaKey, &meta);
  const std::string& mine = store->impl_->identity;
  if (s.ok() && meta != mine) {
    return absl::FailedPreconditionError(
        absl::StrCat("ssd_path ", path, " holds the rows of another table (", meta,
                     " as table_id|name|dim|width|rule|shards); ", identity.Describe(),
                     " needs a directory of its own: give it another ssd_path or remove that one"));
  }
  if (!s.ok() && !s.IsNotFound()) return store->Fail("reading its metadata", s.ToString());
  // A database of this table's is emptied; Clear writes the metadata of a new one.
  if (auto cleared = store->Clear(); !cleared.ok()) return cleared;
  return store;
}

absl::Status ColdStore::Read(uint32_t shard, absl::Span<const int64_t> keys,
                             absl::FunctionRef<void(size_t, const DiskRow&)> found) {
  const size_t n = keys.size();
  if (n == 0) return absl::OkStatus();
  std::vector<char> key_bytes(n * kKeyBytes);
  std::vector<rocksdb::Slice> slices(n);
  for (size_t i = 0; i < n; ++i) {
    EncodeKey(shard, keys[i], key_bytes.data() + i * kKeyBytes);
    slices[i] = rocksdb::Slice(key_bytes.data() + i * kKeyBytes, kKeyBytes);
  }
  std::vector<rocksdb::PinnableSlice> values(n);
  std::vector<rocksdb::Status> statuses(n);
  rocksdb::DB& db = *impl_->db;
  // The keys come sorted (Tier::Promote sorts them), so MultiGet need not sort them again.
  // The blocks read stay out of the block cache: a miss is mostly a row of the long tail,
  // whose block is rarely read again before the cache drops it, and inserting then dropping
  // each block cost a fifth to a quarter of the server's CPU a key (5M rows under 51.2 MB, two
  // pairs of runs side by side: 1.43 us against 1.89, 2.06 against 2.56) and 21-29 MB of peak
  // resident size in freed blocks.
  // Index and filter blocks are still found in the cache when there (table options in Open).
  rocksdb::ReadOptions options;
  options.fill_cache = false;
  db.MultiGet(options, db.DefaultColumnFamily(), n, slices.data(), values.data(), statuses.data(),
              /*sorted_input=*/true);
  const size_t row_bytes = width_ * sizeof(float) + 8;
  std::vector<float> row(width_);
  uint64_t read = 0;
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) return Fail("reading rows", statuses[i].ToString());
    if (values[i].size() != row_bytes) {
      return absl::DataLossError(absl::StrCat("ssd_path ", path_, ": row ", keys[i], " holds ",
                                              values[i].size(), " bytes, expected ", row_bytes));
    }
    DiskRow r;
    r.key = keys[i];
    std::memcpy(row.data(), values[i].data(), width_ * sizeof(float));
    std::memcpy(&r.stamp, values[i].data() + width_ * sizeof(float), 4);
    std::memcpy(&r.shows, values[i].data() + width_ * sizeof(float) + 4, 4);
    r.data = row.data();
    found(i, r);
    read += row_bytes;
  }
  bytes_read_.fetch_add(read, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status ColdStore::Write(uint32_t shard, absl::Span<const DiskRow> put,
                              absl::Span<const int64_t> remove) {
  rocksdb::WriteBatch batch;
  char key[kKeyBytes];
  std::string value(width_ * sizeof(float) + 8, '\0');
  // In key order: each insert into the memtable's skip list starts from where the last one
  // ended (RocksDB keeps that position), not from the top of the list.
  std::vector<const DiskRow*> sorted(put.size());
  for (size_t i = 0; i < put.size(); ++i) sorted[i] = &put[i];
  std::sort(sorted.begin(), sorted.end(),
            [](const DiskRow* a, const DiskRow* b) { return a->key < b->key; });
  for (const DiskRow* row : sorted) {
    const DiskRow& r = *row;
    EncodeKey(shard, r.key, key);
    std::memcpy(value.data(), r.data, width_ * sizeof(float));
    std::memcpy(value.data() + width_ * sizeof(float), &r.stamp, 4);
    std::memcpy(value.data() + width_ * sizeof(float) + 4, &r.shows, 4);
    batch.Put(rocksdb::Slice(key, kKeyBytes), value);
  }
  for (const int64_t k : remove) {
    EncodeKey(shard, k, key);
    batch.Delete(rocksdb::Slice(key, kKeyBytes));
  }
  if (batch.Count() == 0) return absl::OkStatus();
  rocksdb::Status s = impl_->db->Write(impl_->write_options, &batch);
  if (!s.ok()) {
    if (s.IsNoSpace()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ssd_path ", path_, " is full: ", s.ToString()));
    }
    return Fail("writing rows", s.ToString());
  }
  bytes_written_.fetch_add(put.size() * value.size(), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status ColdStore::ForEach(uint32_t shard, absl::FunctionRef<void(const DiskRow&)> fn) const {
  char first[kKeyBytes], last[kKeyBytes];
  EncodeKey(shard, INT64_MIN, first);
  EncodeKey(shard, INT64_MAX, last);
  rocksdb::ReadOptions options;
  options.fill_cache = false;  // a save passes every row once
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(options));
  std::vector<float> row(width_);
  const size_t row_bytes = width_ * sizeof(float) + 8;
  const rocksdb::Slice end(last, kKeyBytes);
  for (it->Seek(rocksdb::Slice(first, kKeyBytes)); it->Valid(); it->Next()) {
    if (it->key().compare(end) > 0) break;
    if (it->key().size() != kKeyBytes || it->value().size() != row_bytes) continue;
    DiskRow r;
    r.key = DecodeKey(it->key().data());
    std::memcpy(row.data(), it->value().data(), width_ * sizeof(float));
    std::memcpy(&r.stamp, it->value().data() + width_ * sizeof(float), 4);
    std::memcpy(&r.shows, it->value().data() + width_ * sizeof(float) + 4, 4);
    r.data = row.data();
    fn(r);
  }
  if (!it->status().ok()) return Fail("reading rows", it->status().ToString());
  return absl::OkStatus();
}

absl::Status ColdStore::Clear() {
  char first[kKeyBytes], end[kKeyBytes];
  EncodeKey(0, INT64_MIN, first);
  std::memset(end, '\xff', kKeyBytes);
  rocksdb::DB& db = *impl_->db;
  rocksdb::Status s =
      db.DeleteRange(impl_->write_options, db.DefaultColumnFamily(),
                     rocksdb::Slice(first, kKeyBytes), rocksdb::Slice(end, kKeyBytes));
  if (s.ok()) s = db.Delete(impl_->write_options, rocksdb::Slice(end, kKeyBytes));
  // The metadata sorts inside the range: written again.
  if (s.ok()) s = db.Put(rocksdb::WriteOptions(), kMetaKey, impl_->identity);
  if (!s.ok()) return Fail("clearing rows", s.ToString());
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ColdStore::DropStampedBefore(uint32_t stamp) {
  if (stamp == 0) return 0;
  StaleRowFilter& filter = impl_->filter;
  const uint64_t before = filter.dropped.load();
  filter.drop_below.store(stamp);
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  rocksdb::Status s = impl_->db->CompactRange(options, nullptr, nullptr);
  filter.drop_below.store(0);
  if (!s.ok()) return Fail("compacting (shrink)", s.ToString());
  return filter.dropped.load() - before;
}

}  // namespace fleet::ps::ssd
