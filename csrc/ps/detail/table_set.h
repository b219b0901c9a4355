#pragma once
// The tables of one server, built from its ServerConfig, and the server-level operations over
// them (save and load directories, shrink, stats). The gRPC service calls into this.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/ps/ps.pb.h"
#include "ps/dense_table.h"
#include "ps/sharding.h"
#include "ps/sparse_table.h"

namespace fleet::ps::detail {

class TableSet {
 public:
  // InvalidArgument for a bad config (server index, duplicate table id, bad table).
  static absl::StatusOr<std::unique_ptr<TableSet>> Create(const proto::ServerConfig& config,
                                                          const Sharding& sharding);

  const proto::ServerConfig& config() const { return config_; }
  // NotFound naming the id when there is no such table of that type.
  absl::StatusOr<SparseTable*> Sparse(uint32_t table_id) const;
  absl::StatusOr<DenseTable*> Dense(uint32_t table_id) const;

  // Saves one table (or all) under `dirname` (table_file.h); returns rows written. A base save
  // removes this server's older delta parts of the table from the directory.
  absl::StatusOr<uint64_t> Save(const std::string& dirname, bool all, uint32_t table_id,
                                proto::SaveMode mode);
  // Loads one table (or all) from every part in `dirname`, whatever number of servers wrote
  // them, keeping the rows this server owns. All parts are opened and verified first.
  absl::StatusOr<uint64_t> Load(const std::string& dirname, bool all, uint32_t table_id);
  absl::StatusOr<uint64_t> Shrink(uint32_t table_id, uint32_t max_unseen_saves);
  std::vector<proto::TableStats> Stats() const;
  // One line per table, for the start-up log.
  std::string Describe() const;

 private:
  TableSet(const proto::ServerConfig& config, const Sharding& sharding)
      : config_(config), sharding_(sharding) {}
  std::vector<uint32_t> Selected(bool all, uint32_t table_id) const;
  absl::StatusOr<uint64_t> LoadTable(const std::string& dirname, uint32_t table_id);

  proto::ServerConfig config_;
  Sharding sharding_;
  std::map<uint32_t, std::unique_ptr<SparseTable>> sparse_;
  std::map<uint32_t, std::unique_ptr<DenseTable>> dense_;
  std::mutex admin_mu_;  // one save, load or shrink at a time
};

}  // namespace fleet::ps::detail
