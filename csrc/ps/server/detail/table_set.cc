#include "ps/server/detail/table_set.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ps/table/checkpoint.h"
#include "ps/table/detail/memory.h"
#include "ps/table/shard_load.h"

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

// The manifest entry of a part just written.
absl::StatusOr<proto::CheckpointFile> DescribePart(const std::string& dirname,
                                                   const std::string& relative,
                                                   const proto::TableConfig& table, uint32_t server,
                                                   uint32_t servers) {
  const std::string path = (std::filesystem::path(dirname) / relative).string();
  auto header = ReadTableFileHeader(path);
  if (!header.ok()) return header.status();
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", ec.message()));
  proto::CheckpointFile file;
  file.set_path(relative);
  file.set_table_id(table.table_id());
  file.set_type(table.type());
  file.set_dim(table.dim());
  file.set_server_index(server);
  file.set_num_servers(servers);
  file.set_mode(static_cast<proto::SaveMode>(header->save_mode));
  file.set_rows(header->row_count);
  file.set_bytes(bytes);
  file.set_crc32(header->checksum);
  return file;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TableSet>> TableSet::Create(const proto::ServerConfig& config,
                                                           const Sharding& sharding) {
  if (config.num_servers() == 0 || config.server_index() >= config.num_servers()) {
    return absl::InvalidArgumentError(absl::StrCat("server config: server_index ",
                                                   config.server_index(), " with num_servers ",
                                                   config.num_servers()));
  }
  // All dense tables together must fit, checked before any is allocated.
  uint64_t dense_bytes = 0;
  for (const auto& table : config.tables()) {
    if (table.type() != proto::DENSE) continue;
    const uint64_t bytes = DenseTable::EstimateBytes(table, config.num_servers());
    auto fits = CheckMemory(bytes, absl::StrCat("dense table ", table.table_id(), " '",
                                                table.name(), "' (dim ", table.dim(), ")"));
    if (!fits.ok()) return fits;
    dense_bytes = bytes > UINT64_MAX - dense_bytes ? UINT64_MAX : dense_bytes + bytes;
  }
  if (auto s = CheckMemory(dense_bytes, "the dense tables of this server together"); !s.ok()) {
    return s;
  }
  std::unique_ptr<TableSet> set(new TableSet(config, sharding));
  for (const auto& table : config.tables()) {
    const uint32_t id = table.table_id();
    if (set->sparse_.count(id) || set->dense_.count(id)) {
      return absl::InvalidArgumentError(absl::StrCat("server config: table id ", id, " twice"));
    }
    if (table.type() == proto::SPARSE) {
      // An SSD table's database: one per table per server under its ssd_path, so that the
      // servers of one machine (or a shared path) never open each other's.
      proto::TableConfig local = table;
      if (table.storage() == "ssd" && !table.ssd_path().empty()) {
        local.set_ssd_path((std::filesystem::path(table.ssd_path()) /
                            absl::StrCat("table_", id, ".server_", config.server_index()))
                               .string());
      }
      auto sparse = SparseTable::Create(local);
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

absl::StatusOr<std::vector<proto::CheckpointFile>> TableSet::Save(const std::string& dirname,
                                                                  bool all, uint32_t table_id,
                                                                  proto::SaveMode mode,
                                                                  const std::string& save_id,
                                                                  bool end_cycle) {
  if (auto s = CheckDirname(dirname, "save"); !s.ok()) return s;
  if (auto s = CheckSaveId(save_id); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(admin_mu_);
  const uint32_t index = config_.server_index();
  const uint32_t servers = config_.num_servers();
  std::vector<proto::CheckpointFile> files;
  std::vector<std::pair<uint32_t, uint32_t>> cycles;
  for (uint32_t id : Selected(all, table_id)) {
    absl::StatusOr<uint64_t> written;
    std::string relative;
    const proto::TableConfig* config = nullptr;
    if (auto it = sparse_.find(id); it != sparse_.end()) {
      relative = PartPath(save_id, id, index, servers, mode == proto::DELTA);
      uint32_t cycle = 0;
      written = it->second->WritePart((std::filesystem::path(dirname) / relative).string(), mode,
                                      &cycle, end_cycle);
      if (end_cycle) cycles.emplace_back(id, cycle);
      config = &it->second->config();
    } else if (auto jt = dense_.find(id); jt != dense_.end()) {
      // Dense tables always write every block: their part is a base part in any mode.
      relative = PartPath(save_id, id, index, servers, false);
      written = jt->second->Save((std::filesystem::path(dirname) / relative).string());
      config = &jt->second->config();
    } else {
      return absl::NotFoundError(absl::StrCat("save: no table ", id, " on server ", index));
    }
    if (!written.ok()) return written.status();
    auto file = DescribePart(dirname, relative, *config, index, servers);
    if (!file.ok()) return file.status();
    files.push_back(std::move(*file));
  }
  pending_save_id_ = save_id;
  pending_cycles_ = std::move(cycles);
  return files;
}

absl::Status TableSet::CommitSave(const proto::CommitSaveRequest& request) {
  std::lock_guard<std::mutex> lock(admin_mu_);
  if (request.write_manifest()) {
    if (auto s = CommitManifest(request); !s.ok()) return s;
  }
  if (!request.save_id().empty() && request.save_id() == pending_save_id_) {
    for (auto [id, cycle] : pending_cycles_) sparse_.at(id)->CommitCycle(cycle);
    pending_save_id_.clear();
    pending_cycles_.clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TableSet::LoadTable(uint32_t table_id,
                                             absl::Span<TableFileReader* const> parts) {
  if (auto it = sparse_.find(table_id); it != sparse_.end()) {
    return LoadShard(*it->second, parts, config_.server_index(), config_.num_servers(),
                     sharding_.key_to_server);
  }
  if (auto it = dense_.find(table_id); it != dense_.end()) return it->second->Load(parts);
  return absl::NotFoundError(
      absl::StrCat("load: no table ", table_id, " on server ", config_.server_index()));
}

absl::StatusOr<uint64_t> TableSet::Load(const std::string& dirname, bool all, uint32_t table_id) {
  std::lock_guard<std::mutex> lock(admin_mu_);
  auto manifest = ReadManifest(dirname);
  if (!manifest.ok()) return manifest.status();
  // Sparse tables first (see below).
  std::vector<uint32_t> selected = Selected(all, table_id);
  std::stable_partition(selected.begin(), selected.end(),
                        [&](uint32_t id) { return sparse_.count(id) != 0; });
  // Every part of every selected table is checked (manifest entry, then the whole body's
  // checksum) before any table changes. When every selected sparse table is empty (a job
  // restoring at start) their parts are checked as they load instead, a pass over the files
  // less: a damaged part then empties them all again, the state they had. Sparse tables load
  // first, so that no dense table has changed by then.
  bool sparse_empty = true;
  for (uint32_t id : selected) {
    if (auto it = sparse_.find(id); it != sparse_.end())
      sparse_empty &= it->second->RowCount() == 0;
  }
  std::vector<std::pair<uint32_t, std::vector<std::unique_ptr<TableFileReader>>>> tables;
  for (uint32_t id : selected) {
    const proto::TableConfig* config = nullptr;
    for (const auto& table : config_.tables()) {
      if (table.table_id() == id) config = &table;
    }
    if (config == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("load: no table ", id, " on server ", config_.server_index()));
    }
    auto paths = CheckedParts(dirname, *manifest, *config);
    if (!paths.ok()) return paths.status();
    auto& readers = tables.emplace_back(id, std::vector<std::unique_ptr<TableFileReader>>()).second;
    const auto check = sparse_.count(id) != 0 && sparse_empty
                           ? TableFileReader::Check::kWhileReading
                           : TableFileReader::Check::kNow;
    for (const std::string& path : *paths) {
      auto reader = TableFileReader::Open(path, check);
      if (!reader.ok()) return reader.status();
      readers.push_back(std::move(*reader));
    }
  }
  uint64_t rows = 0;
  for (auto& [id, readers] : tables) {
    std::vector<TableFileReader*> parts;
    for (auto& reader : readers) parts.push_back(reader.get());
    auto loaded = LoadTable(id, parts);
    if (!loaded.ok()) {
      if (!sparse_empty) return loaded.status();
      int emptied = 0;
      for (uint32_t other : selected) {
        auto it = sparse_.find(other);
        if (it == sparse_.end() || other == id || it->second->RowCount() == 0) continue;
        it->second->Clear();
        ++emptied;
      }
      if (emptied == 0) return loaded.status();
      const std::string others = emptied == 1
                                     ? "so is the other sparse table"
                                     : absl::StrCat("so are the ", emptied, " other sparse tables");
      return absl::Status(loaded.status().code(), absl::StrCat(loaded.status().message(), "; ",
                                                               others, " this load had filled"));
    }
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
      lines.push_back(
          absl::StrCat("sparse table ", id, " '", table.name(), "': dim ", t.dim(), ", ",
                       RuleName(table.optimizer()), " (", t.row_width(),
                       " floats a row), count filter ", table.count_filter().min_count(),
                       table.storage() == "ssd"
                           ? absl::StrCat(", storage ssd (", table.memory_budget_mb(),
                                          " MiB in memory, the rest under ", table.ssd_path(), ")")
                           : ""));
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
