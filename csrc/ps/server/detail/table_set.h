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
#include "ps/sharding.h"
#include "ps/table/dense_table.h"
#include "ps/table/sparse_table.h"

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

  // Phase one of a save (checkpoint.h): writes this server's part of one table (or all) under
  // the directory of `save_id` in `dirname` and returns the parts written (their rows, sizes and
  // checksums). Errors name the file. Nothing counts as saved until CommitSave; without
  // `end_cycle` (an export) nothing ever does: the sparse tables' save cycles go on.
  absl::StatusOr<std::vector<proto::CheckpointFile>> Save(const std::string& dirname, bool all,
                                                          uint32_t table_id, proto::SaveMode mode,
                                                          const std::string& save_id,
                                                          bool end_cycle = true);
  // Phase two: with write_manifest, commits the manifest (CommitManifest); then, when
  // request.save_id is this server's latest save, counts it as done for the next delta save.
  absl::Status CommitSave(const proto::CommitSaveRequest& request);
  // Loads one table (or all) from the checkpoint in `dirname`, whatever number of servers wrote
  // it, keeping the rows this server owns. The manifest and every part of every selected table
  // are verified (sizes, checksums, table fields) before any table changes.
  absl::StatusOr<uint64_t> Load(const std::string& dirname, bool all, uint32_t table_id);
  absl::StatusOr<uint64_t> Shrink(uint32_t table_id, uint32_t max_unseen_saves);
  std::vector<proto::TableStats> Stats() const;
  // One line per table, for the start-up log.
  std::string Describe() const;

 private:
  TableSet(const proto::ServerConfig& config, const Sharding& sharding)
      : config_(config), sharding_(sharding) {}
  std::vector<uint32_t> Selected(bool all, uint32_t table_id) const;
  absl::StatusOr<uint64_t> LoadTable(uint32_t table_id, absl::Span<TableFileReader* const> parts);

  proto::ServerConfig config_;
  Sharding sharding_;
  std::map<uint32_t, std::unique_ptr<SparseTable>> sparse_;
  std::map<uint32_t, std::unique_ptr<DenseTable>> dense_;
  std::mutex admin_mu_;  // one save, load or shrink at a time
  // The latest save written and not yet committed: its id and, per sparse table, its cycle.
  std::string pending_save_id_;
  std::vector<std::pair<uint32_t, uint32_t>> pending_cycles_;
};

}  // namespace fleet::ps::detail
