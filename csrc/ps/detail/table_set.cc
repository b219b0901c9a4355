#include "ps/detail/table_set.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleet::ps::detail {
namespace {

const char* RuleName(const proto::OptimizerConfig& optimizer) {
  switch (optimizer.rule_case()) {
    case proto::OptimizerConfig::kSgd:
      return "sgd";
    case proto::OptimizerConfig::kAdagrad:
      return "adagrad";
    case proto::OptimizerConfig::kAdam:
      return "adam";
    default:
      return "none";
  }
}

// Removes `server_index`'s delta parts of a table, so that a directory re-saved as base does not
// reload stale deltas on top of it.
void RemoveDeltaParts(const std::string& dirname, uint32_t table_id, uint32_t server_index) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string prefix = absl::StrCat("part-", server_index, "-of-");
  for (const auto& entry :
       fs::directory_iterator(fs::path(dirname) / absl::StrCat("table_", table_id), ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, prefix) && absl::StrContains(name, ".delta-")) {
      fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TableSet>> TableSet::Create(const proto::ServerConfig& config,
                                                           const Sharding& sharding) {
  if (config.num_servers() == 0 || config.server_index() >= config.num_servers()) {
    return absl::InvalidArgumentError(absl::StrCat("server config: server_index ",
                                                   config.server_index(), " with num_servers ",
                                                   config.num_servers()));
  }
  std::unique_ptr<TableSet> set(new TableSet(config, sharding));
  for (const auto& table : config.tables()) {
    const uint32_t id = table.table_id();
    if (set->sparse_.count(id) || set->dense_.count(id)) {
      return absl::InvalidArgumentError(absl::StrCat("server config: table id ", id, " twice"));
    }
    if (table.type() == proto::SPARSE) {
      auto sparse = SparseTable::Create(table);
      if (!sparse.ok()) return sparse.status();
      set->sparse_[id] = std::move(*sparse);
    } else {
      auto dense = DenseTable::Create(table, config.server_index(), config.num_servers(),
                                      sharding.block_to_server);
      if (!dense.ok()) return dense.status();
      set->dense_[id] = std::move(*dense);
    }
  }
  return set;
}

absl::StatusOr<SparseTable*> TableSet::Sparse(uint32_t table_id) const {
  auto it = sparse_.find(table_id);
  if (it != sparse_.end()) return it->second.get();
  return absl::NotFoundError(
      absl::StrCat("no sparse table ", table_id, " on server ", config_.server_index()));
}

absl::StatusOr<DenseTable*> TableSet::Dense(uint32_t table_id) const {
  auto it = dense_.find(table_id);
  if (it != dense_.end()) return it->second.get();
  return absl::NotFoundError(
      absl::StrCat("no dense table ", table_id, " on server ", config_.server_index()));
}

std::vector<uint32_t> TableSet::Selected(bool all, uint32_t table_id) const {
  if (!all) return {table_id};
  std::vector<uint32_t> ids;
  for (const auto& table : config_.tables()) ids.push_back(table.table_id());
  return ids;
}

absl::StatusOr<uint64_t> TableSet::Save(const std::string& dirname, bool all, uint32_t table_id,
                                        proto::SaveMode mode) {
  std::lock_guard<std::mutex> lock(admin_mu_);
  const uint32_t index = config_.server_index();
  const uint32_t servers = config_.num_servers();
  uint64_t rows = 0;
  for (uint32_t id : Selected(all, table_id)) {
    absl::StatusOr<uint64_t> written;
    if (auto it = sparse_.find(id); it != sparse_.end()) {
      const bool delta = mode == proto::DELTA;
      if (!delta) RemoveDeltaParts(dirname, id, index);
      const std::string path = (std::filesystem::path(dirname) /
                                PartFileName(id, index, servers, delta, it->second->epoch()))
                                   .string();
      written = it->second->Save(path, mode);
    } else if (auto jt = dense_.find(id); jt != dense_.end()) {
      RemoveDeltaParts(dirname, id, index);
      written = jt->second->Save(
          (std::filesystem::path(dirname) / PartFileName(id, index, servers, false, 0)).string());
    } else {
      return absl::NotFoundError(absl::StrCat("save: no table ", id, " on server ", index));
    }
    if (!written.ok()) return written.status();
    rows += *written;
  }
  return rows;
}

absl::StatusOr<uint64_t> TableSet::LoadTable(const std::string& dirname, uint32_t table_id) {
  auto paths = ListPartFiles(dirname, table_id);
  if (!paths.ok()) return paths.status();
  std::vector<std::unique_ptr<TableFileReader>> readers;
  std::vector<TableFileReader*> parts;
  for (const std::string& path : *paths) {
    auto reader = TableFileReader::Open(path);
    if (!reader.ok()) return reader.status();
    parts.push_back(reader->get());
    readers.push_back(std::move(*reader));
  }
  if (auto it = sparse_.find(table_id); it != sparse_.end()) {
    const uint32_t index = config_.server_index();
    const uint32_t servers = config_.num_servers();
    const KeyShardFn& owner = sharding_.key_to_server;
    return it->second->Load(parts, [&](int64_t key) { return owner(key, servers) == index; });
  }
  if (auto it = dense_.find(table_id); it != dense_.end()) return it->second->Load(parts);
  return absl::NotFoundError(
      absl::StrCat("load: no table ", table_id, " on server ", config_.server_index()));
}

absl::StatusOr<uint64_t> TableSet::Load(const std::string& dirname, bool all, uint32_t table_id) {
  std::lock_guard<std::mutex> lock(admin_mu_);
  uint64_t rows = 0;
  for (uint32_t id : Selected(all, table_id)) {
    auto loaded = LoadTable(dirname, id);
    if (!loaded.ok()) return loaded.status();
    rows += *loaded;
  }
  return rows;
}

absl::StatusOr<uint64_t> TableSet::Shrink(uint32_t table_id, uint32_t max_unseen_saves) {
  std::lock_guard<std::mutex> lock(admin_mu_);
  auto table = Sparse(table_id);
  if (!table.ok()) return table.status();
  return (*table)->Shrink(max_unseen_saves);
}

std::vector<proto::TableStats> TableSet::Stats() const {
  std::vector<proto::TableStats> stats;
  for (const auto& [id, table] : dense_) stats.push_back(table->Stats());
  for (const auto& [id, table] : sparse_) stats.push_back(table->Stats());
  return stats;
}

std::string TableSet::Describe() const {
  std::vector<std::string> lines;
  for (const auto& table : config_.tables()) {
    const uint32_t id = table.table_id();
    if (auto it = sparse_.find(id); it != sparse_.end()) {
      const SparseTable& t = *it->second;
      lines.push_back(absl::StrCat("sparse table ", id, " '", table.name(), "': dim ", t.dim(),
                                   ", ", RuleName(table.optimizer()), " (", t.row_width(),
                                   " floats a row), count filter ",
                                   table.count_filter().min_count()));
    } else {
      const DenseTable& t = *dense_.at(id);
      lines.push_back(absl::StrCat("dense table ", id, " '", table.name(), "': dim ",
                                   t.layout().dim, ", ", RuleName(table.optimizer()), ", ",
                                   t.Stats().rows(), " blocks of ", t.layout().block_size,
                                   " here (", t.local_size(), " floats)"));
    }
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace fleet::ps::detail
