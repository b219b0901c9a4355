#pragma once
// Loading one server's share of a sparse table from saved parts, whatever number of servers
// wrote them: the rows whose keys the sharding gives to this server. A server's restore
// (server/detail/table_set.cc) and a table loaded on its own (tests, tools) both go through here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/sharding.h"
#include "ps/table/sparse_table.h"
#include "ps/table/table_file.h"

namespace fleet::ps {

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
