#pragma once
// A checkpoint directory: the manifest that makes the part files (table_file.h) of one save a
// unit, so that a load sees a whole save or refuses.
//
//   <dir>/ps_manifest.json                   the committed manifest: CheckpointManifest of
//                                            ps.proto as protobuf JSON, written last
//   <dir>/ps-<save id>/table_<id>/part-<server>-of-<servers>.base   (.delta for delta saves)
//
// A save has two phases (PsClient::Save). First every server writes its parts of the tables
// under a fresh save id and replies with their sizes and checksums. Then server 0 checks that
// there is one part per server of every table, merges them into the manifest and renames it
// into place (temporary file, fsync, rename, fsync of the directory). Until that rename nothing
// of the new save is visible, so a save interrupted by a crash or a full disk leaves the
// previous manifest and every file it names intact.
//
// Per table the manifest holds a chain: the latest base save, then the delta saves since, in
// order; a base save starts a new chain, a delta save extends it (a delta save into a directory
// without that table starts a chain of deltas, to be loaded on top of a table loaded before).
// After each commit, server 0 removes the ps-* directories, table directories and temporary
// files that the manifest no longer names (those of replaced or interrupted saves). Nothing else
// in <dir> is touched: a worker may keep its own files there. One save into a directory at a time.
//
// A load reads the manifest and refuses, naming the file, table and field at fault: a missing
// part, a part whose size or checksum differs from the manifest, a table saved with another
// type or dim, a save without exactly one part per server.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/ps/ps.pb.h"
#include "ps/save_names.h"

namespace fleet::ps {

inline constexpr char kManifestName[] = "ps_manifest.json";
inline constexpr uint32_t kManifestVersion = 1;

// Path of a part relative to the checkpoint directory.
std::string PartPath(const std::string& save_id, uint32_t table_id, uint32_t server_index,
                     uint32_t num_servers, bool delta);

// The manifest of `dirname`. NotFound naming the directory when there is none (no save was
// ever committed there), DataLoss naming the file when it cannot be parsed.
absl::StatusOr<proto::CheckpointManifest> ReadManifest(const std::string& dirname);

// Phase two of a save, on server 0: checks `request.files` (one part per server of each table,
// each at its path with its size), merges them into the manifest of request.dirname and commits
// it, then removes what the manifest no longer names.
absl::Status CommitManifest(const proto::CommitSaveRequest& request);

// The parts of table `table` (as this server configures it) to load from the checkpoint, in
// order: the base parts, then the parts of each delta save. Each is checked against the
// manifest (present, size, checksum and table fields of its header) without reading its body.
// NotFound when the manifest holds no such table or a part is missing; InvalidArgument when the
// table was saved with another type or dim; DataLoss for a damaged or incomplete save.
absl::StatusOr<std::vector<std::string>> CheckedParts(const std::string& dirname,
                                                      const proto::CheckpointManifest& manifest,
                                                      const proto::TableConfig& table);

}  // namespace fleet::ps
