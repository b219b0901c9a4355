#include "ps/table/shard_load.h"

#include <memory>

#include "absl/strings/str_cat.h"

namespace fleet::ps {
namespace {

absl::Status CheckShard(uint32_t server_index, uint32_t num_servers) {
  if (num_servers > 0 && server_index < num_servers) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("server_index must be in [0, num_servers), got ",
                                                 server_index, " of ", num_servers));
}

}  // namespace

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
