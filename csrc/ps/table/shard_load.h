#pragma once
// The checkpoint loader of sparse tables: saved parts read into a table through its bulk insert
// (SparseTable::InsertRecords), and one server's share of them, whatever number of servers
// wrote them: the rows whose keys the sharding gives to this server. A server's restore
// (server/detail/table_set.cc) and a table loaded on its own (tests, tools) both go through here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/sharding.h"
#include "ps/table/sparse_table.h"
#include "ps/table/table_file.h"

namespace fleet::ps {

// SparseTable::Load's work (its contract is there): the parts checked against the table, then
// read a block at a time and inserted shard by shard, a large part in two halves on two
// threads, its CRC computed as it loads when it was not checked before; a failure once rows
// changed empties the table. Keeps the keys for which (*keep)(key) is true, every key when
// `keep` is null (no call per key).
absl::StatusOr<uint64_t> LoadParts(SparseTable& table, absl::Span<TableFileReader* const> parts,
                                   const absl::FunctionRef<bool(int64_t)>* keep);

// Loads into `table` the rows of `parts` (see SparseTable::Load) whose keys `owner` gives to
// server `server_index` of `num_servers`; every row when num_servers is 1. Returns the rows
// loaded. InvalidArgument unless server_index < num_servers.
absl::StatusOr<uint64_t> LoadShard(SparseTable& table, absl::Span<TableFileReader* const> parts,
                                   uint32_t server_index, uint32_t num_servers,
                                   const KeyShardFn& owner);

// The same from the part files at `paths`, under the default sharding (HashKeyShard), checked
// as they load into an empty table and whole first into one holding rows (as a restore does).
// NotFound or DataLoss naming a file that is missing or damaged.
absl::StatusOr<uint64_t> LoadShardFromFiles(SparseTable& table,
                                            const std::vector<std::string>& paths,
                                            uint32_t server_index, uint32_t num_servers);

}  // namespace fleet::ps
