#include "ps/table/shard_load.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/table/detail/run_both.h"

namespace fleet::ps {
namespace {

absl::Status CheckShard(uint32_t server_index, uint32_t num_servers) {
  if (num_servers > 0 && server_index < num_servers) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("server_index must be in [0, num_servers), got ",
                                                 server_index, " of ", num_servers));
}

// From this many rows (9 MB at 8 floats with Adagrad) two threads pay, both for sizing the
// indexes and for reading a part: 1M rows restored in 48 ms against 72 ms on one, 200k in 11
// against 15.
constexpr uint64_t kSplitRows = uint64_t{1} << 17;

// Loads records [begin, end) of `part` into `table`; stops early (OK) once `*stop` is set.
// Threads may load ranges of one part at once: shards lock as usual. With `crc`, sets *crc to
// the CRC of the range's bytes.
absl::Status LoadRecords(SparseTable& table, const TableFileReader& part, uint64_t begin,
                         uint64_t end, uint32_t stamp, const absl::FunctionRef<bool(int64_t)>* keep,
                         const std::atomic<bool>* stop, uint64_t* loaded, uint32_t* crc) {
  // Records are read a block at a time and grouped by shard, so that each shard is locked once
  // a block rather than once a row (a lock per row was most of a 10M-row load).
  const size_t floats = part.header().row_floats;
  const size_t record_floats = 2 + floats;  // int64 key as two floats' bytes, then the row
  const size_t record_bytes = SparseRecordBytes(part.header());
  // 8192 records a block, or fewer of wide rows: at most 8 MB (with 8192 rows of 140k floats
  // the block alone was 9 GB, zeroed before the first read). Never more than the part holds.
  constexpr uint64_t kMaxBlockBytes = uint64_t{8} << 20;
  const uint64_t block_rows =
      std::max<uint64_t>(1, std::min<uint64_t>({8192, kMaxBlockBytes / record_bytes, end - begin}));
  const size_t num_shards = table.num_shards();
  std::vector<float> block(block_rows * record_floats);
  std::vector<uint64_t> hashes(block_rows);
  std::vector<uint32_t> shard_of(block_rows);
  std::vector<uint32_t> order(block_rows);
  std::vector<uint32_t> starts(num_shards + 1);
  std::vector<uint32_t> next(num_shards);
  const SparseTable::RecordBlock records{block.data(), record_floats, floats, hashes.data()};
  // A record `keep` refuses goes to no shard.
  constexpr uint32_t kDropped = ~uint32_t{0};
  for (uint64_t done = begin; done < end && !stop->load(std::memory_order_relaxed);) {
    const uint64_t n = std::min(block_rows, end - done);
    if (auto s = part.ReadAt(done * record_bytes, block.data(), n * record_bytes); !s.ok()) {
      return s;
    }
    // The check while the block is in cache, instead of a pass of its own over the file.
    if (crc != nullptr) *crc = ExtendCrc(*crc, block.data(), n * record_bytes);
    done += n;
    // Counting sort of the block's records by shard (stable: repeats keep their order).
    std::fill(starts.begin(), starts.end(), 0u);
    for (uint64_t r = 0; r < n; ++r) {
      int64_t key;
      std::memcpy(&key, block.data() + r * record_floats, sizeof(key));
      if (keep != nullptr && !(*keep)(key)) {
        shard_of[r] = kDropped;
        continue;
      }
      hashes[r] = SparseTable::KeyHash(key);
      shard_of[r] = static_cast<uint32_t>(table.ShardOf(hashes[r]));
      ++starts[shard_of[r] + 1];
    }
    for (size_t i = 1; i < starts.size(); ++i) starts[i] += starts[i - 1];
    std::copy(starts.begin(), starts.end() - 1, next.begin());
    for (uint64_t r = 0; r < n; ++r) {
      if (shard_of[r] != kDropped) order[next[shard_of[r]]++] = static_cast<uint32_t>(r);
    }
    for (size_t sh = 0; sh < num_shards; ++sh) {
      if (starts[sh] == starts[sh + 1]) continue;
      const absl::Span<const uint32_t> rows(order.data() + starts[sh], starts[sh + 1] - starts[sh]);
      if (auto s = table.InsertRecords(sh, records, rows, stamp, loaded); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// LoadParts once every part is either checked or to be checked as it loads. Sets *changed once
// it has cleared the table or applied a row.
absl::StatusOr<uint64_t> LoadChecked(SparseTable& table, absl::Span<TableFileReader* const> parts,
                                     const absl::FunctionRef<bool(int64_t)>* keep, bool* changed) {
  bool has_base = false;  // base or values-only: the table starts again from the files
  for (TableFileReader* part : parts) has_base |= part->header().save_mode != proto::DELTA;
  if (has_base) {
    *changed = true;
    if (auto s = table.DropAllRows(); !s.ok()) return s;
  }
  // Size each shard's index for its share of the rows in the files (keys spread evenly over
  // shards by hash), plus slack, so the load rehashes once instead of at every growth step.
  uint64_t file_rows = 0;
  for (TableFileReader* part : parts) file_rows += part->header().row_count;
  const size_t num_shards = table.num_shards();
  const uint64_t share = file_rows / num_shards;
  // A large load's indexes (50 MB at 10M rows, every page faulted in) are sized by two threads,
  // half the shards each; so are a large part's rows below.
  const size_t half = file_rows >= kSplitRows && detail::HaveSecondCore() ? num_shards / 2 : 0;
  absl::Status reserved, helper_reserved;
  if (half > 0) {
    detail::RunBoth([&] { reserved = table.ReserveShards(half, num_shards, share, file_rows); },
                    [&] { helper_reserved = table.ReserveShards(0, half, share, file_rows); });
  } else {
    reserved = table.ReserveShards(0, num_shards, share, file_rows);
  }
  if (!reserved.ok()) return reserved;
  if (!helper_reserved.ok()) return helper_reserved;
  const uint32_t stamp = table.BeginBulkInsert();
  uint64_t loaded = 0;
  *changed = true;  // rows from here on
  for (TableFileReader* part : parts) {
    // A large part in two halves at once. A saved part holds its rows shard by shard, so the
    // halves mostly fill different shards and seldom wait for each other's shard locks.
    const uint64_t rows = part->header().row_count;
    const uint64_t middle = rows >= kSplitRows && detail::HaveSecondCore() ? rows / 2 : rows;
    std::atomic<bool> stop{false};
    uint64_t helper_loaded = 0;
    absl::Status status, helper_status;
    // CRCs of the two ranges when the part is checked as it loads.
    uint32_t crc = 0, helper_crc = 0;
    uint32_t* want_crc = part->checked() ? nullptr : &crc;
    uint32_t* want_helper_crc = part->checked() ? nullptr : &helper_crc;
    // Out of memory is a status here, never an exception: one escaping the helper thread would
    // end the server.
    auto load_range = [&](uint64_t begin, uint64_t end, uint64_t* count, uint32_t* range_crc) {
      absl::Status status;
      try {
        status = LoadRecords(table, *part, begin, end, stamp, keep, &stop, count, range_crc);
      } catch (const std::bad_alloc&) {
        status = absl::ResourceExhaustedError(absl::StrCat(
            table.Name(), ": out of memory loading rows ", begin, "-", end, " of ", part->path()));
      }
      if (!status.ok()) stop = true;
      return status;
    };
    if (middle < rows) {
      detail::RunBoth(
          [&] { status = load_range(0, middle, &loaded, want_crc); },
          [&] { helper_status = load_range(middle, rows, &helper_loaded, want_helper_crc); });
    } else {
      status = load_range(0, rows, &loaded, want_crc);
    }
    loaded += helper_loaded;
    if (!status.ok()) return status;
    if (!helper_status.ok()) return helper_status;
    if (!part->checked()) {
      const uint32_t body_crc =
          middle < rows
              ? CombineCrc(crc, helper_crc, (rows - middle) * SparseRecordBytes(part->header()))
              : crc;
      if (auto s = part->CheckContent(body_crc); !s.ok()) return s;
    }
  }
  table.EndBulkInsert(stamp);
  return loaded;
}

}  // namespace

absl::StatusOr<uint64_t> LoadParts(SparseTable& table, absl::Span<TableFileReader* const> parts,
                                   const absl::FunctionRef<bool(int64_t)>* keep) {
  for (TableFileReader* part : parts) {
    if (auto s = table.CheckPart(*part); !s.ok()) return s;
  }
  // Parts not yet checked are checked as they load only into an empty table, which a failure
  // empties again; a table holding rows must keep them when a part is damaged.
  if (table.RowCount() > 0) {
    for (TableFileReader* part : parts) {
      if (auto s = part->CheckNow(); !s.ok()) return s;  // no pass for a part checked before
    }
  }
  bool changed = false;
  auto loaded = LoadChecked(table, parts, keep, &changed);
  if (!loaded.ok() && changed) {
    // Never a partial table: a part found damaged as it loaded, or a load out of memory half
    // way, leaves the table empty, and the error says so.
    table.Clear();
    return absl::Status(loaded.status().code(), absl::StrCat(loaded.status().message(), "; ",
                                                             table.Name(), " is left empty"));
  }
  return loaded;
}

absl::StatusOr<uint64_t> LoadShard(SparseTable& table, absl::Span<TableFileReader* const> parts,
                                   uint32_t server_index, uint32_t num_servers,
                                   const KeyShardFn& owner) {
  if (num_servers == 0 || server_index >= num_servers) {
    return absl::InvalidArgumentError(absl::StrCat("server_index must be in [0, num_servers), got ",
                                                   server_index, " of ", num_servers));
  }
  if (num_servers == 1) return table.Load(parts);  // every key is this server's
  return table.Load(parts, [&](int64_t key) { return owner(key, num_servers) == server_index; });
}

absl::StatusOr<uint64_t> LoadShardFromFiles(SparseTable& table,
                                            const std::vector<std::string>& paths,
                                            uint32_t server_index, uint32_t num_servers) {
  if (auto s = CheckShard(server_index, num_servers); !s.ok()) return s;
  std::vector<std::unique_ptr<TableFileReader>> readers;
  std::vector<TableFileReader*> parts;
  // Opened to be checked as they load: SparseTable::Load checks them whole first when the
  // table holds rows.
  for (const auto& path : paths) {
    auto reader = TableFileReader::Open(path, TableFileReader::Check::kWhileReading);
    if (!reader.ok()) return reader.status();
    readers.push_back(std::move(*reader));
    parts.push_back(readers.back().get());
  }
  return LoadShard(table, parts, server_index, num_servers, HashKeyShard);
}

}  // namespace fleet::ps
